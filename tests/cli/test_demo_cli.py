"""The demo with the CLI harnesses (docs/getting-started.md): `benchctl run configs/demo --harness claude-code|codex`
with the scripted investigators, end to end through the real CLI binary, the real gateway and the
real Docker sandbox, then `benchctl grade` with the fake judge.

What reached the model is checked in the request bodies themselves, rebuilt from the transcript's
`model_call` events (benchctl.gateway.recording.reconstruct): a notice in the transcript proves the
hook ran, a notice in the next request proves the agent saw it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchctl.gateway.recording import reconstruct
from benchctl.jsonio import read_json, read_jsonl
from tests.rigs.cli_harness import claude_notice_next_to, codex_notice_next_to, contains, need_binary
from tests.rigs.run import cli

pytestmark = [pytest.mark.docker, pytest.mark.cli_binaries]

FAKE_JUDGE = "scripted/py:benchctl.grading.fake_judge:judge"
EARLY_EXIT_TEXT = "Do not stop yet"
FIRST_DRAFT_WORDS = "[benchctl] report.md: 55 words; 95 more to reach the minimum of 150"
FACTS = ("## TLDR", "## Timeline", "203.0.113.77", "svc-backup", "02:13:05", "42 wiki pages", "v2.3.1")


@dataclass(frozen=True)
class Case:
    harness: str
    script: str
    tool_calls: list[str]  # tool names as the transcript records them
    notice_next_to: Callable[[dict[str, Any], str], bool]
    # the ids the model's requests know the tool calls by: Claude Code's stream uses the API's
    # tool_use ids; Codex's stream uses item ids, so its hooks' call ids are the ones to look for
    request_ids: Callable[[list[dict[str, Any]]], list[str]]


CASES = {
    "claude-code": Case(
        "claude-code",
        "configs/demo/investigator-claude-code.json",
        ["Bash"] * 3 + ["Write", "Bash"] + ["Edit"] * 3,
        claude_notice_next_to,
        lambda ev: [e["id"] for e in ev if e["type"] == "tool_call"],
    ),
    "codex": Case(
        "codex",
        "configs/demo/investigator-codex.json",
        ["exec_command"] * 3 + ["apply_patch", "exec_command"] + ["apply_patch"] * 3,
        codex_notice_next_to,
        lambda ev: [e["tool_id"] for e in ev if e["type"] == "hook" and e["event"] == "PostToolUse"],
    ),
}


def _harness(name: str) -> Any:
    from benchctl.harness import create_harness as create

    return create(name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_demo_runs_and_grades_with_the_cli_harness(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    need_binary(_harness(name))
    out = tmp_path / "demo"
    t0 = time.time()
    r = cli(
        "run",
        "configs/demo",
        "--harness",
        case.harness,
        "--model",
        f"scripted/{case.script}",
        "--budget",
        "2m",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert time.time() - t0 < 60  # a scripted run takes seconds; the 2m budget is never used up
    (run,) = list((out / "runs").iterdir())
    meta = read_json(run / "meta.json")
    assert meta["status"] == "completed", meta.get("error")
    assert meta["harness"] == case.harness and meta["exit_code"] == 0
    assert meta["reprompts"] == 1 and meta["revision_requests"] == 0

    # The report was written by the CLI's own file tools and collected.
    report = (run / "artifacts" / "report.md").read_text()
    for fact in FACTS:
        assert fact in report, fact
    assert 150 <= len(report.split()) <= 600

    ev = read_jsonl(run / "transcript.jsonl")
    assert [e["name"] for e in ev if e["type"] == "tool_call"] == case.tool_calls
    results = [e for e in ev if e["type"] == "tool_result"]
    assert len(results) == len(case.tool_calls) and not any(e["is_error"] for e in results)
    assert "37 user=svc-backup ip=203.0.113.77" in results[1]["output"]  # the shell really ran on /data
    bodies = list(reconstruct(ev).values())
    assert len(bodies) == len([e for e in ev if e["type"] == "model_call"]) == 10

    # A time notice after every tool result, in the transcript and in the next request to the model.
    ids = case.request_ids(ev)
    assert len(ids) == len(results)
    time_notices = [e for e in ev if e["type"] == "notice" and e["kind"] == "time"]
    assert [n["tool_id"] for n in time_notices] == ids
    for tool_id in ids:
        assert any(case.notice_next_to(b, tool_id) for b in bodies), f"no time notice next to {tool_id}"

    # Word counts after each write of report.md (the Write/Add and the three edits), seen by the model.
    words = [e["text"] for e in ev if e["type"] == "notice" and e["kind"] == "words"]
    assert len(words) == 4 and words[0].startswith(FIRST_DRAFT_WORDS) and "within the window" in words[-1]
    assert any(contains(b, FIRST_DRAFT_WORDS) for b in bodies)

    # Stopping early (turn 5) was refused once through the Stop hook; the agent carried on.
    (reprompt,) = [e for e in ev if e["type"] == "reprompt"]
    assert reprompt["reason"] == "reprompt" and EARLY_EXIT_TEXT in reprompt["text"]
    stops = [e["decision"] for e in ev if e["type"] == "hook" and e["event"] == "Stop"]
    assert stops == ["reprompt", "stop"]
    after = [e["text"] for e in ev if e["type"] == "assistant" and e["seq"] > reprompt["seq"]]
    assert after[0].startswith("Continuing:") and after[-1].startswith("The report is complete")
    assert sum(contains(b, EARLY_EXIT_TEXT) for b in bodies) == 5  # the 5 requests after the reprompt

    # Grading the run with the fake judge scores the collected report.
    g = cli("grade", str(out), "--judge", FAKE_JUDGE)
    assert g.returncode == 0, g.stderr
    coverage = read_json(out / "grades" / "coverage" / f"{run.name}.json")
    assert coverage["status"] == "scored" and coverage["score"] > 0
    tldr = read_json(out / "grades" / "tldr" / f"{run.name}.json")
    assert tldr["status"] == "scored" and tldr["score"] > 0
