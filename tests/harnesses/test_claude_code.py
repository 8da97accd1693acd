"""The claude-code harness with the real Claude Code CLI, real Docker and the real gateway,
against a scripted Anthropic upstream (FakeUpstreamServer). Tool names and shapes: CLI_FACTS.md."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harnesses.claude_code import ClaudeCodeHarness
from tests.rigs.cli_harness import (
    MAIN_POLICIES,
    NO_POLICIES,
    PROBE,
    REAL_KEY,
    assert_fallback_served,
    assert_key_never_reached_the_sandbox,
    claude_notice_next_to,
    cli_rig,
    contains,
    refusing,
)

pytestmark = [pytest.mark.docker, pytest.mark.cli_binaries]

PRIMARY, FALLBACK = "claude-opus-5-5", "claude-opus-4-1"
LONG_REPORT = "# Report\n\nalpha beta gamma delta epsilon zeta eta\n"  # 9 words, limit 5
SHORT_REPORT = "# Report\n\nalpha beta\n"
# Settings files the agent can write; with them Claude Code would run no hooks in the next phase.
TAMPER = (
    "mkdir -p ~/.claude /work/.claude; echo '{\"disableAllHooks\": true}' | "
    "tee ~/.claude/settings.json /work/.claude/settings.json"
)
# Claude Code's Bash tool rejects a standalone `sleep N` at once; a python sleep really runs.
LONG_COMMAND = {
    "name": "Bash",
    "input": {"command": "python3 -c 'import time; time.sleep(300)'", "timeout": 600000, "description": "wait"},
}


def write(content: str) -> dict[str, Any]:
    return {"name": "Write", "input": {"file_path": "/work/report.md", "content": content}}


def bash(command: str) -> dict[str, Any]:
    return {"name": "Bash", "input": {"command": command, "description": "run a command"}}


def test_tools_notices_early_exit_revision_followup_and_secrecy(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "turns": [
            {"text": "Let me look around.", "tool_calls": [bash(PROBE)]},
            {"tool_calls": [write(LONG_REPORT)]},
            {"text": "Done."},  # too early: reprompted
            {"tool_calls": [bash("wc -w /work/report.md; " + TAMPER)]},  # ...the run goes on (and tries to cheat)
            {"text": "Done again."},  # over the limit: revision request
            {"tool_calls": [write(SHORT_REPORT)]},
            {"text": "Final."},
            {"text": "Follow-up answered."},
        ]
    }
    h = ClaudeCodeHarness()
    with cli_rig(
        h, monkeypatch, sandbox_image, model=f"anthropic/{PRIMARY}", by_model={PRIMARY: script}, policies=MAIN_POLICIES
    ) as rig:
        result = h.run(rig.ctx)
        assert result.status == "completed", result.error
        assert result.exit_code == 0 and result.session_id
        bodies = rig.bodies()
        assert len(bodies) == 7

        # Every tool result reached the model with the time remaining right next to it.
        calls = rig.events("tool_call")
        assert [c["name"] for c in calls] == ["Bash", "Write", "Bash", "Write"]
        for call in calls:
            assert any(claude_notice_next_to(b, call["id"]) for b in bodies), call
        # The report edit also reported its word count.
        assert contains(bodies[2], "[benchctl] report.md: 9 words; 4 over the limit of 5.")
        # Stopping early produced a continuation, and the agent kept working after it.
        assert contains(bodies[3], "Do not stop yet") and bodies[3]["messages"]
        assert len(rig.events("reprompt")) == 1
        # Stopping with an over-long report produced one revision request.
        assert contains(bodies[5], "9 words, over the limit of 5")
        assert len(rig.events("revision_request")) == 1
        assert rig.sandbox.get_file("/work/report.md").decode() == SHORT_REPORT

        # No network inside; the probe ran as the unprivileged agent.
        results = rig.events("tool_result")
        assert "NET-FAIL" in results[0]["output"] and "NET-OK" not in results[0]["output"]
        assert "ANTHROPIC_UNIX_SOCKET=/gateway/gateway.sock" in results[0]["output"]
        assert REAL_KEY not in results[0]["output"]

        # The CLI's own events became transcript events; hooks fired; raw files kept.
        kinds = [e.get("kind") for e in rig.events("harness_event")]
        assert {"start", "init", "result", "exit"} <= set(kinds)
        assert result.details["hooks"] == {"post_tool_use": 4, "stop": 3}
        files = sorted(p.name for p in (rig.run_dir / "harness").iterdir())
        assert files == ["claude-code.1.exit.json", "claude-code.1.stderr.txt", "claude-code.1.stdout.jsonl"]

        # A follow-up resumes the same session: history and the new prompt reach the model.
        follow = h.followup(rig.ctx, "Now add one line of summary.", result)
        assert follow.status == "completed", follow.error
        assert follow.session_id == result.session_id
        last = rig.bodies()[-1]
        assert contains(last, "Now add one line of summary.") and contains(last, "Let me look around.")
        assert (rig.run_dir / "harness" / "claude-code.2.exit.json").is_file()
        assert b"disableAllHooks" in rig.sandbox.get_file("/work/.claude/settings.json")  # planted...
        assert follow.details["hooks"]["stop"] == 4  # ...but it did not switch hooks off

        assert_key_never_reached_the_sandbox(rig)


def test_refusal_retry_is_served_by_the_fallback_model(sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    h = ClaudeCodeHarness()
    with cli_rig(
        h,
        monkeypatch,
        sandbox_image,
        model=f"anthropic/{PRIMARY}",
        fallback=f"anthropic/{FALLBACK}",
        by_model=refusing(PRIMARY, FALLBACK),
        policies=NO_POLICIES,
    ) as rig:
        result = h.run(rig.ctx)
        assert result.status == "completed", result.error
        # Claude Code retried the refused turn once itself; that retry went to the fallback model.
        assert_fallback_served(rig, "anthropic", PRIMARY, FALLBACK)
        assert result.details["served_models"] == {f"anthropic/{PRIMARY}": 1, f"anthropic/{FALLBACK}": 1}
        assert any(e.get("refusal_retry") for e in rig.events("harness_event"))


def test_refusal_without_fallback_is_refused_not_completed(sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    h = ClaudeCodeHarness()
    with cli_rig(
        h, monkeypatch, sandbox_image, model=f"anthropic/{PRIMARY}", by_model=refusing(PRIMARY), policies=NO_POLICIES
    ) as rig:
        result = h.run(rig.ctx)
        assert result.status == "refused"
        assert result.exit_code == 1 and "safeguards" in (result.error or "")
        assert len(rig.bodies()) == 2  # the CLI's own single retry, then it gave up
        assert result.details["refusals"] == 2 and not rig.events("fallback")


def test_run_past_its_budget_is_killed_and_its_report_kept(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = {"turns": [{"tool_calls": [write(SHORT_REPORT)]}, {"tool_calls": [LONG_COMMAND]}]}
    h = ClaudeCodeHarness()
    with cli_rig(
        h,
        monkeypatch,
        sandbox_image,
        model=f"anthropic/{PRIMARY}",
        by_model={PRIMARY: script},
        budget_s=8,
        policies=NO_POLICIES,
    ) as rig:
        result = h.run(rig.ctx)
        assert result.status == "timeout" and result.exit_code is None
        exit_info = (rig.run_dir / "harness" / "claude-code.1.exit.json").read_text()
        assert '"timed_out":true' in exit_info.replace(" ", "")
        # Nothing of the run is left running, and the report is still there to collect.
        long_id = rig.events("tool_call")[1]["id"]  # killed inside the long command, not looping:
        assert all(r["t"] >= rig.ctx.budget.deadline for r in rig.events("tool_result") if r["id"] == long_id)
        ps = rig.sandbox.exec("ps -eo args", timeout=10).stdout
        assert "time.sleep(300)" not in ps and "/opt/benchctl/bin/claude" not in ps
        report = rig.sandbox.collect(["/work/report.md"], tmp_path / "artifacts")
        assert report.copied and (tmp_path / "artifacts" / "report.md").read_text() == SHORT_REPORT


def test_cancel_stops_the_cli_and_is_an_error(sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    script = {"turns": [{"tool_calls": [LONG_COMMAND]}]}
    h = ClaudeCodeHarness()
    with cli_rig(
        h, monkeypatch, sandbox_image, model=f"anthropic/{PRIMARY}", by_model={PRIMARY: script}, policies=NO_POLICIES
    ) as rig:
        cancelled_at: list[float] = []

        def cancel() -> None:  # what SIGINT/SIGTERM does in the runner
            cancelled_at.append(time.time())
            rig.ctx.cancel.set()

        # Cancel once the long command has started (not after a fixed delay: CLI start-up varies with load).
        timer = threading.Timer(0.5, cancel)
        rig.ctx.transcript.listeners.append(lambda ev: ev["type"] == "tool_call" and timer.start())
        try:
            result = h.run(rig.ctx)
        finally:
            timer.cancel()
        assert result.status == "error" and result.error == "cancelled"
        long_id = rig.events("tool_call")[0]["id"]  # cancelled while the command ran
        assert not any(r["id"] == long_id and r["t"] < cancelled_at[0] for r in rig.events("tool_result"))
        assert "time.sleep(300)" not in rig.sandbox.exec("ps -eo args", timeout=10).stdout
