"""The ReAct loop over every wire API (Anthropic, OpenAI Responses, chat completions, Gemini),
each through the real gateway to the scripted model, which answers in the caller's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rigs.run import bash, make_scripted_task, only_run, run_inprocess, tool

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("wire", ["anthropic", "responses", "chat", "gemini"])
def test_each_wire_api_runs_tools_and_policies(tmp_path: Path, wire: str) -> None:
    turns = [
        bash("grep -c ERROR /data/app.log"),
        tool("create", path="report.md", file_text="one ERROR line: disk full\n"),
        {"text": "done"},
        tool("submit"),
    ]
    extra = (
        f'[early_exit]\nfraction = 0.9\nmax_reprompts = 1\n[length]\nfile = "report.md"\nmax_words = 100\n'
        f'[harness_options]\nwire = "{wire}"\nreasoning_effort = "low"\n'
    )
    task, model = make_scripted_task(tmp_path, turns, extra)
    assert run_inprocess(task, model, tmp_path / "out", budget="1m") == 0
    meta, ev, run = only_run(tmp_path / "out")
    assert meta["status"] == "completed", meta.get("error")
    results = [e for e in ev if e["type"] == "tool_result"]
    assert results[0]["output"].startswith("1\n")  # the bash call really ran in the sandbox
    assert [e["kind"] for e in ev if e["type"] == "notice"] == ["time", "words", "time", "time"]
    assert [e["type"] for e in ev].count("reprompt") == 1
    assert (run / "artifacts" / "report.md").read_text() == "one ERROR line: disk full\n"
    assert meta["turns"] == 4 and meta["gateway"]["calls"] == 4
