"""The CLI hooks: the host-side policy route, its ledger of the gateway's own observations, and the
in-sandbox script, over a real gateway socket.

No Docker here: the hook host reads the length-policy file through the Sandbox seam (FileSandbox
serves files from a dict), and hook.py runs as a host subprocess against a real Gateway on a
unix socket, exactly the request it makes inside the sandbox. The same hooks forged from inside
real sandboxes by agents driving the real CLIs: tests/threat/test_hooks.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchctl.gateway import SANDBOX_TOKEN, Gateway, GatewayConfig
from benchctl.gateway.clients import anthropic_client
from benchctl.harness import HarnessContext
from benchctl.policies import Budget, EarlyExitPolicy, LengthPolicy, RunPolicies
from benchctl.transcript import TranscriptWriter
from harnesses.hooks import host as hook_host
from harnesses.hooks.ledger import answered_tool_calls

HOOK = Path(hook_host.__file__).parent / "hook.py"
NOW = 1_000_000.0
SID = "session-1"
HEADERS = {"x-claude-code-session-id": SID}


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class StubGateway:
    """Plugs into the gateway methods the hook host uses."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, Any]] = []
        self.observers: list[Any] = []
        self.fallbacks: list[dict[str, Any]] = []

    def add_route(self, prefix: str, handler: Any) -> None:
        self.routes.append((prefix, handler))

    def add_observer(self, observer: Any) -> None:
        self.observers.append(observer)

    def summary(self) -> dict[str, Any]:
        return {"fallbacks": list(self.fallbacks)}


class FileSandbox:
    """Plugs into the Sandbox seam's get_file: the files the agent left, by path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.reads = 0

    def get_file(self, path: str, max_bytes: int = 50_000_000) -> bytes:
        self.reads += 1
        if path not in self.files:
            raise FileNotFoundError(path)
        return self.files[path]


def make_ctx(tmp_path: Path, gateway: Any, policies: RunPolicies, budget_s: float = 600) -> HarnessContext:
    return HarnessContext(
        run_id="r",
        model="scripted/x.json",
        instructions="go",
        sandbox=FileSandbox(),  # type: ignore[arg-type]
        gateway=gateway,
        transcript=TranscriptWriter(tmp_path / "transcript.jsonl"),
        budget=Budget(NOW, budget_s),
        policies=policies,
        run_dir=tmp_path,
    )


def events(ctx: HarnessContext, type: str) -> list[dict[str, Any]]:
    path = ctx.transcript.path
    assert path is not None
    return [e for e in map(orjson.loads, path.read_bytes().splitlines()) if e["type"] == type]


def call(host: hook_host.HookHost, event: str, inp: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, headers, body = host.handle(
        "POST", f"/benchctl/hooks/{event}", orjson.dumps({"event": event, "input": {"session_id": SID, **inp}})
    )
    assert headers["content-type"] == "application/json"
    return status, orjson.loads(body)


def model_asks(host: hook_host.HookHost, *tool_ids: str) -> None:
    """What the gateway tells the ledger when the model's answer asks for these tools (none: the turn ends)."""
    host.ledger.response(HEADERS, "anthropic_messages", list(tool_ids), "ok")


def results_sent(host: hook_host.HookHost, *tool_ids: str) -> None:
    """...and when the CLI's next request carries these tools' results."""
    host.ledger.request(
        HEADERS,
        "anthropic_messages",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": t, "content": "ok"} for t in tool_ids],
                }
            ]
        },
    )


POLICIES = RunPolicies(
    early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=1), length=LengthPolicy(file="report.md", max_words=5)
)


