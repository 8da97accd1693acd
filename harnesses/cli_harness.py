"""What the Claude Code and Codex adapters share: phases, hooks, outcome rules, run-dir files.

A *phase* is one CLI invocation: the first run, then one per follow-up (which resumes the
CLI's own session). Each phase streams the CLI's JSON events into the transcript, keeps the
raw stdout / stderr / exit status under `<run_dir>/harness/`, and ends in an Outcome:

    timeout    killed at the budget's deadline (or the gateway refused calls past it)
    error      cancelled, the CLI failed (non-zero exit, error result) — with its message
    refused    the model's last answer was a refusal and no fallback rescued the run
    completed  the CLI ended its turn normally

Never `completed` when the CLI failed.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any, Protocol

from benchctl.binaries import BinaryInfo
from benchctl.harness import HarnessContext, HarnessResult, cost_stopped, stop_reason
from benchctl.sandbox.base import GATEWAY_DIR, TOOLS_DIR, WORK_DIR, Mount, SandboxError, StreamResult
from harnesses.agent_cli import CallTracker, PhaseFiles
from harnesses.hooks import host as hook_host
from harnesses.tool_outputs import CliRules, ToolOutputJoin

HOOK_SCRIPT = Path(__file__).parent / "hooks" / "hook.py"
HOOK_IN_SANDBOX = f"{TOOLS_DIR}/hooks/hook.py"
BIN_DIR = f"{TOOLS_DIR}/bin"
AGENT_HOME = "/home/agent"
MAX_PROMPT_BYTES = 100_000  # one argv string may not exceed 128 KiB on Linux
SETTLE_S = 2.0  # the longest a phase waits, after its CLI exited, for the gateway to record its calls


class StreamParser(Protocol):
    session_id: str | None

    def feed(self, line: str) -> None: ...

    def finish(self) -> None:
        """The stream has ended: write what was held for a line that will not come."""
        ...


class HarnessSetupError(RuntimeError):
    pass


def sandbox_socket(ctx: HarnessContext) -> str:
    """The gateway's unix socket as the sandbox sees it (its directory is mounted at /gateway)."""
    path = getattr(ctx.gateway, "socket_path", None)
    if not path:
        raise HarnessSetupError(
            "the gateway is not listening on a unix socket; the agent CLIs reach it only "
            "through the socket mounted at /gateway (start it with GatewayConfig(socket_path=...))"
        )
    return f"{GATEWAY_DIR}/{Path(path).name}"


def sandbox_token() -> str:
    """The dummy key the CLIs present to the gateway (the real keys never enter the sandbox)."""
    from benchctl.gateway.server import SANDBOX_TOKEN

    return SANDBOX_TOKEN


def extra_args(opts: dict[str, Any]) -> list[str]:
    """The harness option `extra_args`: more CLI arguments, checked to be a list of strings."""
    extra = opts.get("extra_args") or []
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise ValueError("harness option extra_args must be a list of strings")
    return extra


# The variable holding the sandbox token in both CLIs' environments; hook.py sends it with each hook.
TOKEN_ENV = "BENCHCTL_GATEWAY_TOKEN"


def hook_command(event: str, cli: str, ctx: HarnessContext) -> str:
    # -I -S: no user site, no PYTHON* variables, no site import: safer and ~10 ms faster per call.
    # (The length-policy file is not passed: the host reads it from the container itself.)
    return shlex.join(["python3", "-I", "-S", HOOK_IN_SANDBOX, event, "--cli", cli, "--socket", sandbox_socket(ctx)])


def hooks_config(ctx: HarnessContext, cli: str, **command: Any) -> dict[str, Any]:
    """The `hooks` settings both CLIs read (same schema): benchctl's hook script after every tool
    call and on stop. `command` adds fields to each hook command (e.g. a timeout)."""

    def hook(event: str) -> list[dict[str, Any]]:
        return [{"type": "command", "command": hook_command(event, cli, ctx), **command}]

    return {
        "hooks": {"PostToolUse": [{"matcher": "*", "hooks": hook("post_tool_use")}], "Stop": [{"hooks": hook("stop")}]}
    }


def install_protected(ctx: HarnessContext, directory: str, files: dict[str, bytes]) -> None:
    """Put `files` into `directory` owned by root and read-only, the directory sticky and
    world-writable (the CLI may add its own files there; nobody but root can replace ours).

    The agent runs as the same user as the CLI, so anything it could write, it could use to
    switch benchctl's hooks off. A sandbox that cannot write as root gets plain files (and the
    transcript says so)."""
    try:
        ctx.sandbox.put_files(directory, files, mode=0o444, dir_mode=0o1777, as_root=True)
    except SandboxError as e:
        ctx.transcript.emit(
            "harness_event",
            "harness",
            kind="unprotected_config",
            directory=directory,
            message=f"could not install as root ({str(e)[:300]}); files are agent-writable",
        )
        ctx.sandbox.put_files(directory, files)


