"""The codex adapter without Docker: config files, command line, JSONL parsing and outcome rules,
through the Sandbox seam with a fake sandbox replaying Codex 0.147.0 output (trimmed)."""

from __future__ import annotations

import json
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

from benchctl.sandbox.base import ExecResult, SandboxError
from harnesses.codex import CodexHarness
from harnesses.codex import config as cx
from tests.rigs.fake_sandbox import FakeSandbox, ctx_for, events, stream

TID = "01a22aad-3993-7ce3-9cdc-a8de9ed5b50b"
OK_STREAM = [
    {"type": "thread.started", "thread_id": TID},
    {
        "type": "item.completed",
        "item": {"id": "item_0", "type": "error", "message": "`--dangerously-bypass-hook-trust` is enabled."},
    },
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "Looking."}},
    {
        "type": "item.started",
        "item": {
            "id": "item_2",
            "type": "command_execution",
            "command": "/bin/bash -lc 'echo hi'",
            "aggregated_output": "",
            "exit_code": None,
            "status": "in_progress",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "item_2",
            "type": "command_execution",
            "command": "/bin/bash -lc 'echo hi'",
            "aggregated_output": "hi\n",
            "exit_code": 0,
            "status": "completed",
        },
    },
    {
        "type": "item.started",
        "item": {
            "id": "item_3",
            "type": "file_change",
            "status": "in_progress",
            "changes": [{"path": "/work/report.md", "kind": "add"}],
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "item_3",
            "type": "file_change",
            "status": "completed",
            "changes": [{"path": "/work/report.md", "kind": "add"}],
        },
    },
    {"type": "item.completed", "item": {"id": "item_4", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed", "usage": {"input_tokens": 50, "cached_input_tokens": 0, "output_tokens": 25}},
]
FAILED = [
    OK_STREAM[0],
    OK_STREAM[2],
    {"type": "error", "message": "unexpected status 400: bad thing happened"},
    {"type": "turn.failed", "error": {"message": "unexpected status 400: bad thing happened"}},
]


def harness() -> CodexHarness:
    return CodexHarness(options={"binary": "/bin/echo"})


def ctx_openai(tmp_path: Path, sb: FakeSandbox, **kw: Any) -> Any:
    ctx = ctx_for(tmp_path, sb, **kw)
    ctx.model = "openai/gpt-5.4"
    return ctx


def test_codex_home_config_and_hooks(tmp_path: Path) -> None:
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    result = harness().run(ctx_openai(tmp_path, sb))
    assert result.status == "completed" and result.session_id == TID
    config = tomllib.loads(sb.files[f"{cx.CODEX_HOME}/config.toml"].decode())
    provider = config["model_providers"][config["model_provider"]]
    assert provider["wire_api"] == "responses" and provider["base_url"] == "http://127.0.0.1:18555/v1"
    assert provider["env_key"] == cx.TOKEN_ENV
    assert config["check_for_update_on_startup"] is False and config["web_search"] == "disabled"
    assert config["analytics"] == {"enabled": False} and config["feedback"] == {"enabled": False}
    assert config["features"]["plugins"] is False and config["features"]["multi_agent"] is False
    assert config["features"]["hooks"] is True
    # Installed root-owned and read-only in a sticky CODEX_HOME, so the agent cannot switch hooks off;
    # in one archive (tests/harnesses/test_cli_setup.py checks the same in a real container).
    box = sb.docker.containers[sb.container_id or ""].files
    assert (box[cx.CODEX_HOME].mode, box[cx.CODEX_HOME].uid) == (0o1777, 0)
    for name in ("config.toml", "hooks.json"):
        assert (box[f"{cx.CODEX_HOME}/{name}"].mode, box[f"{cx.CODEX_HOME}/{name}"].uid) == (0o444, 0)
    assert sb.docker.put_archives == 1
    hooks = json.loads(sb.files[f"{cx.CODEX_HOME}/hooks.json"])["hooks"]
    assert "post_tool_use --cli codex" in hooks["PostToolUse"][0]["hooks"][0]["command"]
    assert "stop --cli codex" in hooks["Stop"][0]["hooks"][0]["command"]


def test_command_runs_the_forwarder_then_codex(tmp_path: Path) -> None:
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    h = harness()
    ctx = ctx_openai(tmp_path, sb)
    first = h.run(ctx)
    ((argv, env),) = sb.commands
    assert argv[:2] == ["bash", "-c"]
    script = argv[2]
    assert "python3 -I -S /opt/benchctl/gateway/forwarder.py --port 18555 --socket /gateway/gateway.sock" in script
    assert (
        "/opt/benchctl/bin/codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox "
        "--dangerously-bypass-hook-trust -c"
    ) in script and script.split("\n")[4].endswith("-m gpt-5.4 Investigate.")
    # Every setting also travels as a -c override: a project config in /work cannot undo them.
    assert "-c features.hooks=true" in script and "-c 'model_providers.benchctl.wire_api=\"responses\"'" in script
    assert env == {"HOME": "/home/agent", "CODEX_HOME": cx.CODEX_HOME, cx.TOKEN_ENV: "benchctl-sandbox-token"}
    h.followup(ctx, "Now 5000 words.", first)
    assert "codex exec resume --json" in sb.commands[1][0][2] and f"{TID} 'Now 5000 words.'" in sb.commands[1][0][2]


def test_non_openai_models_get_a_codex_known_name(tmp_path: Path) -> None:
    sb = FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    ctx = ctx_for(tmp_path, sb)
    ctx.model = "scripted/some/script.json"
    harness().run(ctx)
    assert "-m gpt-5.5 " in sb.commands[0][0][2]
    ctx.options = {"cli_model": "gpt-5.4-mini", "forwarder_port": 20000, "reasoning_effort": "high"}
    h = harness()
    h.run(ctx)
    assert "-m gpt-5.4-mini " in sb.commands[1][0][2] and "--port 20000" in sb.commands[1][0][2]
    config = tomllib.loads(sb.files[f"{cx.CODEX_HOME}/config.toml"].decode())
    assert config["model_reasoning_effort"] == "high" and "-c 'model_reasoning_effort=\"high\"'" in sb.commands[1][0][2]


def test_jsonl_events_become_transcript_events(tmp_path: Path) -> None:
    harness().run(ctx_openai(tmp_path, FakeSandbox(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))))
    assert [e["text"] for e in events(tmp_path, "assistant")] == ["Looking.", "Done."]
    assert [(c["name"], c["input"]) for c in events(tmp_path, "tool_call")] == [
        ("exec_command", {"command": "/bin/bash -lc 'echo hi'"}),
        ("apply_patch", {"changes": [{"path": "/work/report.md", "kind": "add"}]}),
    ]
    out = events(tmp_path, "tool_result")
    assert out[0]["output"] == "hi\n" and out[0]["exit_code"] == 0 and out[1]["is_error"] is False
    kinds = [e["kind"] for e in events(tmp_path, "harness_event")]
    assert kinds == ["start", "session", "cli_warning", "turn_started", "turn_completed", "exit"]


