"""How the agent CLIs inside the network-less sandbox reach the target tools (MCP).

Both CLIs take an MCP server *URL* only, so they reach the gateway's MCP route through the
in-sandbox TCP→unix forwarder (`benchctl/gateway/forwarder.py`) on 127.0.0.1, as Codex already
does for its model traffic. Verified with Claude Code 2.1.332 and Codex 0.147.0:

- Claude Code: `--mcp-config=<json>` (the `=` form: the flag is variadic and would eat the prompt)
  with `{"mcpServers": {"target": {"type": "http", "url": ...}}}`. It cannot use the unix socket
  for MCP (ANTHROPIC_UNIX_SOCKET covers only the API: the server shows `status: failed`), so
  the harness starts the forwarder next to it. By default Claude Code defers MCP tools behind
  ToolSearch; `ENABLE_TOOL_SEARCH=false` sends them with the request like any other tool, so every
  harness shows the investigator the same tools up front. Tools appear as `mcp__target__<tool>`.
  `MCP_TOOL_TIMEOUT` (ms) is raised so a scaffolded batch of 100 is not cut off.
- Codex: `[mcp_servers.target] url = ...` in config.toml (its forwarder already runs). Codex
  0.147 always defers MCP tools behind its `tool_search` tool when the model's metadata supports
  it (known slugs such as gpt-5.5); with other model names the tools come as a Responses
  `namespace` tool `mcp__target` holding `chat`, `prefill`, ... and calls carry
  `"namespace": "mcp__target"`.
"""

from __future__ import annotations

import json

from benchctl.targets import mcp

CLAUDE_FORWARDER_PORT = 18556
TOOL_TIMEOUT_MS = 900_000


def mcp_url(port: int) -> str:
    return f"http://127.0.0.1:{port}{mcp.ROUTE_PREFIX}"


def claude_mcp_flag(port: int = CLAUDE_FORWARDER_PORT) -> str:
    """Claude Code's option naming the target MCP server (to go before the prompt), with the sandbox token."""
    from benchctl.gateway.exchange import SANDBOX_TOKEN

    return "--mcp-config=" + json.dumps(mcp.claude_mcp_config(mcp_url(port), SANDBOX_TOKEN))


def claude_with_mcp(
    argv: list[str], env: dict[str, str], socket: str, port: int = CLAUDE_FORWARDER_PORT
) -> tuple[list[str], dict[str, str]]:
    """Claude Code's argv (holding `claude_mcp_flag(port)`) and env for the target MCP server: the
    command runs behind a wrapper that starts the forwarder."""
    from harnesses.forwarder import behind_forwarder

    return (
        behind_forwarder(argv, port, socket, "mcp-forwarder.log"),
        {**env, "ENABLE_TOOL_SEARCH": "false", "MCP_TOOL_TIMEOUT": str(TOOL_TIMEOUT_MS)},
    )


def codex_mcp_config(port: int) -> str:
    """The config.toml addition for Codex, whose forwarder listens on `port` (token: its provider's variable)."""
    from harnesses.cli_harness import TOKEN_ENV

    return mcp.codex_mcp_toml(mcp_url(port), TOKEN_ENV)
