"""The CLI harnesses through the real runner (`benchctl run` in process): registry names, tool
versions and artifacts in meta.json, follow-ups resuming the CLI session, harness files kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchctl.harness import create_harness
from benchctl.jsonio import read_json, read_jsonl
from tests.rigs.cli_harness import need_binary
from tests.rigs.run import make_scripted_task, run_inprocess, runs

pytestmark = [pytest.mark.docker, pytest.mark.cli_binaries]

EXTRA = """
[early_exit]
enabled = false

[[followups]]
prompt = "Now add a second line to the report."
"""

TURNS = {
    "claude-code": [
        {
            "text": "Reading.",
            "tool_calls": [{"name": "Bash", "input": {"command": "cat /data/app.log", "description": "read"}}],
        },
        {
            "tool_calls": [
                {"name": "Write", "input": {"file_path": "/work/report.md", "content": "disk full on db-1\n"}}
            ]
        },
        {"text": "Done."},
        {
            "tool_calls": [
                {
                    "name": "Write",
                    "input": {"file_path": "/work/report.md", "content": "disk full on db-1\nsecond line\n"},
                }
            ]
        },
        {"text": "Follow-up done."},
    ],
    "codex": [
        {"text": "Reading.", "tool_calls": [{"name": "exec_command", "input": {"cmd": "cat /data/app.log"}}]},
        {
            "tool_calls": [
                {
                    "name": "apply_patch",
                    "input": "*** Begin Patch\n*** Add File: report.md\n+disk full on db-1\n*** End Patch\n",
                }
            ]
        },
        {"text": "Done."},
        {"tool_calls": [{"name": "exec_command", "input": {"cmd": "echo 'second line' >> /work/report.md"}}]},
        {"text": "Follow-up done."},
    ],
}


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_runner_runs_the_cli_harness_with_a_followup(harness: str, tmp_path: Path) -> None:
    need_binary(create_harness(harness))  # type: ignore[arg-type]
    task, model = make_scripted_task(tmp_path, TURNS[harness], EXTRA, name=f"cli{harness[:2]}")
    assert run_inprocess(task, model, tmp_path / "out", budget="1m", harnesses=[harness]) == 0
    (run,) = runs(tmp_path / "out")
    meta: dict[str, Any] = read_json(run / "meta.json")
    assert meta["status"] == "completed", meta["error"]
    assert meta["harness"] == harness and meta["tool_versions"] == {harness: create_harness(harness).binary.version}  # type: ignore[attr-defined]
    assert (run / "artifacts" / "report.md").read_text() == "disk full on db-1\n"
    (follow,) = meta["followups"]
    assert follow["status"] == "completed"
    assert "second line" in (run / "artifacts" / follow["artifacts"][0]).read_text()
    events = read_jsonl(run / "transcript.jsonl")
    starts = [e for e in events if e["type"] == "harness_event" and e.get("kind") == "start"]
    assert [s["phase"] for s in starts] == [1, 2] and starts[1]["resume"]
    assert any(e["type"] == "tool_result" and "disk full on db-1" in e["output"] for e in events)
    assert {p.name for p in (run / "harness").iterdir()} >= {f"{harness}.1.exit.json", f"{harness}.2.exit.json"}
