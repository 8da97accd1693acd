"""The CLI hooks: the host-side policy route and the in-sandbox script, over a real gateway socket.

No Docker here: hook.py runs as a host subprocess against a real Gateway on a unix socket,
exactly the request it makes inside the sandbox.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest

from benchctl.gateway import Gateway, GatewayConfig
from benchctl.policies import Budget, EarlyExitPolicy, LengthPolicy, RunPolicies
from benchctl.transcript import TranscriptWriter
from harnesses.base import HarnessContext
from harnesses.hooks import host as hook_host

HOOK = Path(hook_host.__file__).parent / "hook.py"
NOW = 1_000_000.0


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class StubGateway:
    """Plugs into the two gateway methods the hook host uses."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, Any]] = []
        self.fallbacks: list[dict[str, Any]] = []

    def add_route(self, prefix: str, handler: Any) -> None:
        self.routes.append((prefix, handler))

    def summary(self) -> dict[str, Any]:
        return {"fallbacks": list(self.fallbacks)}


def make_ctx(tmp_path: Path, gateway: Any, policies: RunPolicies, budget_s: float = 600) -> HarnessContext:
    return HarnessContext(run_id="r", model="scripted/x.json", instructions="go", sandbox=None,  # type: ignore[arg-type]
                          gateway=gateway, transcript=TranscriptWriter(tmp_path / "transcript.jsonl"),
                          budget=Budget(NOW, budget_s), policies=policies, run_dir=tmp_path)


def events(ctx: HarnessContext, type: str) -> list[dict[str, Any]]:
    path = ctx.transcript.path
    assert path is not None
    return [e for e in map(orjson.loads, path.read_bytes().splitlines()) if e["type"] == type]


def call(host: hook_host.HookHost, event: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, headers, body = host.handle("POST", f"/benchctl/hooks/{event}", orjson.dumps(payload))
    assert headers["content-type"] == "application/json"
    return status, orjson.loads(body)


POLICIES = RunPolicies(early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=1),
                       length=LengthPolicy(file="report.md", max_words=5))


def test_post_tool_use_gives_time_and_word_counts(tmp_path: Path) -> None:
    gw = StubGateway()
    clock = Clock(NOW + 90)
    ctx = make_ctx(tmp_path, gw, POLICIES)
    host = hook_host.install(ctx, "claude-code", clock)
    assert gw.routes[0][0] == "/benchctl/hooks/"
    status, out = call(host, "post_tool_use", {"event": "post_tool_use", "input": {"tool_name": "Bash", "tool_use_id": "t1"}})
    assert status == 200
    ctx_text = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert ctx_text == "[benchctl] Time remaining: 8m 30s of 10m 00s."
    # The length file changed: its word count comes first, then the time.
    status, out = call(host, "post_tool_use", {"input": {"tool_name": "Write", "tool_use_id": "t2"},
                                               "file": {"path": "/work/report.md", "text": "a b c d e f g"}})
    lines = out["hookSpecificOutput"]["additionalContext"].splitlines()
    assert lines[0] == "[benchctl] report.md: 7 words; 2 over the limit of 5."
    assert lines[1].startswith("[benchctl] Time remaining:")
    # Another file is not the policy's file: no word count.
    _, out = call(host, "post_tool_use", {"input": {"tool_name": "Write"}, "file": {"path": "/work/other.md", "text": "x"}})
    assert "words" not in out["hookSpecificOutput"]["additionalContext"]
    notices = events(ctx, "notice")
    assert [n["kind"] for n in notices] == ["time", "words", "time", "time"]
    assert notices[1]["tool_id"] == "t2"
    assert [h["tool_name"] for h in events(ctx, "hook")] == ["Bash", "Write", "Write"]
    assert host.counts == {"post_tool_use": 3}


def test_post_tool_use_says_nothing_when_notices_are_off(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), RunPolicies(early_exit=None, length=None, notify_time=False))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW))
    assert call(host, "post_tool_use", {"input": {"tool_name": "Bash"}}) == (200, {})


def test_stop_reprompts_then_asks_for_revision_then_allows(tmp_path: Path) -> None:
    clock = Clock(NOW + 60)                     # 10 % of the budget used
    ctx = make_ctx(tmp_path, StubGateway(), POLICIES)
    host = hook_host.HookHost(ctx, "claude-code", clock)
    long_report = {"path": "/work/report.md", "text": "one two three four five six seven"}
    _, out = call(host, "stop", {"input": {"stop_hook_active": False, "last_assistant_message": "done"}, "file": long_report})
    assert out["decision"] == "block" and "Do not stop yet" in out["reason"]
    _, out = call(host, "stop", {"input": {"stop_hook_active": True, "last_assistant_message": "done"}, "file": long_report})
    assert out["decision"] == "block" and "7 words, over the limit of 5" in out["reason"]
    _, out = call(host, "stop", {"input": {"stop_hook_active": True, "last_assistant_message": "done"}, "file": long_report})
    assert out == {}                             # one revision only; reprompts used up
    assert len(events(ctx, "reprompt")) == 1 and len(events(ctx, "revision_request")) == 1
    assert [h["decision"] for h in events(ctx, "hook")] == ["reprompt", "revision", "stop"]
    assert (ctx.stop_state.reprompts, ctx.stop_state.revisions) == (1, 1)


def test_stop_after_the_deadline_always_allows(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), POLICIES)
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 601))
    _, out = call(host, "stop", {"input": {}, "file": {"path": "/work/report.md", "text": "w " * 50}})
    assert out == {} and not events(ctx, "reprompt") and not events(ctx, "revision_request")