def test_post_tool_use_gives_time_and_word_counts_read_by_the_host(tmp_path: Path) -> None:
    gw = StubGateway()
    ctx = make_ctx(tmp_path, gw, POLICIES)
    host = hook_host.install(ctx, "claude-code", Clock(NOW + 90))
    assert gw.routes[0][0] == "/benchctl/hooks/" and gw.observers == [host.ledger]
    model_asks(host, "t1")
    status, out = call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "t1"})
    assert status == 200
    assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert out["hookSpecificOutput"]["additionalContext"] == "[benchctl] Time remaining: 8m 30s of 10m 00s."
    # The report appeared: the host reads it from the sandbox; its word count comes first, then the time.
    results_sent(host, "t1")
    model_asks(host, "t2")
    ctx.sandbox.files["/work/report.md"] = b"a b c d e f g"
    _, out = call(host, "post_tool_use", {"tool_name": "Write", "tool_use_id": "t2"})
    lines = out["hookSpecificOutput"]["additionalContext"].splitlines()
    assert lines[0] == "[benchctl] report.md: 7 words; 2 over the limit of 5."
    assert lines[1].startswith("[benchctl] Time remaining:")
    # Unchanged since: no word count (whatever the hook says, and whatever happened to mtimes).
    results_sent(host, "t2")
    model_asks(host, "t3")
    _, out = call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "t3", "file": {"text": "x"}})
    assert "words" not in out["hookSpecificOutput"]["additionalContext"]
    notices = events(ctx, "notice")
    assert [n["kind"] for n in notices] == ["time", "words", "time", "time"]
    assert notices[1]["tool_id"] == "t2"
    assert [h["file_changed"] for h in events(ctx, "hook")] == [False, True, False]
    assert host.counts == {"post_tool_use": 3}


def test_post_tool_use_says_nothing_when_notices_are_off(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), RunPolicies(early_exit=None, length=None, notify_time=False))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW))
    model_asks(host, "t1")
    assert call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "t1"}) == (200, {})


def test_forged_post_tool_use_is_refused_recorded_and_counts_nothing(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), POLICIES)
    host = hook_host.HookHost(ctx, "claude-code", Clock(NOW + 30))
    model_asks(host, "real")
    assert call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "invented"}) == (200, {})
    assert call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "real", "session_id": "other"}) == (200, {})
    # The real one, twice (the agent's copy first, then the CLI's): one set of notices, the same answer.
    first = call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "real"})
    assert call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "real"}) == first
    results_sent(host, "real")
    assert call(host, "post_tool_use", {"tool_name": "Bash", "tool_use_id": "real"}) == (200, {})  # answered already
    forged = events(ctx, "forged_hook")
    assert [f["source"] for f in forged] == ["policy"] * 3
    assert [f["tool_id"] for f in forged] == ["invented", "real", "real"]
    assert "never asked" in forged[0]["reason"] and "session 'other'" in forged[1]["reason"]
    assert "already answered" in forged[2]["reason"]
    assert [n["kind"] for n in events(ctx, "notice")] == ["time"]
    assert [h.get("repeat") for h in events(ctx, "hook")] == [None, True]
    assert host.counts == {"post_tool_use": 1}


def test_stop_reprompts_then_asks_for_revision_then_allows(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), POLICIES)  # 10 % of the budget used
    host = hook_host.HookHost(ctx, "claude-code", Clock(NOW + 60))
    ctx.sandbox.files["/work/report.md"] = b"one two three four five six seven"
    for expected in ("Do not stop yet", "7 words, over the limit of 5", None):
        model_asks(host)  # each time the model ends its turn
        _, out = call(
            host,
            "stop",
            {"stop_hook_active": expected is None, "last_assistant_message": "done", "file": {"text": "short"}},
        )  # (a file in the hook is ignored)
        if expected is None:
            assert out == {}  # one revision only; reprompts used up
        else:
            assert out["decision"] == "block" and expected in out["reason"]
    assert len(events(ctx, "reprompt")) == 1 and len(events(ctx, "revision_request")) == 1
    assert [h["decision"] for h in events(ctx, "hook")] == ["reprompt", "revision", "stop"]
    assert (ctx.stop_state.reprompts, ctx.stop_state.revisions) == (1, 1)


