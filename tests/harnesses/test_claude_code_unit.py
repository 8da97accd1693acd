"""The claude-code adapter without a Docker Engine: command line, environment, stream parsing and
the outcome rules, driven through the real DockerSandbox over a fake Docker API that replays CLI
output (shapes recorded from Claude Code 2.1.332, trimmed)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchctl.harness import HarnessResult
from benchctl.policies import Budget
from benchctl.sandbox.base import ExecResult
from harnesses.claude_code import ClaudeCodeHarness
from harnesses.claude_code import settings as cc
from tests.rigs.fake_sandbox import FakeSandbox, StubGateway, ctx_for, events, stream

SID = "f12c2d85-f986-4cab-9b3d-b7b88024f9aa"
OK_STREAM = [
    {
        "type": "system",
        "subtype": "init",
        "session_id": SID,
        "tools": ["Bash", "Write"],
        "model": "m",
        "permissionMode": "bypassPermissions",
        "claude_code_version": "2.1.332",
        "apiKeySource": "ANTHROPIC_API_KEY",
    },
    {
        "type": "assistant",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "Let me look."}],
        },
        "session_id": SID,
    },
    {
        "type": "assistant",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "model": "m",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls", "description": "list"}}
            ],
        },
        "session_id": SID,
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {"tool_use_id": "toolu_1", "type": "tool_result", "content": "a.txt\nb.txt", "is_error": False}
            ],
        },
        "session_id": SID,
        "tool_use_result": {"stdout": "a.txt\nb.txt", "stderr": "", "interrupted": False},
    },
    {
        "type": "system",
        "subtype": "hook_started",
        "hook_id": "h1",
        "hook_name": "Stop",
        "hook_event": "Stop",
        "session_id": SID,
    },
    {
        "type": "system",
        "subtype": "hook_response",
        "hook_id": "h1",
        "hook_name": "Stop",
        "hook_event": "Stop",
        "output": '{"decision":"block","reason":"Go on"}\n',
        "exit_code": 0,
        "outcome": "success",
        "session_id": SID,
    },
    {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": "Stop hook feedback:\nGo on"}]},
        "session_id": SID,
        "isSynthetic": True,
    },
    {
        "type": "system",
        "subtype": "notification",
        "key": "stop-hook-error",
        "text": "stop hook problem",
        "session_id": SID,
    },
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "stop_reason": "end_turn",
        "terminal_reason": "completed",
        "num_turns": 3,
        "session_id": SID,
        "result": "Done.",
        "duration_ms": 370,
        "total_cost_usd": 0.0007,
    },
]
REFUSED_RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": True,
    "stop_reason": "refusal",
    "terminal_reason": "api_error",
    "session_id": SID,
    "result": "API Error: m can't help with this.",
}
API_ERROR_RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": True,
    "stop_reason": None,
    "api_error_status": 400,
    "session_id": SID,
    "result": "API Error: 400 bad request",
}


def harness() -> ClaudeCodeHarness:
    return ClaudeCodeHarness(options={"binary": "/bin/echo"})  # any ELF: the fake sandbox never runs it


def test_command_environment_and_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-host-secret-should-not-travel")
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    h = harness()
    result = h.run(ctx_for(tmp_path, sb))
    argv, env = sb.commands[0]
    assert argv[:2] == ["/opt/benchctl/bin/claude", "-p"] and argv[-1] == "Investigate."
    assert argv[argv.index("--model") + 1] == "claude-opus-5-5"
    assert argv[argv.index("--permission-mode") + 1] == "bypassPermissions"
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
    assert "--include-hook-events" in argv and "--setting-sources=" in argv  # no agent-writable settings files
    disallowed = next(a for a in argv if a.startswith("--disallowedTools="))  # the = form (variadic flag)
    assert {"WebFetch", "WebSearch", "Agent", "Task"} <= set(disallowed.split("=", 1)[1].split(","))
    assert env["ANTHROPIC_UNIX_SOCKET"] == "/gateway/gateway.sock" and env["ANTHROPIC_BASE_URL"] == "http://gateway"
    assert env["ANTHROPIC_API_KEY"] == "benchctl-sandbox-token"
    assert all(env[k] == "claude-opus-5-5" for k in cc.MODEL_ROLE_VARS)
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == env["DISABLE_TELEMETRY"] == "1"
    assert "IS_SANDBOX" not in env  # the sandbox user is not root
    assert "sk-host-secret" not in json.dumps([argv, env])
    hooks = json.loads(argv[argv.index("--settings") + 1])["hooks"]
    post = hooks["PostToolUse"][0]["hooks"][0]["command"]
    assert post.startswith(
        "python3 -I -S /opt/benchctl/hooks/hook.py post_tool_use --cli claude-code --socket /gateway/gateway.sock"
    )
    assert "stop" in hooks["Stop"][0]["hooks"][0]["command"]
    assert result.status == "completed" and result.session_id == SID


def test_stream_events_become_transcript_events(tmp_path: Path) -> None:
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM) + "not json\n", ""))
    harness().run(ctx_for(tmp_path, sb))
    assert [e["text"] for e in events(tmp_path, "assistant")] == ["Let me look."]
    call = events(tmp_path, "tool_call")[0]
    assert (call["id"], call["name"], call["input"]["command"]) == ("toolu_1", "Bash", "ls")
    res = events(tmp_path, "tool_result")[0]
    assert res["output"] == "a.txt\nb.txt" and res["is_error"] is False and res["interrupted"] is False
    kinds = [e["kind"] for e in events(tmp_path, "harness_event")]
    assert kinds == ["start", "init", "hook_response", "cli_message", "notification", "result", "unparsed_line", "exit"]
    response = events(tmp_path, "harness_event")[2]
    assert (response["hook_event"], response["outcome"]) == ("Stop", "success") and "block" in response["output"]
    raw = (tmp_path / "harness" / "claude-code.1.stdout.jsonl").read_text().splitlines()
    assert len(raw) == len(OK_STREAM) + 1


@pytest.mark.parametrize(
    "reply, status, message",
    [
        (ExecResult(1, stream(OK_STREAM[0], REFUSED_RESULT), ""), "refused", "can't help"),
        (ExecResult(1, stream(OK_STREAM[0], API_ERROR_RESULT), ""), "error", "HTTP 400"),
        (
            ExecResult(1, "", "Error: Input must be provided\n"),
            "error",
            "exited with code 1: Error: Input must be provided",
        ),
        (ExecResult(0, stream(*OK_STREAM[:3]), ""), "error", "ended without a result event"),
        (ExecResult(137, stream(*OK_STREAM), "Killed\n"), "error", "exited with code 137"),
        (ExecResult(None, stream(*OK_STREAM[:3]), "", timed_out=True), "timeout", None),
    ],
)
def test_outcomes_never_say_completed_when_the_cli_failed(
    tmp_path: Path, reply: ExecResult, status: str, message: str | None
) -> None:
    # A CLI that runs on (timed_out) is killed at the deadline: a short budget for it.
    result = harness().run(ctx_for(tmp_path, FakeSandbox(lambda cmd: reply), budget_s=1 if reply.timed_out else 600))
    assert result.status == status
    assert (message or "") in (result.error or "")
    exit_info = json.loads((tmp_path / "harness" / "claude-code.1.exit.json").read_text())
    assert exit_info["status"] == status and exit_info["exit_code"] == reply.exit_code
    assert exit_info["argv"][-1] == "<prompt: 12 chars>"


def test_failure_after_the_deadline_is_a_timeout(tmp_path: Path) -> None:
    # The gateway refuses calls past the deadline, so the CLI errors out: that is the budget ending,
    # even when the CLI exits before the deadline's kill.
    sb = FakeSandbox(lambda cmd: ExecResult(1, stream(OK_STREAM[0], API_ERROR_RESULT), ""))
    ctx = ctx_for(tmp_path, sb)

    class DeadlinePassesAsItSettles(StubGateway):
        def settle(self, timeout: float) -> bool:  # called once the CLI has exited
            ctx.budget = Budget(time.time() - 11, 10)
            return True

    ctx.gateway = DeadlinePassesAsItSettles()
    result = harness().run(ctx)
    exit_info = json.loads((tmp_path / "harness" / "claude-code.1.exit.json").read_text())
    assert exit_info["exit_code"] == 1 and not exit_info["timed_out"]  # the CLI's own failure, not the kill
    assert result.status == "timeout"


def test_followup_resumes_the_session(tmp_path: Path) -> None:
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    h = harness()
    ctx = ctx_for(tmp_path, sb)
    first = h.run(ctx)
    second = h.followup(ctx, "Now write 5000 words.", first)
    argv = sb.commands[1][0]
    assert argv[argv.index("--resume") + 1] == SID and argv[-1] == "Now write 5000 words."
    assert second.status == "completed" and second.details["phase"] == 2
    assert sb.files == {}  # settings travel inline: no file to tamper with
    assert ctx.gateway.routes == ["/benchctl/hooks/"]  # the hook route registered once
    assert h.followup(ctx, "x", HarnessResult("completed")).status == "error"  # nothing to resume


def test_options_change_tools_model_and_arguments(tmp_path: Path) -> None:
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    ctx = ctx_for(tmp_path, sb)
    ctx.options = {"allow_subagents": True, "cli_model": "claude-sonnet-5-5", "extra_args": ["--max-turns", "9"]}
    harness().run(ctx)
    argv, env = sb.commands[0]
    disallowed = next(a for a in argv if a.startswith("--disallowedTools=")).split("=", 1)[1].split(",")
    assert "Agent" not in disallowed and "WebSearch" in disallowed
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "claude-sonnet-5-5" and argv[-3:] == [
        "--max-turns",
        "9",
        "Investigate.",
    ]
    assert cc.disallowed_tools({"disallowed_tools": "A, B"}) == ["A", "B"]
    with pytest.raises(ValueError, match="disallowed_tools must be a list"):
        cc.disallowed_tools({"disallowed_tools": 3})


def test_setup_problems_are_errors_with_a_reason(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, FakeSandbox(lambda cmd: ExecResult(0, "", "")))
    ctx.instructions = "x" * 200_000
    result = harness().run(ctx)
    assert result.status == "error" and "max 100000" in (result.error or "")
    ctx2 = ctx_for(tmp_path / "b", FakeSandbox(lambda cmd: ExecResult(0, "", "")))
    ctx2.gateway.socket_path = None
    result = harness().run(ctx2)
    assert result.status == "error" and "unix socket" in (result.error or "")


def test_a_host_key_in_the_cli_environment_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's exec gets the same secret-in-env check as every other exec."""
    secret = "sk-ant-host-secret-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)

    class Leaky(ClaudeCodeHarness):
        def command(self, *args: Any, **kwargs: Any) -> tuple[list[str], dict[str, str]]:
            argv, env = super().command(*args, **kwargs)
            return argv, {**env, "AUTH_HEADER": f"Bearer {secret}"}

    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    result = Leaky(options={"binary": "/bin/echo"}).run(ctx_for(tmp_path, sb))
    assert result.status == "error" and "refusing to pass provider keys" in (result.error or "")
    assert "AUTH_HEADER" in (result.error or "")
    assert not any(secret in json.dumps(e.env) for e in sb.docker.execs)  # Docker never saw it


