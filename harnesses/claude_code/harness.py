"""The Claude Code adapter: `claude -p --output-format stream-json` inside the sandbox.

    claude -p --output-format stream-json --verbose --include-hook-events --model M
           --permission-mode bypassPermissions --settings '<hooks JSON>' --setting-sources=
           --disallowedTools=... [--resume SESSION] PROMPT

run as the sandbox user with stdin closed, the binary mounted read-only at
/opt/benchctl/bin/claude, model traffic through the gateway's unix socket. Options (task or
sweep `harness_options`):

    binary            path to a claude binary (default: the claude-agent-sdk wheel's, or $BENCHCTL_CLAUDE_BIN)
    cli_model         model name given to the CLI (default: the run model's name)
    disallowed_tools  list replacing the default (web, sub-agent and background tools)
    allow_subagents   keep Agent/Task/... (default false)
    allow_web         keep WebFetch/WebSearch (default false; the sandbox has no network anyway)
    extra_args        more CLI arguments, e.g. ["--max-turns", "50"]
"""

from __future__ import annotations

from typing import Any

from benchctl.binaries import CLAUDE_ENV, BinaryInfo, find_claude, require
from benchctl.gateway.upstream import ModelId
from benchctl.harness import HarnessContext
from benchctl.sandbox.base import Mount, StreamResult
from harnesses.agent_cli import CallTracker
from harnesses.claude_code import settings as cc
from harnesses.claude_code.stream import ClaudeStreamParser
from harnesses.cli_harness import CliHarness, extra_args, sandbox_socket, sandbox_token, stderr_tail
from harnesses.forwarder import forwarder_mount
from harnesses.tool_outputs import ClaudeRules, ToolOutputJoin


class ClaudeCodeHarness(CliHarness):
    name = "claude-code"
    binary_name = "claude"
    tool_rules = ClaudeRules()

    def find_binary(self) -> BinaryInfo:
        return require(find_claude(self.options.get("binary")), "Claude Code", "claude-code", CLAUDE_ENV)

    def extra_mounts(self) -> list[Mount]:
        # the gateway forwarder, used only when the run has target tools (MCP needs a URL)
        return [forwarder_mount()]

    def command(
        self, ctx: HarnessContext, opts: dict[str, Any], prompt: str, resume: str | None
    ) -> tuple[list[str], dict[str, str]]:
        model = str(opts.get("cli_model") or ModelId.parse(ctx.model).name)
        # Settings go inline, and `--setting-sources=` (none) ignores user/project/local settings
        # files: the agent can write ~/.claude and /work, and e.g. {"disableAllHooks": true} there
        # would switch the policies off for the next phase (verified). Nothing to tamper with.
        argv = [
            self.binary_in_sandbox(),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-hook-events",
            "--model",
            model,
            "--permission-mode",
            "bypassPermissions",
            "--settings",
            cc.settings(ctx, self.name).decode(),
            "--setting-sources=",
        ]
        tools = cc.disallowed_tools(opts)
        if tools:
            # `--disallowedTools A B` is variadic and would swallow the prompt: use the = form.
            argv.append("--disallowedTools=" + ",".join(tools))
        if resume:
            argv += ["--resume", resume]
        extra = extra_args(opts)
        if ctx.target_tools is not None:  # hidden-behaviour audits: target tools over MCP (harnesses.target_mcp)
            from harnesses.target_mcp import claude_mcp_flag

            extra = [*extra, claude_mcp_flag()]
        argv += [*extra, "--", prompt] if prompt.startswith("-") else [*extra, prompt]
        env = cc.environment(ctx, model, ctx.sandbox.user, sandbox_token())
        if ctx.target_tools is not None:
            from harnesses.target_mcp import claude_with_mcp

            return claude_with_mcp(argv, env, sandbox_socket(ctx))
        return argv, env

    def new_parser(self, ctx: HarnessContext, join: ToolOutputJoin) -> ClaudeStreamParser:
        return ClaudeStreamParser(ctx.transcript, self.name, join)

    def cli_outcome(
        self, parser: ClaudeStreamParser, res: StreamResult, tracker: CallTracker
    ) -> tuple[str, str | None]:
        result = parser.result
        if result is None:
            why = f"exited with code {res.exit_code}" if res.exit_code else "ended without a result event"
            tail = stderr_tail(res.stderr)
            return "error", f"claude {why}" + (f": {tail}" if tail else "")
        text = str(result.get("result") or "")[:500]
        if result.get("stop_reason") == "refusal":
            return "refused", text or "the model refused"
        if result.get("is_error") or result.get("subtype") not in (None, "success"):
            status = result.get("api_error_status")
            return "error", f"claude reported an error ({result.get('subtype')}" + (
                f", HTTP {status}" if status else ""
            ) + f"): {text or stderr_tail(res.stderr)}"
        if res.exit_code not in (0, None):
            return "error", f"claude exited with code {res.exit_code}: {stderr_tail(res.stderr)}"
        return "completed", None
