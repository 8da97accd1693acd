"""The target tools as an MCP server: JSON-RPC 2.0 over the "streamable HTTP" transport, served
as a gateway route on the run's unix socket (`/benchctl/mcp`).

Agents inside the `--network none` sandbox reach it the same way they reach the gateway:
Claude Code and Codex both take an MCP server *URL*, so they go through the in-sandbox TCP→unix
forwarder (`benchctl/gateway/forwarder.py`) on 127.0.0.1: `http://127.0.0.1:PORT/benchctl/mcp`.

What is implemented (spec revision 2025-06-18, backwards compatible with 2025-03-26):
  POST  initialize                 -> protocolVersion (the client's if known), capabilities.tools, serverInfo,
                                      and an `Mcp-Session-Id` header
  POST  notifications/* (no id)    -> 202 Accepted, empty body
  POST  ping, tools/list, tools/call
  POST  a JSON array (batch)       -> array of responses
  GET                               -> 405 (no server-initiated stream; allowed by the spec)
  DELETE                            -> 200 (session end)
Responses are `application/json` (a server may answer a POST with JSON instead of SSE). A failed
tool is a normal result with `isError: true`, as MCP prescribes, so the agent sees the message.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from benchctl.targets.tools import TargetTools

if TYPE_CHECKING:
    from benchctl.harness import HostTools

ROUTE_PREFIX = "/benchctl/mcp"
SERVER_NAME = "target"  # the name agents see: Claude Code tools become mcp__target__chat
PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
JSON_HEADERS = {"content-type": "application/json"}

Response = tuple[int, dict[str, str], bytes]


class McpServer:
    """Serves any host tools (names, specs(), call()): the target tools, or an imported task's
    run_task_tests (benchctl/task_import/open_book.py), which comes with its own `instructions`."""

    def __init__(
        self,
        tools: HostTools,
        call_timeout: float | None = None,
        deadline: Callable[[], float | None] | None = None,
        instructions: str | None = None,
    ) -> None:
        self.tools = tools
        self.instructions = instructions
        self.call_timeout = call_timeout
        self.deadline = deadline  # the run's deadline (unix seconds), read at each call
        self.session_id = uuid.uuid4().hex
        self.requests: list[str] = []  # JSON-RPC methods seen, for tests and debugging

    def handle(self, method: str, path: str, body: bytes) -> Response:
        """The gateway route handler (runs in a worker thread)."""
        if method == "GET":
            return 405, {"allow": "POST, DELETE", **JSON_HEADERS}, b'{"error": "no server-initiated stream"}'
        if method == "DELETE":
            return 200, JSON_HEADERS, b"{}"
        if method != "POST":
            return 405, {"allow": "POST, DELETE", **JSON_HEADERS}, b'{"error": "use POST"}'
        try:
            msg = orjson.loads(body) if body else None
        except orjson.JSONDecodeError as e:
            return 400, JSON_HEADERS, orjson.dumps(_error(None, -32700, f"parse error: {e}"))
        headers = {**JSON_HEADERS, "mcp-session-id": self.session_id}
        if isinstance(msg, list):
            out = [r for r in (self.dispatch(m) for m in msg) if r is not None]
            return (200, headers, orjson.dumps(out)) if out else (202, headers, b"")
        reply = self.dispatch(msg)
        if reply is None:
            return 202, headers, b""
        return 200, headers, orjson.dumps(reply)

    def dispatch(self, msg: Any) -> dict[str, Any] | None:
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or not isinstance(msg.get("method"), str):
            if isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg):
                return None  # a client's response to a server request: we never send any
            return _error(msg.get("id") if isinstance(msg, dict) else None, -32600, "invalid JSON-RPC request")
        method, rid, params = msg["method"], msg.get("id"), msg.get("params") or {}
        self.requests.append(method)
        if "id" not in msg:  # a notification (initialized, cancelled, ...): nothing to answer
            return None
        if method == "initialize":
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
            from benchctl import __version__

            return _result(
                rid,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": SERVER_NAME, "version": __version__},
                    "instructions": self.instructions or _default_instructions(self.tools),
                },
            )
        if method == "ping":
            return _result(rid, {})
        if method == "tools/list":
            return _result(
                rid,
                {
                    "tools": [
                        {"name": s["name"], "description": s["description"], "inputSchema": s["parameters"]}
                        for s in self.tools.specs()
                    ]
                },
            )
        if method == "tools/call":
            if not isinstance(params, dict) or not isinstance(params.get("name"), str):
                return _error(rid, -32602, "tools/call needs params.name")
            name = params["name"]
            if name not in self.tools.names:
                return _error(rid, -32602, f"unknown tool {name!r}; available: {', '.join(self.tools.names)}")
            out = self.tools.call(name, params.get("arguments") or {}, self._timeout())
            return _result(rid, {"content": [{"type": "text", "text": out.text}], "isError": out.is_error})
        if method in ("resources/list", "prompts/list", "resources/templates/list"):
            key = {
                "resources/list": "resources",
                "prompts/list": "prompts",
                "resources/templates/list": "resourceTemplates",
            }[method]
            return _result(rid, {key: []})
        return _error(rid, -32601, f"method not found: {method}")

    def _timeout(self) -> float | None:
        """A tool call ends with the run's budget, as ReAct's do (time left + 1 s)."""
        timeout = self.call_timeout
        deadline = self.deadline() if self.deadline else None
        if deadline is not None:
            left = max(1.0, deadline - time.time() + 1.0)
            timeout = left if timeout is None else min(timeout, left)
        return timeout


def _result(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _default_instructions(tools: HostTools) -> str:
    # only the target tools go without instructions (open_book passes its own)
    name = tools.target.display_name if isinstance(tools, TargetTools) else "the audit"
    return f"Tools for probing {name}."


def mount(
    gateway: Any, tools: HostTools, call_timeout: float | None = None, instructions: str | None = None
) -> McpServer:
    """Register the MCP route on a started (or not yet started) gateway; returns the server."""
    server = McpServer(
        tools, call_timeout, deadline=lambda: getattr(gateway, "deadline", None), instructions=instructions
    )
    gateway.add_route(ROUTE_PREFIX, server.handle)
    return server


def claude_mcp_config(url: str, token: str) -> dict[str, Any]:
    """The `--mcp-config` JSON for Claude Code (an http server entry). Like every gateway route the
    MCP route needs the sandbox token; the dummy token is no secret (the agent has it anyway)."""
    return {"mcpServers": {SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}}


def codex_mcp_toml(url: str, token_env: str) -> str:
    """The config.toml table for Codex (streamable HTTP server by URL), sending the sandbox token
    from the environment variable `token_env` (the one Codex's model provider reads)."""
    return (
        f'\n[mcp_servers.{SERVER_NAME}]\nurl = "{url}"\nbearer_token_env_var = "{token_env}"\n'
        "startup_timeout_sec = 30\ntool_timeout_sec = 900\n"
    )