# ------------------------------------------------------------------------------- reasoning

# Claude Code 2.1.332's lines for a scripted model that thinks (a thinking block with its signature,
# a redacted_thinking block, text, a tool call; then thinking and the final answer): one line per
# content block, all with the message's id, thinking first; `system/thinking_tokens` is progress.
THINKING_STREAM = [
    OK_STREAM[0],
    {"type": "system", "subtype": "thinking_tokens", "estimated_tokens": 4, "session_id": SID},
    {
        "type": "assistant",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [{"type": "thinking", "thinking": "T1 part one. part two.", "signature": "SIG1/+=="}],
            "stop_reason": None,
        },
        "parent_tool_use_id": None,
        "session_id": SID,
        "thinking_duration_ms": 7,
        "thinking_display": "updates",
    },
    {
        "type": "assistant",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [{"type": "redacted_thinking", "data": "REDACTED-DATA-1=="}],
            "stop_reason": None,
        },
        "parent_tool_use_id": None,
        "session_id": SID,
    },
    {"type": "system", "subtype": "thinking_tokens", "estimated_tokens": 7, "session_id": SID},
    {
        "type": "assistant",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [{"type": "text", "text": "Running."}],
            "stop_reason": None,
        },
        "parent_tool_use_id": None,
        "session_id": SID,
    },
    {
        "type": "assistant",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [
                {"type": "tool_use", "id": "toolu_01abc", "name": "Bash", "input": {"command": "echo hi"}},
            ],
            "stop_reason": None,
        },
        "parent_tool_use_id": None,
        "session_id": SID,
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"tool_use_id": "toolu_01abc", "type": "tool_result", "content": "hi", "is_error": False}],
        },
        "session_id": SID,
        "tool_use_result": {"stdout": "hi", "stderr": "", "interrupted": False},
    },
    {
        "type": "assistant",
        "message": {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [{"type": "thinking", "thinking": "T2: done now.", "signature": "SIG2/+=="}],
            "stop_reason": None,
        },
        "parent_tool_use_id": None,
        "session_id": SID,
    },
    {
        "type": "assistant",
        "message": {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [{"type": "text", "text": "All done."}],
            "stop_reason": None,
        },
        "parent_tool_use_id": None,
        "session_id": SID,
    },
    OK_STREAM[-1],
]