class CliHarness:
    """Base of the CLI adapters. Subclasses set `name`, `binary_name` and implement the hooks below."""

    name = "cli"
    binary_name = "cli"
    tool_rules: CliRules = CliRules()  # how the stream's tools pair with the model's calls (tool_outputs.py)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self._binary: BinaryInfo | None = None
        self._hooks: hook_host.HookHost | None = None
        self._hooks_gateway: Any = None
        self._join: ToolOutputJoin | None = None
        self._phase = 0
        self._prepared_sandbox: Any = None

    # -- subclass interface ------------------------------------------------------------------

    def find_binary(self) -> BinaryInfo:
        raise NotImplementedError

    def extra_mounts(self) -> list[Mount]:
        return []

    def prepare(self, ctx: HarnessContext, opts: dict[str, Any]) -> None:
        """Write config files into the sandbox (once per sandbox)."""

    def command(
        self, ctx: HarnessContext, opts: dict[str, Any], prompt: str, resume: str | None
    ) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def new_parser(self, ctx: HarnessContext, join: ToolOutputJoin) -> StreamParser:
        """The stream parser for one phase; it hands finished tools to `join`."""
        raise NotImplementedError

    def cli_outcome(self, parser: Any, res: StreamResult, tracker: CallTracker) -> tuple[str, str | None]:
        raise NotImplementedError

    # -- Harness protocol --------------------------------------------------------------------

    @property
    def binary(self) -> BinaryInfo:
        if self._binary is None:
            self._binary = self.find_binary()
        return self._binary

    def binary_in_sandbox(self) -> str:
        return f"{BIN_DIR}/{self.binary_name}"

    def mounts(self) -> list[Mount]:
        return [
            Mount(self.binary.path, self.binary_in_sandbox(), True),
            Mount(HOOK_SCRIPT, HOOK_IN_SANDBOX, True),
            *self.extra_mounts(),
        ]

    def tool_versions(self) -> dict[str, str]:
        return {self.name: self.binary.version}

    def run(self, ctx: HarnessContext) -> HarnessResult:
        return self._phase_run(ctx, ctx.instructions, resume=None)

    def followup(self, ctx: HarnessContext, prompt: str, previous: HarnessResult) -> HarnessResult:
        if not previous.session_id:
            msg = f"cannot send a follow-up: the previous {self.name} phase has no session id to resume"
            ctx.transcript.emit("error", "harness", message=msg)
            return HarnessResult("error", error=msg)
        return self._phase_run(ctx, prompt, resume=previous.session_id)

    # -- one phase ---------------------------------------------------------------------------

    def _install_hooks(self, ctx: HarnessContext) -> None:
        if self._hooks is None or self._hooks_gateway is not ctx.gateway:
            self._hooks = hook_host.install(ctx, self.name)
            self._hooks_gateway = ctx.gateway
        else:
            self._hooks.ctx = ctx  # a follow-up may come with a new budget / stop state

    def _phase_run(self, ctx: HarnessContext, prompt: str, resume: str | None) -> HarnessResult:
        opts = {**self.options, **ctx.options}
        self._phase += 1
        phase = self._phase
        tr = ctx.transcript
        if len(prompt.encode()) > MAX_PROMPT_BYTES:
            msg = f"prompt is {len(prompt.encode())} bytes; the {self.name} harness passes it as one argument (max {MAX_PROMPT_BYTES})"
            tr.emit("error", "harness", message=msg)
            return HarnessResult("error", error=msg)
        try:
            self._install_hooks(ctx)
            if self._prepared_sandbox is not ctx.sandbox:
                self.prepare(ctx, opts)
                self._prepared_sandbox = ctx.sandbox
            argv, env = self.command(ctx, opts, prompt, resume)
        except Exception as e:
            msg = f"could not prepare {self.name}: {type(e).__name__}: {e}"
            tr.emit("error", "harness", message=msg)
            return HarnessResult("error", error=msg)

        files = PhaseFiles(ctx.run_dir, self.name, phase)
        if self._join is None or self._join.tr is not tr:
            self._join = ToolOutputJoin(tr, self.name, self.tool_rules)
        join = self._join
        parser = self.new_parser(ctx, join)
        if self._hooks is not None:  # hook events join the stream's tool ids (Codex's differ from the model's)
            self._hooks.tool_items = getattr(parser, "tool_items", None)
        tracker = CallTracker()
        tr.listeners += [tracker, join]
        tr.emit(
            "harness_event",
            "harness",
            cli=self.name,
            kind="start",
            phase=phase,
            resume=resume,
            version=self.binary.version,
            argv=_shown(argv, prompt),
        )

        def on_line(line: str) -> None:
            files.stdout_line(line)
            parser.feed(line)

        started = time.time()
        try:
            failure: str | None = None
            try:
                # The deadline moves while rate limits hold calls back; a cost cap ends the CLI once
                # no call is in flight. The kill is a SIGKILL: both CLIs append their session logs
                # as they go, so a killed session still resumes for follow-ups (verified).
                res = ctx.sandbox.exec_stream(
                    argv,
                    on_line,
                    deadline=lambda: ctx.budget.deadline,
                    cancel=ctx.cancel,
                    stop=ctx.stop.settled if ctx.stop is not None else None,
                    env=env,
                    workdir=WORK_DIR,
                )
            except Exception as e:
                res = StreamResult(None, False, False, f"{type(e).__name__}: {e}", time.time() - started, None)
                failure = f"could not run {self.name} in the sandbox: {type(e).__name__}: {e}"
            parser.finish()
            # Before the join and the tracker stop listening: the phase's last model_calls carry the
            # last tools' outputs (and say whether the last answer was a refusal).
            self._settle_gateway(ctx, phase)
            status, error = ("error", failure) if failure else self._outcome(ctx, parser, res, tracker)
        finally:
            for listener in (tracker, join):
                try:
                    tr.listeners.remove(listener)
                except ValueError:
                    pass
            join.end_phase()  # tools whose output never reached the model: the CLI's own report
        files.finish(_shown(argv, prompt), res, status, error)
        if res.stderr.strip():
            tr.emit(
                "stderr",
                "harness",
                cli=self.name,
                phase=phase,
                text=res.stderr[-20_000:],
                truncated=len(res.stderr) > 20_000,
            )
        first_call_s = None if tracker.first_call_t is None else round(tracker.first_call_t - started, 3)
        tr.emit(
            "harness_event",
            "harness",
            cli=self.name,
            kind="exit",
            phase=phase,
            exit_code=res.exit_code,
            timed_out=res.timed_out,
            cancelled=res.cancelled,
            duration_s=round(res.duration_s, 3),
            status=status,
            model_calls=tracker.calls,
            served_models=tracker.served,
        )
        if error:
            tr.emit("error", "harness", message=error)
        hooks = dict(self._hooks.counts) if self._hooks else {}
        return HarnessResult(
            status,  # type: ignore[arg-type]
            error=error,
            exit_code=res.exit_code,
            turns=tracker.calls,
            session_id=parser.session_id or resume,
            details={
                "phase": phase,
                "cli_version": self.binary.version,
                "duration_s": round(res.duration_s, 3),
                "cli_first_output_s": res.first_output_s,
                "first_model_call_s": first_call_s,
                "model_calls": tracker.calls,
                "served_models": tracker.served,
                "refusals": tracker.refusals,
                "fallbacks": tracker.fallbacks,
                "hooks": hooks,
                "rejected_tool_calls": dict(join.rejected),
                "files": str(files.dir.relative_to(ctx.run_dir)),
            },
        )

    def _settle_gateway(self, ctx: HarnessContext, phase: int) -> None:
        """Wait (at most SETTLE_S) until the gateway has recorded every call in flight as the CLI
        exited. A CLI can exit with its last answer in hand before the gateway writes that call's
        model_call: Codex leaves right after `response.completed`, while the gateway records the
        call when the upstream's body ends or when it notices the client's close. A call still
        unrecorded at the bound (a stuck upstream whose client did not go away) is recorded later,
        after the join stopped listening: its tool outputs keep the CLI's report (`received: false`),
        and a warning says why."""
        t0 = time.monotonic()
        if ctx.gateway.settle(SETTLE_S):
            return
        ctx.transcript.emit(
            "warning",
            "harness",
            kind="gateway_unsettled",
            harness=self.name,
            phase=phase,
            waited_s=round(time.monotonic() - t0, 3),
            message=f"the gateway had not recorded every model call in flight when {self.name} "
            f"exited within {SETTLE_S:g} s; this phase's last tool results may say "
            "received: false for output the model got",
        )

    def _outcome(
        self, ctx: HarnessContext, parser: Any, res: StreamResult, tracker: CallTracker
    ) -> tuple[str, str | None]:
        if res.cancelled:
            return "error", "cancelled"
        if res.stopped:
            return "budget_exhausted", stop_reason(ctx)  # ended by a cost cap once no call was in flight
        if res.timed_out:
            return "timeout", None
        status, error = self.cli_outcome(parser, res, tracker)
        if status == "error" and cost_stopped(ctx):
            return "budget_exhausted", stop_reason(ctx)  # it failed on the calls the gateway refused after the cap
        if status == "error" and ctx.budget.expired(time.time()):
            return "timeout", None  # the gateway refuses calls past the deadline; that is a timeout
        return status, error


def _shown(argv: list[str], prompt: str) -> list[str]:
    """argv for logs: the prompt replaced by its length (it is in the transcript already)."""
    return [f"<prompt: {len(prompt)} chars>" if a == prompt else a for a in argv]


def stderr_tail(stderr: str, limit: int = 600) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-5:])[-limit:]