def test_stop_after_a_fallback_with_no_answer_continues_once(tmp_path: Path) -> None:
    """Codex drops a refused turn silently; the switch to the fallback model must get a turn."""
    gw = StubGateway()
    ctx = make_ctx(tmp_path, gw, RunPolicies(early_exit=None))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 10))
    assert call(host, "stop", {"input": {"last_assistant_message": None}})[1] == {}   # no fallback yet
    gw.fallbacks.append({"from": "a/x", "to": "a/y"})
    _, out = call(host, "stop", {"input": {"last_assistant_message": None}})
    assert out["decision"] == "block" and "Continue the task" in out["reason"]
    assert call(host, "stop", {"input": {"last_assistant_message": None}})[1] == {}   # only once per switch
    assert [r["reason"] for r in events(ctx, "reprompt")] == ["fallback_continue"]


def test_bad_requests_get_clear_errors(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), POLICIES)
    host = hook_host.HookHost(ctx, "codex", Clock(NOW))
    status, _, body = host.handle("POST", "/benchctl/hooks/pre_tool_use", b"{}")
    assert status == 404 and b"post_tool_use|stop" in body
    status, _, body = host.handle("POST", "/benchctl/hooks/stop", b"not json")
    assert status == 400 and b"bad hook payload" in body
    assert events(ctx, "error")


# -- hook.py against a real gateway socket --------------------------------------------------

@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[HarnessContext, Path, Clock]]:
    sock_dir = Path(tempfile.mkdtemp(prefix="bch-", dir="/tmp"))
    transcript = TranscriptWriter(tmp_path / "transcript.jsonl")
    # The scripted model must exist for the gateway to start; the hook route never calls it.
    script = tmp_path / "unused.json"
    script.write_text('{"turns": [{"text": "unused"}]}')
    gw = Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=sock_dir / "gw.sock"), transcript).start()
    clock = Clock(NOW + 30)
    ctx = make_ctx(tmp_path, gw, POLICIES)
    ctx.transcript = transcript
    hook_host.install(ctx, "claude-code", clock)
    try:
        yield ctx, sock_dir / "gw.sock", clock
    finally:
        gw.close()
        shutil.rmtree(sock_dir, ignore_errors=True)


def run_hook(args: list[str], stdin: dict[str, Any], state_dir: Path) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run([sys.executable, str(HOOK), *args], input=orjson.dumps(stdin), capture_output=True,
                          timeout=30, env={"BENCHCTL_HOOK_STATE": str(state_dir), "PATH": "/usr/bin:/bin"})
    return proc.returncode, orjson.loads(proc.stdout), proc.stderr.decode()


def test_hook_script_round_trip_and_file_change_detection(live: tuple[HarnessContext, Path, Clock], tmp_path: Path) -> None:
    ctx, sock, _ = live
    report = tmp_path / "report.md"
    report.write_text("one two three")
    state = tmp_path / "state"
    # The host compares the path with the policy's in-sandbox path; here the file lives elsewhere,
    # so point the policy at it for this test.
    ctx.policies = RunPolicies(early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=1),
                               length=LengthPolicy(file=str(report), max_words=5))
    args = ["post_tool_use", "--cli", "claude-code", "--socket", str(sock), "--file", str(report)]
    code, out, _ = run_hook(args, {"tool_name": "Write", "tool_use_id": "a"}, state)
    assert code == 0
    assert "3 words" in out["hookSpecificOutput"]["additionalContext"]
    # Unchanged file: the second call carries no text, so no word count.
    code, out, _ = run_hook(args, {"tool_name": "Bash", "tool_use_id": "b"}, state)
    assert "words" not in out["hookSpecificOutput"]["additionalContext"]
    report.write_text("one two three four five six seven eight")
    code, out, _ = run_hook(args, {"tool_name": "Bash", "tool_use_id": "c"}, state)
    assert "8 words; 3 over the limit of 5" in out["hookSpecificOutput"]["additionalContext"]
    # Stop always sends the file: early stop -> reprompt; then over-long -> revision.
    stop = ["stop", "--cli", "claude-code", "--socket", str(sock), "--file", str(report)]
    assert "Do not stop yet" in run_hook(stop, {"stop_hook_active": False}, state)[1]["reason"]
    assert "8 words, over the limit of 5" in run_hook(stop, {"stop_hook_active": True}, state)[1]["reason"]
    assert run_hook(stop, {"stop_hook_active": True}, state)[1] == {}
    hooks = events(ctx, "hook")
    assert [h["event"] for h in hooks] == ["PostToolUse"] * 3 + ["Stop"] * 3
    assert [h["file_changed"] for h in hooks[:3]] == [True, False, True]


def test_hook_script_without_a_host_has_no_effect(tmp_path: Path) -> None:
    code, out, err = run_hook(["stop", "--socket", str(tmp_path / "nothing.sock")], {"stop_hook_active": False},
                              tmp_path / "state")
    assert code == 0 and out == {}
    assert "host unreachable" in err


def test_concurrent_stop_decisions_do_not_double_count(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, StubGateway(), RunPolicies(early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=2)))
    host = hook_host.HookHost(ctx, "codex", Clock(NOW + 1))
    results: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: results.append(call(host, "stop", {"input": {}})[1])) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(1 for r in results if r.get("decision") == "block") == 2
    assert ctx.stop_state.reprompts == 2