def refusing_sandbox(tmp_path: Path, ctx_holder: list[Any]) -> FakeSandbox:
    """Codex exits 0 after a refusal; only the gateway's model_call event shows it."""

    def reply(cmd: list[str]) -> ExecResult:
        ctx_holder[0].transcript.emit(
            "model_call",
            "gateway",
            wire_api="openai_responses",
            refusal=True,
            served_model="openai/gpt-5.4",
            latency_ms=5,
        )
        return ExecResult(0, stream(OK_STREAM[0], OK_STREAM[2], OK_STREAM[-1]), "")

    return FakeSandbox(reply)


@pytest.mark.parametrize(
    "reply, status, message",
    [
        (ExecResult(1, stream(*FAILED), ""), "error", "codex failed: unexpected status 400"),
        (
            ExecResult(2, "", "error: unexpected argument '--bogus'\n"),
            "error",
            "exited with code 2: error: unexpected argument",
        ),
        (ExecResult(0, stream(*OK_STREAM[:4]), ""), "error", "without completing a turn"),
        (ExecResult(None, stream(*OK_STREAM[:4]), "", timed_out=True), "timeout", None),
        (
            ExecResult(1, stream(*OK_STREAM[:3], {"type": "error", "message": "stream disconnected"}), ""),
            "error",
            "exited with code 1: stream disconnected",
        ),
    ],
)
def test_outcomes_never_say_completed_when_the_cli_failed(
    tmp_path: Path, reply: ExecResult, status: str, message: str | None
) -> None:
    # A CLI that runs on (timed_out) is killed at the deadline: a short budget for it.
    sb = FakeSandbox(lambda cmd: reply)
    result = harness().run(ctx_openai(tmp_path, sb, budget_s=1 if reply.timed_out else 600))
    assert result.status == status and (message or "") in (result.error or "")
    exit_info = json.loads((tmp_path / "harness" / "codex.1.exit.json").read_text())
    assert exit_info["status"] == status