def test_forged_stop_is_refused_and_a_repeated_one_decides_nothing_new(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), RunPolicies(early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=2)))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 1))
    assert call(host, "stop", {})[1] == {}  # the model has not answered yet
    model_asks(host, "tool-1")
    assert call(host, "stop", {})[1] == {}  # a tool is running: the turn has not ended
    model_asks(host)
    assert call(host, "stop", {"session_id": "made-up"})[1] == {}
    assert ctx.stop_state.reprompts == 0 and not events(ctx, "reprompt")
    first = call(host, "stop", {})[1]  # the real turn end...
    assert first["decision"] == "block"
    assert call(host, "stop", {})[1] == first  # ...posted again: the same answer, once counted
    assert ctx.stop_state.reprompts == 1 and len(events(ctx, "reprompt")) == 1
    assert [f["event"] for f in events(ctx, "forged_hook")] == ["Stop"] * 3
    assert host.counts == {"stop": 1}


def test_without_session_headers_one_session_and_one_decision_per_turn_end(tmp_path: Path) -> None:
    """A CLI that sends no session header: its calls make one session, whatever session id a hook names,
    so naming another id does not buy a second decision."""
    ctx = make_ctx(tmp_path, StubGateway(), RunPolicies(early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=3)))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 1))
    host.ledger.response({}, "openai_responses", [], "ok")
    answers = [call(host, "stop", {"session_id": sid})[1] for sid in ("a", "b", None)]
    assert all(a.get("decision") == "block" for a in answers) and ctx.stop_state.reprompts == 1


def test_stop_after_the_deadline_always_allows(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), POLICIES)
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 601))
    ctx.sandbox.files["/work/report.md"] = b"w " * 50
    model_asks(host)
    _, out = call(host, "stop", {})
    assert out == {} and not events(ctx, "reprompt") and not events(ctx, "revision_request")


def test_stop_after_a_fallback_with_no_answer_continues_once(tmp_path: Path) -> None:
    """Codex drops a refused turn silently; the switch to the fallback model must get a turn."""
    gw = StubGateway()
    ctx = make_ctx(tmp_path, gw, RunPolicies(early_exit=None))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 10))
    model_asks(host)
    assert call(host, "stop", {"last_assistant_message": None})[1] == {}  # no fallback yet
    gw.fallbacks.append({"from": "a/x", "to": "a/y"})
    model_asks(host)  # the refusal ended the turn
    _, out = call(host, "stop", {"last_assistant_message": None})
    assert out["decision"] == "block" and "Continue the task" in out["reason"]
    model_asks(host)
    assert call(host, "stop", {"last_assistant_message": None})[1] == {}  # only once per switch
    assert [r["reason"] for r in events(ctx, "reprompt")] == ["fallback_continue"]


def test_bad_requests_get_clear_errors(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), POLICIES)
    host = hook_host.HookHost(ctx, "codex", Clock(NOW))
    status, _, body = host.handle("POST", "/benchctl/hooks/pre_tool_use", b"{}")
    assert status == 404 and b"post_tool_use|stop" in body
    status, _, body = host.handle("POST", "/benchctl/hooks/stop", b"not json")
    assert status == 400 and b"bad hook payload" in body
    assert events(ctx, "error")


def test_tool_results_are_found_in_every_wire_api() -> None:
    assert answered_tool_calls(
        "anthropic_messages",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a"}, {"type": "text", "text": "x"}],
                },
                {"role": "assistant", "content": "text"},
            ]
        },
    ) == {"a"}
    assert answered_tool_calls(
        "openai_responses",
        {
            "input": [
                {"type": "function_call", "call_id": "b"},
                {"type": "function_call_output", "call_id": "b"},
                {"type": "custom_tool_call_output", "call_id": "c"},
                "stray",
            ]
        },
    ) == {"b", "c"}
    assert answered_tool_calls("openai_chat", {"messages": [{"role": "tool", "tool_call_id": "d"}]}) == {"d"}
    assert answered_tool_calls("gemini", {"contents": [{"parts": [{"functionResponse": {"id": "e"}}]}]}) == {"e"}


