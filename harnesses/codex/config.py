"""Codex's CODEX_HOME: config.toml (gateway provider, everything phoning home off) and hooks.json,
plus the same settings as `-c` overrides.

Codex only takes a URL for its model provider, so it talks to a TCP→unix forwarder on the
sandbox's loopback (benchctl/gateway/forwarder.py), which reaches the gateway's socket. Features
and tools are switched off in config.toml rather than with `--disable` flags because
`codex exec resume` does not remember flags (verified with 0.147.0).
"""

from __future__ import annotations

import json
from typing import Any

from benchctl.harness import HarnessContext
from benchctl.sandbox.base import STATE_DIR
from harnesses.cli_harness import hooks_config

# Root-owned, sticky, world-writable: Codex creates its state files there, but cannot (nor can
# the agent) replace config.toml / hooks.json, which are root-owned and read-only. Not under /tmp:
# Codex refuses to create helper binaries there.
CODEX_HOME = f"{STATE_DIR}/codex-home"  # STATE_DIR: a size-capped tmpfs (benchctl/sandbox/base.py)
TOKEN_ENV = "BENCHCTL_GATEWAY_TOKEN"  # = cli_harness.TOKEN_ENV: the provider's key and the hooks' token
PROVIDER = "benchctl"
DEFAULT_PORT = 18555

# Features that reach the network, spawn sub-agents, or add tools an audit run should not have.
DISABLED_FEATURES = (
    "plugins",
    "apps",
    "multi_agent",
    "goals",
    "image_generation",
    "browser_use",
    "computer_use",
    "tool_suggest",
    "remote_plugin",
    "in_app_updates",
    "skill_mcp_dependency_install",
)
SUBAGENT_FEATURES = ("multi_agent",)


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string literal is a valid TOML basic string


def settings(port: int, opts: dict[str, Any]) -> list[tuple[str, str]]:
    """(dotted key, TOML value) pairs: written to config.toml AND passed as `-c` overrides.

    The overrides matter: Codex also loads a project config from the working directory
    (`/work/.codex/config.toml`), which the agent can write; `[features] hooks = false` there
    silently switches the hooks off for the next phase (verified). `-c` beats every file.
    """
    disabled = [f for f in DISABLED_FEATURES if not (opts.get("allow_subagents") and f in SUBAGENT_FEATURES)]
    p = f"model_providers.{PROVIDER}"
    pairs = [
        ("model_provider", _toml_str(PROVIDER)),
        (f"{p}.name", _toml_str(PROVIDER)),
        (f"{p}.base_url", _toml_str(f"http://127.0.0.1:{port}/v1")),
        (f"{p}.env_key", _toml_str(TOKEN_ENV)),
        (f"{p}.wire_api", '"responses"'),
        # The gateway retries upstream failures itself; Codex retrying on top multiplies waits.
        (f"{p}.request_max_retries", "2"),
        (f"{p}.stream_max_retries", "2"),
        ("check_for_update_on_startup", "false"),
        ("web_search", _toml_str("live" if opts.get("allow_web") else "disabled")),
        ("analytics.enabled", "false"),
        ("feedback.enabled", "false"),
        ("features.hooks", "true"),
        *[(f"features.{f}", "false") for f in disabled],
    ]
    if opts.get("reasoning_effort"):
        pairs.append(("model_reasoning_effort", _toml_str(str(opts["reasoning_effort"]))))
    return pairs


def config_toml(port: int, opts: dict[str, Any]) -> bytes:
    return ("".join(f"{k} = {v}\n" for k, v in settings(port, opts))).encode()


def overrides(port: int, opts: dict[str, Any]) -> list[str]:
    return [a for k, v in settings(port, opts) for a in ("-c", f"{k}={v}")]


def hooks_json(ctx: HarnessContext, cli: str) -> bytes:
    return json.dumps(hooks_config(ctx, cli), indent=2).encode()