def test_a_stream_retry_that_recovers_is_completed(tmp_path: Path) -> None:
    """Codex reports its stream retries as top-level `error` events; the turn then completes."""
    retry = {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"}
    lines = stream(*OK_STREAM[:3], retry, *OK_STREAM[3:])
    result = harness().run(ctx_openai(tmp_path, FakeSandbox(lambda cmd: ExecResult(0, lines, ""))))
    assert result.status == "completed", result.error
    assert [e["message"] for e in events(tmp_path, "harness_event") if e["kind"] == "cli_error"] == [retry["message"]]


def test_a_refusal_seen_only_by_the_gateway_is_refused(tmp_path: Path) -> None:
    holder: list[Any] = []
    sb = refusing_sandbox(tmp_path, holder)
    ctx = ctx_openai(tmp_path, sb)
    holder.append(ctx)
    result = harness().run(ctx)
    assert result.exit_code == 0 and result.status == "refused"
    assert result.details["served_models"] == {"openai/gpt-5.4": 1}


def test_bad_port_option_is_a_clear_error(tmp_path: Path) -> None:
    ctx = ctx_openai(tmp_path, FakeSandbox(lambda cmd: ExecResult(0, "", "")))
    ctx.options = {"forwarder_port": 80}
    result = harness().run(ctx)
    assert result.status == "error" and "forwarder_port must be 1024-65535" in (result.error or "")


def _item(phase: str, iid: str, itype: str, **fields: Any) -> str:
    return json.dumps({"type": f"item.{phase}", "item": {"id": iid, "type": itype, "status": "completed", **fields}})


def _post_tool_use(host: Any, tool_name: str, command: str, call_id: str) -> None:
    payload = {
        "event": "post_tool_use",
        "cli": "codex",
        "file": None,
        "input": {"tool_name": tool_name, "tool_input": {"command": command}, "tool_use_id": call_id},
    }
    status, _, _ = host.handle("POST", "/benchctl/hooks/post_tool_use", json.dumps(payload).encode())
    assert status == 200


def test_hook_events_join_the_streams_tool_items(tmp_path: Path) -> None:
    """Codex's stream ids (item_N) and its hooks' ids (the model's call_id) differ: each hook event
    carries both, so tool_call / tool_result join hook / notice. Hooks may fire out of order
    (observed with parallel calls), and a hook may reach the host before the stdout reader has
    read the item."""
    from harnesses.codex.stream import CodexStreamParser
    from harnesses.hooks.host import HookHost

    ctx = ctx_openai(tmp_path, FakeSandbox(lambda cmd: ExecResult(0, "", "")))
    parser = CodexStreamParser(ctx.transcript)
    host = HookHost(ctx, "codex")
    host.tool_items = parser.tool_items
    # What the gateway would tell the hook host's ledger: the model asked for these tool calls.
    host.ledger.response({}, "openai_responses", ["call_B", "call_M", "call_P", "call_A", "call_L", "call_U"], "ok")
    quoted = '/bin/bash -lc "echo \\"it\'s\\" | grep \'it\'"'  # how Codex 0.147 shows it (observed)
    for iid, itype, fields in (
        ("item_2", "command_execution", {"command": "/bin/bash -lc 'echo hi'"}),
        ("item_3", "command_execution", {"command": quoted}),
        ("item_4", "file_change", {"changes": [{"path": "/work/report.md", "kind": "add"}]}),
        ("item_5", "mcp_tool_call", {"server": "target", "tool": "chat"}),
    ):
        parser.feed(_item("started", iid, itype, **fields))
        parser.feed(_item("completed", iid, itype, **fields))
    _post_tool_use(host, "Bash", "echo \"it's\" | grep 'it'", "call_B")  # the second command's hook first
    _post_tool_use(host, "mcp__target__chat", "", "call_M")
    _post_tool_use(host, "apply_patch", "*** Begin Patch\n*** End Patch\n", "call_P")
    _post_tool_use(host, "Bash", "echo hi", "call_A")
    late = threading.Timer(
        0.1,
        lambda: [
            parser.feed(_item(p, "item_9", "command_execution", command="/bin/bash -lc ls"))
            for p in ("started", "completed")
        ],
    )
    late.start()
    _post_tool_use(host, "Bash", "ls", "call_L")  # reaches the host before its item
    late.join()
    _post_tool_use(host, "update_plan", "", "call_U")  # a tool with no stream item

    joined = {h["tool_id"]: h["item_id"] for h in events(tmp_path, "hook")}
    assert joined == {
        "call_B": "item_3",
        "call_M": "item_5",
        "call_P": "item_4",
        "call_A": "item_2",
        "call_L": "item_9",
        "call_U": None,
    }
    calls = {c["id"]: c["name"] for c in events(tmp_path, "tool_call")}
    assert {calls[i] for i in joined.values() if i} == {"exec_command", "apply_patch", "chat"}
    # Notices carry both ids too.
    assert {(n["tool_id"], n["item_id"]) for n in events(tmp_path, "notice")} == set(joined.items())


def test_config_that_cannot_be_root_owned_is_written_plain_and_the_transcript_says_so(tmp_path: Path) -> None:
    class NoRootWrites(FakeSandbox):
        def put_files(self, directory: str, files: Any, *, as_root: bool = False, **kw: Any) -> None:
            if as_root:
                raise SandboxError("this sandbox cannot write as root")
            super().put_files(directory, files, **kw)

    sb = NoRootWrites(lambda cmd: ExecResult(0, stream(*OK_STREAM), ""))
    result = harness().run(ctx_openai(tmp_path, sb))
    assert result.status == "completed"
    (notice,) = [e for e in events(tmp_path, "harness_event") if e["kind"] == "unprotected_config"]
    assert notice["directory"] == cx.CODEX_HOME and "cannot write as root" in notice["message"]
    box = sb.docker.containers[sb.container_id or ""].files
    assert box[f"{cx.CODEX_HOME}/config.toml"].uid == 1000 and box[cx.CODEX_HOME].uid == 1000


# Codex 0.147.0's lines for a scripted model that thinks on both turns (each response: a reasoning
# item with two summary parts and encrypted content, and one with encrypted content only, which
# Codex does not show): the summary joined by newlines, before the call or message it led to.
THINKING_STREAM = [
    {"type": "thread.started", "thread_id": TID},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "S1 summary one.\nsummary two."}},
    OK_STREAM[4],
    OK_STREAM[5],
    {"type": "item.completed", "item": {"id": "item_3", "type": "reasoning", "text": "S2 summary one.\nsummary two."}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "agent_message", "text": "All done."}},
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 20, "cached_input_tokens": 0, "output_tokens": 40, "reasoning_output_tokens": 24},
    },
]


