"""The codex harness with the real Codex CLI, real Docker and the real gateway (through the
in-sandbox forwarder), against a scripted OpenAI Responses upstream. Tool names: CLI_FACTS.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harnesses.codex import CodexHarness
from tests.rigs.cli_harness import (
    MAIN_POLICIES,
    NO_POLICIES,
    PROBE,
    REAL_KEY,
    assert_fallback_served,
    assert_key_never_reached_the_sandbox,
    cli_rig,
    codex_notice_next_to,
    contains,
    refusing,
)

pytestmark = [pytest.mark.docker, pytest.mark.cli_binaries]

PRIMARY, FALLBACK = "gpt-5.5", "gpt-5.4"
SHORT_REPORT = "# Report\n\nalpha beta\n"
ADD_LONG_REPORT = (
    "*** Begin Patch\n*** Add File: report.md\n+# Report\n+\n"
    "+alpha beta gamma delta epsilon zeta eta\n*** End Patch\n"
)  # 9 words, limit 5


# A project config the agent can write (it would switch hooks off in the next phase), and the real
# config it cannot touch (Codex itself rejects shell commands naming $CODEX_HOME; python does not).
TAMPER = (
    "mkdir -p /work/.codex; printf '[features]\\nhooks = false\\n' > /work/.codex/config.toml; "
    "python3 -c \"import os\nh = os.environ['CODEX' + '_HOME'] + '/hooks.json'\nfor f in (lambda: open(h, 'w'), "
    "lambda: os.remove(h), lambda: os.rename(h, h + '.x')):\n  try: f(); print('TAMPERED')\n"
    "  except OSError as e: print('DENIED', e.errno)\""
)


def shell(cmd: str) -> dict[str, Any]:
    return {"name": "exec_command", "input": {"cmd": cmd}}


def test_tools_notices_early_exit_revision_followup_and_secrecy(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "turns": [
            {"text": "Let me look around.", "tool_calls": [shell(PROBE)]},
            {"tool_calls": [{"name": "apply_patch", "input": ADD_LONG_REPORT}]},
            {"text": "Done."},  # too early: reprompted
            {"tool_calls": [shell("wc -w /work/report.md; " + TAMPER)]},  # ...the run goes on (and tries to cheat)
            {"text": "Done again."},  # over the limit: revision request
            {"tool_calls": [shell("printf '# Report\\n\\nalpha beta\\n' > /work/report.md")]},
            {"text": "Final."},
            {"tool_calls": [shell("wc -w /work/report.md")]},  # the follow-up runs tools too
            {"tool_calls": [shell("head -1 /work/report.md")]},
            {"text": "Follow-up answered."},
        ]
    }
    h = CodexHarness()
    with cli_rig(
        h, monkeypatch, sandbox_image, model=f"openai/{PRIMARY}", by_model={PRIMARY: script}, policies=MAIN_POLICIES
    ) as rig:
        result = h.run(rig.ctx)
        assert result.status == "completed", result.error
        assert result.exit_code == 0 and result.session_id
        bodies = rig.bodies()
        assert len(bodies) == 7
        assert {t.get("name") for t in bodies[0]["tools"]} >= {"exec_command", "apply_patch"}

        # Every tool output reached the model with the time remaining next to it.
        hooks = [e for e in rig.events("hook") if e["event"] == "PostToolUse"]
        assert [e["tool_name"] for e in hooks] == ["Bash", "apply_patch", "Bash", "Bash"]
        for hook in hooks:
            assert any(codex_notice_next_to(b, hook["tool_id"]) for b in bodies), hook
        assert contains(bodies[2], "[benchctl] report.md: 9 words; 4 over the limit of 5.")
        # Stopping early produced a continuation and the agent kept working; then one revision request.
        assert contains(bodies[3], "Do not stop yet") and len(rig.events("reprompt")) == 1
        assert contains(bodies[5], "9 words, over the limit of 5") and len(rig.events("revision_request")) == 1
        assert rig.sandbox.get_file("/work/report.md").decode() == SHORT_REPORT

        # The CLI's events became transcript events: shell, patch, messages.
        calls = rig.events("tool_call")
        assert [c["name"] for c in calls] == ["exec_command", "apply_patch", "exec_command", "exec_command"]
        # Each hook names both the model's call id and the stream's item id, so they join.
        assert [h["item_id"] for h in hooks] == [c["id"] for c in calls]
        results = rig.events("tool_result")
        assert "NET-FAIL" in results[0]["output"] and "NET-OK" not in results[0]["output"]
        assert REAL_KEY not in results[0]["output"]
        assert [a["text"] for a in rig.events("assistant")][-1] == "Final."
        assert result.details["hooks"] == {"post_tool_use": 4, "stop": 3}

        # A follow-up resumes the same thread with its history.
        follow = h.followup(rig.ctx, "Now add one line of summary.", result)
        assert follow.status == "completed", follow.error
        assert follow.session_id == result.session_id
        last = rig.bodies()[-1]
        assert contains(last, "Now add one line of summary.") and contains(last, "Let me look around.")
        assert {t.get("name") for t in last["tools"]} == {t.get("name") for t in bodies[0]["tools"]}  # same config
        assert b"hooks = false" in rig.sandbox.get_file("/work/.codex/config.toml")  # planted...
        assert follow.details["hooks"]["stop"] == 4  # ...but it did not switch hooks off
        # Codex counts its item ids from item_0 again in the follow-up: the transcript's stay unique
        calls = rig.events("tool_call")
        assert len(calls) == 6 and len({c["id"] for c in calls}) == 6 and calls[-1]["id"].endswith("@2")
        follow_hook = [e for e in rig.events("hook") if e["event"] == "PostToolUse"][-1]
        assert follow_hook["item_id"] == calls[-1]["id"] == rig.events("tool_result")[-1]["id"]
        assert results[2]["output"].count("DENIED") == 3 and "TAMPERED" not in results[2]["output"]
        assert sorted(p.name for p in (rig.run_dir / "harness").iterdir()) == [
            f"codex.{n}.{k}" for n in (1, 2) for k in ("exit.json", "stderr.txt", "stdout.jsonl")
        ]

        assert_key_never_reached_the_sandbox(rig)


def test_refusal_is_followed_by_the_fallback_model(sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    h = CodexHarness()
    with cli_rig(
        h,
        monkeypatch,
        sandbox_image,
        model=f"openai/{PRIMARY}",
        fallback=f"openai/{FALLBACK}",
        by_model=refusing(PRIMARY, FALLBACK),
        policies=NO_POLICIES,
    ) as rig:
        result = h.run(rig.ctx)
        assert result.status == "completed", result.error
        # Codex drops the refused turn silently; the Stop hook hands the turn to the fallback model.
        assert_fallback_served(rig, "openai", PRIMARY, FALLBACK)
        assert [r["reason"] for r in rig.events("reprompt")] == ["fallback_continue"]


def test_refusal_without_fallback_is_refused_not_completed(sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    h = CodexHarness()
    with cli_rig(
        h, monkeypatch, sandbox_image, model=f"openai/{PRIMARY}", by_model=refusing(PRIMARY), policies=NO_POLICIES
    ) as rig:
        result = h.run(rig.ctx)
        assert result.exit_code == 0  # Codex itself thinks all went well...
        assert result.status == "refused"  # ...but the gateway saw the refusal
        assert result.details["refusals"] == 1


def test_run_past_its_budget_is_killed_and_its_report_kept(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = {
        "turns": [
            {"tool_calls": [shell("printf '# Report\\n\\nalpha beta\\n' > /work/report.md")]},
            {"tool_calls": [{"name": "exec_command", "input": {"cmd": "sleep 300", "yield_time_ms": 30000}}]},
        ]
    }
    h = CodexHarness()
    with cli_rig(
        h,
        monkeypatch,
        sandbox_image,
        model=f"openai/{PRIMARY}",
        by_model={PRIMARY: script},
        budget_s=8,
        policies=NO_POLICIES,
    ) as rig:
        result = h.run(rig.ctx)
        assert result.status == "timeout" and result.exit_code is None
        long_id = rig.events("tool_call")[1]["id"]  # killed inside the long command, not looping:
        assert all(r["t"] >= rig.ctx.budget.deadline for r in rig.events("tool_result") if r["id"] == long_id)
        ps = rig.sandbox.exec("ps -eo args", timeout=10).stdout
        assert "sleep 300" not in ps and "/opt/benchctl/bin/codex" not in ps and "forwarder" not in ps
        report = rig.sandbox.collect(["/work/report.md"], tmp_path / "artifacts")
        assert report.copied and (tmp_path / "artifacts" / "report.md").read_text() == SHORT_REPORT
