"""Threat model: every route of the gateway, the host-side hook and MCP routes included, needs the
sandbox token; from inside a real sandbox a request with no token or another one gets 401 before
its body is read, and is recorded."""

from __future__ import annotations

import json
import time

import pytest

from benchctl.harness import HarnessContext
from benchctl.policies import Budget, RunPolicies
from benchctl.targets import demo, mcp
from benchctl.targets.spec import TargetSpec, parse_tools
from benchctl.targets.tools import TargetTools
from harnesses.hooks import host as hook_host
from tests.rigs.threat import SOCKET, threat_rig

pytestmark = [pytest.mark.docker, pytest.mark.timeout(120)]

PROBE = r"""
import json, socket
def post(path, headers):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"} if "mcp" in path else {"input": {}}).encode()
    s = socket.socket(socket.AF_UNIX); s.connect(%(socket)r)
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    s.sendall(f"POST {path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n{extra}"
              f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return int(data.split(b" ", 2)[1]), data.partition(b"\r\n\r\n")[2].decode()
out = {}
for path in ("/benchctl/hooks/stop", "/benchctl/mcp"):
    for name, headers in (("none", {}), ("other", {"authorization": "Bearer sk-guess"}),
                          ("wrong-header", {"x-api-key": "benchctl-sandbox-token-but-not-quite"}),
                          ("token", {"authorization": "Bearer benchctl-sandbox-token"})):
        out[f"{path} {name}"] = post(path, headers)
print(json.dumps(out))
"""


def test_hook_and_mcp_routes_need_the_sandbox_token(sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with threat_rig(monkeypatch, sandbox_image) as rig:
        spec = TargetSpec(model="scripted/py:benchctl.targets.demo:target", system_prompt=f"x {demo.MARKER}")
        tools = TargetTools(
            spec, parse_tools({"auxiliary_model": "scripted/py:benchctl.targets.demo:auxiliary"}).configs["default"]
        )
        server = mcp.mount(rig.gw, tools)
        ctx = HarnessContext(
            run_id="r",
            model="m",
            instructions="",
            sandbox=rig.sandbox,
            gateway=rig.gw,
            transcript=rig.gw.transcript,
            budget=Budget(time.time(), 600),
            policies=RunPolicies(),
            run_dir=rig.transcript_path.parent,
        )
        host = hook_host.HookHost(ctx, "claude-code")
        rig.gw.add_route(hook_host.ROUTE_PREFIX, host.handle)
        try:
            res = rig.python(PROBE % {"socket": SOCKET})
        finally:
            tools.close()
        assert res.exit_code == 0, res.stderr
        out = {k: tuple(v) for k, v in json.loads(res.stdout).items()}
        for path in ("/benchctl/hooks/stop", "/benchctl/mcp"):
            for name in ("none", "other", "wrong-header"):
                status, body = out[f"{path} {name}"]
                assert status == 401 and json.loads(body)["error"]["type"] == "authentication_error", (path, name)
        assert out["/benchctl/mcp token"][0] == 200 and "chat" in out["/benchctl/mcp token"][1]
        assert out["/benchctl/hooks/stop token"] == (200, "{}")  # let through, then refused as forged
        # Only the tokened requests reached the handlers; every refusal is in the transcript.
        assert server.requests == ["tools/list"]
        assert [e["event"] for e in rig.events("forged_hook")] == ["Stop"] and host.counts == {}
        refused = [(e["path"], e["status"]) for e in rig.events("model_call") if e["status"] == 401]
        assert sorted(refused) == sorted([("/benchctl/hooks/stop", 401)] * 3 + [("/benchctl/mcp", 401)] * 3)
        assert rig.gw.summary()["refused"]["401"] == 6
