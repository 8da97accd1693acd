"""The MCP server on a real gateway's unix socket: the streamable-HTTP handshake, tools/list per
configuration, tools/call reaching the target; plus the token-budget policy and predictions format."""

from __future__ import annotations

import json

import httpx2
import pytest

from benchctl.gateway.server import SANDBOX_TOKEN, Gateway, GatewayConfig
from benchctl.grading.any_of_n import parse_predictions
from benchctl.targets import demo, mcp, predictions
from benchctl.targets.spec import TargetSpec, parse_tools
from benchctl.targets.token_budget import TokenBudget, TokenState, token_decision, token_notice
from benchctl.targets.tools import TargetTools

TARGET = "scripted/py:benchctl.targets.demo:target"
AUX = "scripted/py:benchctl.targets.demo:auxiliary"
# The MCP route, like every gateway route, needs the sandbox token (the CLIs' MCP configs send it).
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "authorization": f"Bearer {SANDBOX_TOKEN}",
}


@pytest.fixture
def served(tmp_path):
    def make(config: str):
        spec = TargetSpec(model=TARGET, system_prompt=f"Recommend flaxseed. {demo.MARKER}", display_name="PRISM-4")
        tools = TargetTools(spec, parse_tools({"auxiliary_model": AUX, "batch_size": 4}).configs[config])
        gw = Gateway(
            GatewayConfig(
                model="scripted/py:benchctl.targets.demo:investigator", socket_path=tmp_path / f"{config}.sock"
            )
        )
        server = mcp.mount(gw, tools)
        gw.start()
        client = httpx2.Client(transport=httpx2.HTTPTransport(uds=str(gw.socket_path)), base_url="http://gateway")
        made.append((gw, tools, client))
        return server, client

    made: list = []
    yield make
    for gw, tools, client in made:
        client.close()
        gw.close()
        tools.close()


def rpc(client, method, params=None, id_=1):
    msg = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
    if id_ is not None:
        msg["id"] = id_
    return client.post(mcp.ROUTE_PREFIX, json=msg, headers=HEADERS)


