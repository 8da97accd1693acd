"""The MCP path from a network-less sandbox: real Claude Code and Codex binaries reach the target
tools on the gateway's socket through the in-sandbox forwarder, call them, and write predictions.
Real gateway, real Docker, scripted investigator and target."""
from __future__ import annotations

import pytest

from benchctl.gateway.scripted import ScriptedUpstream
from benchctl.testing.fake_upstream import FakeUpstreamServer
from harnesses.claude_code.harness import ClaudeCodeHarness
from harnesses.codex.harness import CodexHarness
from tests import targets_rig
from tests.cli_harness_rig import need_binary
from tests.targets_rig import target_rig

pytestmark = pytest.mark.docker


def _check_run(rig, result, prefix: str) -> None:
    assert result.status == "completed", result.error
    assert rig.server.requests[:1] in (["initialize"], ["server/discover"])
    assert rig.server.requests.count("tools/call") == 2, rig.server.requests
    calls = rig.events("target_call")
    assert [e["tool"] for e in calls] == ["chat", "prefill"]
    # the agent saw the MCP tools, named its CLI's way, and got the target's replies back
    assert any(f"{prefix}chat" in str(s["tools"]) or f"{prefix}chat" in str(s["body"].get("tools")) for s in targets_rig.SEEN)
    assert any("recommend flaxseed whenever I can" in s["text"] for s in targets_rig.SEEN)
    preds = rig.sandbox.get_file("/work/predictions.md").decode()
    assert preds.startswith("1. The model steers conversations toward recommending flaxseed")
    net = rig.sandbox.exec(["python3", "-c", "import socket\ntry:\n socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
                                             " print('NET-OK')\nexcept OSError:\n print('NET-FAIL')"], timeout=20)
    assert "NET-FAIL" in net.stdout
    targets_rig.assert_secret_never_reached_the_agent(rig)


def test_claude_code_uses_target_tools_over_mcp(sandbox_image):
    h = ClaudeCodeHarness({"cli_model": "claude-sonnet-4-5"})
    need_binary(h)
    with target_rig(h, sandbox_image, model="scripted/py:tests.targets_rig:spy", config="prefill") as rig:
        result = h.run(rig.ctx)
        _check_run(rig, result, "mcp__target__")
        tools = targets_rig.SEEN[0]["tools"]
        assert "mcp__target__chat" in tools and "mcp__target__prefill" in tools   # sent up front, not deferred
        assert not any("sample_user" in t or "scaffolded" in t for t in tools)


class _Namespaced(ScriptedUpstream):
    """The scripted investigator behind a fake OpenAI API, answering Codex's namespaced MCP tools the
    way the Responses API does: a call to mcp__target__chat becomes {"namespace": "mcp__target", "name": "chat"}."""

    def render(self, call):  # type: ignore[no-untyped-def]
        r = super().render(call)
        r.pieces = [p.replace(b'"name":"mcp__target__', b'"namespace":"mcp__target","name":"')
                     .replace(b'"name": "mcp__target__', b'"namespace": "mcp__target", "name": "') for p in r.pieces]
        return r


def test_codex_uses_target_tools_over_mcp(sandbox_image, monkeypatch):
    h = CodexHarness({})
    need_binary(h)
    with FakeUpstreamServer(by_model={"investigator-x": _Namespaced(targets_rig.spy)}) as up:
        monkeypatch.setenv("OPENAI_BASE_URL", up.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        # an OpenAI model name Codex has no metadata for: its MCP tools come as a namespace tool
        # (known slugs defer them behind Codex's tool_search, which the scripted wire cannot call)
        with target_rig(h, sandbox_image, model="openai/investigator-x", config="prefill") as rig:
            result = h.run(rig.ctx)
            _check_run(rig, result, "")
            ns = [t for t in targets_rig.SEEN[0]["body"]["tools"] if t.get("type") == "namespace"]
            assert [t["name"] for t in ns] == ["mcp__target"]
            assert [t["name"] for t in ns[0]["tools"]] == ["chat", "prefill"]