def test_concurrent_stop_decisions_do_not_double_count(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), RunPolicies(early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=2)))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 1))
    model_asks(host)
    results: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: results.append(call(host, "stop", {})[1])) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Eight posts for one turn end: one decision, given to all.
    assert all(r.get("decision") == "block" for r in results) and ctx.stop_state.reprompts == 1


# -- hook.py against a real gateway socket, with real model traffic -------------------------------


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[HarnessContext, Gateway]]:
    sock_dir = Path(tempfile.mkdtemp(prefix="bch-", dir="/tmp"))
    transcript = TranscriptWriter(tmp_path / "transcript.jsonl")
    script = tmp_path / "agent.json"
    script.write_text(
        orjson.dumps(
            {
                "turns": [
                    {"tool_calls": [{"name": "bash", "id": "toolu_a", "input": {"command": "ls"}}]},
                    {"text": "Done."},
                ]
            }
        ).decode()
    )
    gw = Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=sock_dir / "gw.sock"), transcript).start()
    ctx = make_ctx(tmp_path, gw, POLICIES)
    ctx.transcript = transcript
    hook_host.install(ctx, "claude-code", Clock(NOW + 30))
    try:
        yield ctx, gw
    finally:
        gw.close()
        shutil.rmtree(sock_dir, ignore_errors=True)


def run_hook(
    gw: Gateway, event: str, stdin: dict[str, Any], token: str = SANDBOX_TOKEN
) -> tuple[int, dict[str, Any], str]:
    args = [event, "--cli", "claude-code", "--socket", str(gw.socket_path)]
    proc = subprocess.run(
        [sys.executable, str(HOOK), *args],
        input=orjson.dumps(stdin),
        capture_output=True,
        timeout=30,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "BENCHCTL_GATEWAY_TOKEN": token},
    )
    return proc.returncode, orjson.loads(proc.stdout), proc.stderr.decode()


def test_hook_script_round_trip_checked_against_real_model_traffic(live: tuple[HarnessContext, Gateway]) -> None:
    ctx, gw = live
    client = anthropic_client(gw, default_headers=HEADERS)
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    first = client.messages.create(model="m", max_tokens=50, messages=msgs)
    assert first.content[-1].type == "tool_use" and first.content[-1].id == "toolu_a"
    # While the tool runs: its PostToolUse is real, a Stop is not.
    ctx.sandbox.files["/work/report.md"] = b"one two three"
    code, out, _ = run_hook(gw, "post_tool_use", {"session_id": SID, "tool_name": "Bash", "tool_use_id": "toolu_a"})
    assert code == 0 and "3 words" in out["hookSpecificOutput"]["additionalContext"]
    assert run_hook(gw, "stop", {"session_id": SID, "stop_hook_active": False})[1] == {}
    # The result goes back; the model ends its turn: now a Stop is real (early: reprompted).
    msgs += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "a.txt"}]},
    ]
    client.messages.create(model="m", max_tokens=50, messages=msgs)
    assert run_hook(gw, "post_tool_use", {"session_id": SID, "tool_use_id": "toolu_a"})[1] == {}  # answered already
    assert "Do not stop yet" in run_hook(gw, "stop", {"session_id": SID, "stop_hook_active": False})[1]["reason"]
    # Without the sandbox token the host is not even asked: 401, and the hook has no effect.
    code, out, err = run_hook(gw, "stop", {"session_id": SID}, token="guessed")
    assert code == 0 and out == {} and "HTTP 401" in err
    assert [h["event"] for h in events(ctx, "hook")] == ["PostToolUse", "Stop"]
    assert [f["event"] for f in events(ctx, "forged_hook")] == ["Stop", "PostToolUse"]
    assert gw.summary()["refused"] == {"forged_hook": 2, "401": 1}


def test_hook_script_without_a_host_has_no_effect(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(HOOK), "stop", "--socket", str(tmp_path / "nothing.sock")],
        input=b'{"stop_hook_active": false}',
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0 and orjson.loads(proc.stdout) == {}
    assert "host unreachable" in proc.stderr.decode()