def test_reasoning_items_are_assistant_events_with_reasoning_in_stream_order(tmp_path: Path) -> None:
    h = harness()
    ctx = ctx_openai(tmp_path, FakeSandbox(lambda cmd: ExecResult(0, stream(*THINKING_STREAM), "")))
    first = h.run(ctx)
    assert first.status == "completed"
    assert h.followup(ctx, "Once more.", first).status == "completed"  # phase 2: its item ids get @2

    def summary(text: str) -> dict[str, Any]:
        return {"type": "reasoning", "text": text, "summary": True, "redacted": False, "signature": None}

    order = [
        (e["type"], e.get("text"), e.get("item_id", e.get("id")), e.get("reasoning"))
        for e in map(json.loads, (tmp_path / "transcript.jsonl").read_bytes().splitlines())
        if e["type"] in ("assistant", "tool_call")
    ]
    one_phase = [
        ("assistant", "", "item_0", [summary("S1 summary one.\nsummary two.")]),
        ("tool_call", None, "item_2", None),
        ("assistant", "", "item_3", [summary("S2 summary one.\nsummary two.")]),
        ("assistant", "All done.", "item_4", None),
    ]
    assert order == one_phase + [(t, x, i + "@2", r) for t, x, i, r in one_phase]
    assert "reasoning" not in [e.get("kind") for e in events(tmp_path, "harness_event")]  # no second copy
