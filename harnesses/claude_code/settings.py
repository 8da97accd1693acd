"""The Claude Code settings (passed inline as `--settings JSON`) and environment benchctl runs it with.

Settings carry only the hooks (PostToolUse → time/word notices, Stop → continue/revise), all
answered by the host through the in-sandbox hook script. The environment pins every
model-role variable to the run's model (the gateway serves the run's model whatever is asked,
but pinning keeps the CLI's own bookkeeping and prompts consistent), points the Anthropic
client at the gateway's unix socket with the dummy sandbox token, and turns off everything
that would phone home or switch models behind the gateway's back.
"""

from __future__ import annotations

from typing import Any

import orjson

from benchctl.harness import HarnessContext
from harnesses.cli_harness import AGENT_HOME, TOKEN_ENV, hooks_config, sandbox_socket

# Tools an auditing run should not have by default: the web (there is no network anyway, and a
# failing tool wastes turns), sub-agents (unless the task allows them), and background
# scheduling / worktree tools that make no sense in a one-shot headless run.
WEB_TOOLS = ["WebFetch", "WebSearch"]
SUBAGENT_TOOLS = ["Agent", "Task", "Workflow", "ListAgents", "SendMessage", "TaskStop"]
BACKGROUND_TOOLS = [
    "ScheduleWakeup",
    "CronCreate",
    "CronDelete",
    "CronList",
    "Monitor",
    "EnterWorktree",
    "ExitWorktree",
]

MODEL_ROLE_VARS = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_FABLE_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
    "CLAUDE_CODE_WORKFLOW_SUBAGENT_MODEL",
    "CLAUDE_CODE_AUTO_MODE_MODEL",
    "CLAUDE_CODE_BG_CLASSIFIER_MODEL",
)

QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_COST_WARNINGS": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    # The gateway owns fallback: the CLI must not switch models itself (its refusal *retry*
    # stays on: that retry is what reaches the gateway's fallback model).
    "CLAUDE_CODE_DISABLE_REFUSAL_FALLBACK": "1",
    "CLAUDE_CODE_NO_MODEL_FALLBACK": "1",
    "CLAUDE_CODE_DISABLE_MODEL_ACCESS_FALLBACK": "1",
    # The gateway already retries upstream failures; a few CLI retries cover gateway hiccups.
    "CLAUDE_CODE_MAX_RETRIES": "2",
}


def disallowed_tools(opts: dict[str, Any]) -> list[str]:
    """Option `disallowed_tools` replaces the default list; `allow_subagents` / `allow_web` trim it."""
    if "disallowed_tools" in opts:
        tools = opts["disallowed_tools"]
        if isinstance(tools, str):
            tools = [t.strip() for t in tools.split(",") if t.strip()]
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise ValueError(
                "harness option disallowed_tools must be a list of tool names (or a comma-separated string)"
            )
        return list(tools)
    tools = list(BACKGROUND_TOOLS)
    if not opts.get("allow_web", False):
        tools = WEB_TOOLS + tools
    if not opts.get("allow_subagents", False):
        tools += SUBAGENT_TOOLS
    return tools


def settings(ctx: HarnessContext, cli: str) -> bytes:
    return orjson.dumps(hooks_config(ctx, cli, timeout=120))


def environment(ctx: HarnessContext, cli_model: str, user: str, token: str) -> dict[str, str]:
    env = {
        "HOME": AGENT_HOME,
        "ANTHROPIC_UNIX_SOCKET": sandbox_socket(ctx),
        "ANTHROPIC_BASE_URL": "http://gateway",
        "ANTHROPIC_API_KEY": token,
        TOKEN_ENV: token,
        **QUIET_ENV,
    }  # TOKEN_ENV: for the hook script
    env.update({k: cli_model for k in MODEL_ROLE_VARS})
    if user in ("root", "0"):
        env["IS_SANDBOX"] = "1"  # bypassPermissions refuses to run as root without it
    return env