def thinking(text: str, signature: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": text, "summary": False, "redacted": False, "signature": signature}


def redacted(data: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": "", "summary": False, "redacted": True, "signature": data}


def test_thinking_blocks_are_the_reasoning_of_their_messages_assistant_event(tmp_path: Path) -> None:
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*THINKING_STREAM), ""))
    assert harness().run(ctx_for(tmp_path, sb)).status == "completed"
    said = [(e["text"], e["message_id"], e.get("reasoning")) for e in events(tmp_path, "assistant")]
    assert said == [
        ("Running.", "msg_1", [thinking("T1 part one. part two.", "SIG1/+=="), redacted("REDACTED-DATA-1==")]),
        ("All done.", "msg_2", [thinking("T2: done now.", "SIG2/+==")]),
    ]
    # no second copy as a raw CLI event
    assert "thinking" not in [e.get("kind") for e in events(tmp_path, "harness_event")]


def test_reasoning_before_a_tool_call_or_at_the_end_of_the_stream_is_not_lost(tmp_path: Path) -> None:
    """A message with no text before its tool call (the reasoning is written before the call), one
    with no text at all, and a stream cut off after a thinking line (the CLI killed at the deadline)."""
    msg_1 = THINKING_STREAM[2:4] + THINKING_STREAM[6:8]  # thinking, redacted, tool_use, its result
    msg_2 = THINKING_STREAM[8:9]  # thinking only; the next line is the result
    cut = {**THINKING_STREAM[8], "message": {**THINKING_STREAM[8]["message"], "id": "msg_3"}}
    sb = FakeSandbox(
        lambda cmd: ExecResult(None, stream(OK_STREAM[0], *msg_1, *msg_2, OK_STREAM[-1], cut), "", timed_out=True)
    )
    assert harness().run(ctx_for(tmp_path, sb, budget_s=1)).status == "timeout"  # killed at the deadline
    order = [
        (e["type"], e.get("text"), e.get("message_id"), len(e.get("reasoning") or []))
        for e in map(orjson.loads, (tmp_path / "transcript.jsonl").read_bytes().splitlines())
        if e["type"] in ("assistant", "tool_call")
    ]
    assert order == [
        ("assistant", "", "msg_1", 2),
        ("tool_call", None, None, 0),
        ("assistant", "", "msg_2", 1),
        ("assistant", "", "msg_3", 1),
    ]
    assert events(tmp_path, "assistant")[0]["reasoning"][1] == redacted("REDACTED-DATA-1==")