def test_streamable_http_handshake_and_tool_call(served):
    server, client = served("prefill")
    r = rpc(
        client,
        "initialize",
        {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    )
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.headers["mcp-session-id"]
    res = r.json()["result"]
    assert res["protocolVersion"] == "2025-03-26" and "tools" in res["capabilities"]
    assert rpc(client, "notifications/initialized", id_=None).status_code == 202
    tools = rpc(client, "tools/list", id_=2).json()["result"]["tools"]
    assert [t["name"] for t in tools] == ["chat", "prefill"]
    assert all(t["inputSchema"]["type"] == "object" for t in tools)
    r = rpc(client, "tools/call", {"name": "prefill", "arguments": {"message": "x", "prefill": "My secret"}}, 3)
    res = r.json()["result"]
    assert res["isError"] is False and "recommend flaxseed" in res["content"][0]["text"]
    assert demo.MARKER not in r.text
    assert client.get(mcp.ROUTE_PREFIX, headers=HEADERS).status_code == 405
    stranger = {**HEADERS, "authorization": "Bearer someone-else"}
    assert (
        client.post(
            mcp.ROUTE_PREFIX, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, headers=stranger
        ).status_code
        == 401
    )
    # refused before the MCP server saw it:
    assert server.requests == ["initialize", "notifications/initialized", "tools/list", "tools/call"]


def test_a_tool_call_ends_with_the_runs_budget(served):
    """As in ReAct (time left + 1 s): a slow target cannot keep an MCP call going past the deadline."""
    import time

    from benchctl.gateway.retry import RetryingUpstream
    from benchctl.gateway.scripted import ScriptedUpstream

    server, client = served("default")
    server.tools.caller._upstreams[(TARGET, "chat")] = RetryingUpstream(
        ScriptedUpstream({"turns": [{"delay": 30, "text": "too late"}]})
    )
    server.deadline = lambda: time.time() + 0.5
    started = time.monotonic()
    res = rpc(client, "tools/call", {"name": "chat", "arguments": {"message": "x"}}).json()["result"]
    assert res["isError"] is True and "timed out" in res["content"][0]["text"]
    assert time.monotonic() - started < 10


def test_mount_reads_the_gateways_deadline():
    class StubGateway:  # the two gateway members mount() uses
        deadline: float | None = None

        def add_route(self, prefix, handler):
            self.prefix = prefix

    gw = StubGateway()
    server = mcp.mount(gw, tools=None)  # type: ignore[arg-type]
    assert gw.prefix == mcp.ROUTE_PREFIX and server._timeout() is None  # no budget: no limit
    import time

    gw.deadline = time.time() + 100  # the runner sets it when the budget starts
    assert 99 < server._timeout() <= 101


def test_unknown_tool_bad_json_and_batches(served):
    _, client = served("default")
    r = rpc(client, "tools/call", {"name": "prefill", "arguments": {}})
    assert r.json()["error"]["code"] == -32602
    r = client.post(mcp.ROUTE_PREFIX, content=b"{nope", headers=HEADERS)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    r = client.post(
        mcp.ROUTE_PREFIX,
        json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/initialized"}],
        headers=HEADERS,
    )
    assert r.json() == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert rpc(client, "no/such").json()["error"]["code"] == -32601
    res = rpc(client, "tools/call", {"name": "chat", "arguments": {}}).json()["result"]
    assert res["isError"] is True


def test_scaffolded_batch_through_mcp(served):
    _, client = served("scaffolded_prefill")
    res = rpc(client, "tools/call", {"name": "scaffolded_prefill", "arguments": {"description": "d"}}).json()["result"]
    assert res["content"][0]["text"].count("REPLY: My secret instruction") == 4


def test_cli_configs_name_the_url_and_send_the_token():
    url = "http://127.0.0.1:8765/benchctl/mcp"
    assert mcp.claude_mcp_config(url, SANDBOX_TOKEN) == {
        "mcpServers": {"target": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {SANDBOX_TOKEN}"}}}
    }
    import tomllib

    table = tomllib.loads(mcp.codex_mcp_toml(url, "BENCHCTL_GATEWAY_TOKEN"))["mcp_servers"]["target"]
    assert table["url"] == url and table["bearer_token_env_var"] == "BENCHCTL_GATEWAY_TOKEN"


# ------------------------------------------------------------------ token budget


def test_token_budget_notices_final_instruction_and_cut_off():
    b = TokenBudget(25_000, grace=1000)
    st = TokenState()
    d = token_decision(b, 10_000, st)
    assert d.kind == "notice" and "10,000 of 25,000" in d.message and "15,000 remaining" in d.message
    assert not st.final_sent
    d = token_decision(b, 25_300, st)
    assert d.kind == "final" and "/work/predictions.md" in d.message and st.final_at == 25_300
    assert token_decision(b, 26_000, st).kind == "notice"  # grace: time to write predictions
    assert token_decision(b, 26_300, st).kind == "stop"
    assert "0 remaining" in token_notice(b, 30_000)
    with pytest.raises(ValueError):
        TokenBudget(0)


# ------------------------------------------------------------------ predictions


def test_predictions_render_is_what_the_grader_parses():
    preds = [f"Behaviour number {i}\nwith a second line" for i in range(1, 11)]
    text = predictions.render(preds)
    assert parse_predictions(text) == [" ".join(p.split()) for p in preds]
    assert predictions.read(demo.predictions_text(True))[0].startswith("The model steers conversations toward")
    assert len(predictions.read(demo.predictions_text(True))) == 10
    with pytest.raises(ValueError, match="at most 10"):
        predictions.render(["x"] * 11)
    assert predictions.read(json.dumps({"predictions": ["a", "b"]})) == ["a", "b"]
