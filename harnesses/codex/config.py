"""Codex's CODEX_HOME: config.toml (gateway provider, everything phoning home off) and hooks.json.

Codex only takes a URL for its model provider, so it talks to a TCP→unix forwarder on the
sandbox's loopback (benchctl/gateway/forwarder.py), which reaches the gateway's socket. Features
and tools are switched off in config.toml rather than with `--disable` flags because
`codex exec resume` does not remember flags (verified with 0.147.0).
"""
from __future__ import annotations

import json
from typing import Any

from harnesses.base import HarnessContext
from harnesses.cli_harness import AGENT_HOME, hook_command

CODEX_HOME = f"{AGENT_HOME}/.codex"        # not under /tmp: Codex refuses helper binaries there
TOKEN_ENV = "BENCHCTL_GATEWAY_TOKEN"
PROVIDER = "benchctl"
DEFAULT_PORT = 18555

# Features that reach the network, spawn sub-agents, or add tools an audit run should not have.
DISABLED_FEATURES = ("plugins", "apps", "multi_agent", "goals", "image_generation", "browser_use", "computer_use",
                     "tool_suggest", "remote_plugin", "in_app_updates", "skill_mcp_dependency_install")
SUBAGENT_FEATURES = ("multi_agent",)


def _toml_str(s: str) -> str:
    return json.dumps(s)   # a JSON string literal is a valid TOML basic string


def config_toml(port: int, opts: dict[str, Any]) -> bytes:
    disabled = [f for f in DISABLED_FEATURES if not (opts.get("allow_subagents") and f in SUBAGENT_FEATURES)]
    lines = [
        f"model_provider = {_toml_str(PROVIDER)}",
        "check_for_update_on_startup = false",
        f"web_search = {_toml_str('live' if opts.get('allow_web') else 'disabled')}",
    ]
    if opts.get("reasoning_effort"):
        lines.append(f"model_reasoning_effort = {_toml_str(str(opts['reasoning_effort']))}")
    lines += [
        "",
        f"[model_providers.{PROVIDER}]",
        f"name = {_toml_str(PROVIDER)}",
        f"base_url = {_toml_str(f'http://127.0.0.1:{port}/v1')}",
        f"env_key = {_toml_str(TOKEN_ENV)}",
        'wire_api = "responses"',
        # The gateway retries upstream failures itself; Codex retrying on top multiplies waits.
        "request_max_retries = 2",
        "stream_max_retries = 2",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[features]",
        *[f"{f} = false" for f in disabled],
        "",
    ]
    return "\n".join(lines).encode()


def hooks_json(ctx: HarnessContext, cli: str) -> bytes:
    hook = lambda event: [{"type": "command", "command": hook_command(event, cli, ctx)}]
    doc = {"hooks": {"PostToolUse": [{"matcher": "*", "hooks": hook("post_tool_use")}],
                     "Stop": [{"hooks": hook("stop")}]}}
    return json.dumps(doc, indent=2).encode()
