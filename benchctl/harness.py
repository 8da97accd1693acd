"""The Harness seam: how an agent is run inside a sandbox, and the harnesses by name.

Built-ins (react, claude-code, codex: the top-level `harnesses` package) use exactly this contract;
so does a plugin. The runner owns the sandbox, the gateway and the transcript; a harness only drives
the agent. Harnesses are found by name through entry points (`HARNESSES`, group
`benchctl.harnesses`; benchctl/plugins.py): nothing in benchctl imports an adapter directly.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from benchctl.plugins import Registry
from benchctl.policies import Budget, RunPolicies, StopState, length_notice, time_notice
from benchctl.sandbox.base import Mount, Sandbox
from benchctl.transcript import TranscriptWriter

if TYPE_CHECKING:  # names for annotations only: defining a harness loads neither the gateway nor the targets
    from benchctl.gateway.context import CallObserver, RouteHandler
    from benchctl.targets.token_budget import TokenBudget

# budget_exhausted: a cost cap (benchctl/limits) stopped the run cleanly; finished, never averaged into scores
Outcome = Literal["completed", "timeout", "refused", "error", "budget_exhausted"]


# ---- what a harness may call on the context's objects ------------------------------------------
# Each protocol lists exactly the members the built-in harnesses (and the helpers they call with
# the context) use; the real implementations are named in the docstrings and checked to conform
# by tests/harnesses/test_harness_protocols.py (mypy, and isinstance plus parameter names at run time). Need
# another member? Add it here first, where a harness author looks.


@runtime_checkable
class HarnessGateway(Protocol):
    """The run's model gateway as a harness sees it (`benchctl.gateway.server.Gateway`), already
    listening. Every model call of the agent goes through it: a CLI through its unix socket (the
    socket's directory is mounted at /gateway), ReAct through the SDK clients of
    `benchctl.gateway.clients`, which take this object and read `socket_path` / `url`. The other
    members are host-side: counters, the deadline, and routes for the sandbox to call back on."""

    @property
    def socket_path(self) -> Path | None:
        """The unix socket on the host (None when it listens on TCP only, or before it starts)."""
        ...

    @property
    def url(self) -> str | None:
        """Its TCP address when it listens on one (`benchctl gateway --listen`), else None."""
        ...

    def summary(self) -> dict[str, Any]:
        """Its counters so far: `usage` (the token budget reads `output_tokens`), `fallbacks` (one
        entry per switch to the fallback model after a refusal), calls, cost, refusals, errors."""
        ...

    def set_deadline(self, unix_seconds: float | None) -> None:
        """Start a phase ending at `unix_seconds`: from then on the gateway refuses new model calls
        and cuts those in flight (a spent token budget ends the run's time this way)."""
        ...

    def settle(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds until every model call in flight now is recorded (its
        `model_call` in the transcript); False when some still was at the timeout. A CLI can exit
        with its last answer in hand before the gateway has recorded that call: the CLI harnesses
        wait this way before reading the phase's last tool outputs from the record."""
        ...

    def add_route(self, prefix: str, handler: RouteHandler) -> None:
        """Serve requests from the sandbox under `prefix` on the host: `handler(method, path, body)
        -> (status, headers, body)` in a worker thread (the CLI hook host; MCP tools)."""
        ...

    def add_observer(self, observer: CallObserver) -> None:
        """Tell `observer` what the gateway itself sees of every model call from now on (the hook
        ledger checks each CLI hook against it)."""
        ...

    def refused(self, status: int | str, why: str) -> bool:
        """Count a request refused on the host side (e.g. "forged_hook"); True while it should also
        be written to the transcript (the first few of each kind; the rest are only counted)."""
        ...


class HostToolResult(Protocol):
    """What one host tool call gives back: the text the model gets as the tool result."""

    @property
    def text(self) -> str: ...

    @property
    def is_error(self) -> bool: ...


@runtime_checkable
class HostTools(Protocol):
    """Tools that run on the host, not in the sandbox: a hidden-behaviour audit's target tools
    (`benchctl.targets.tools.TargetTools`) or an imported task's `run_task_tests`
    (`benchctl.task_import.open_book.TaskTestsTool`). ReAct offers `specs()` to the model beside
    its sandbox tools and runs a call to one of `names` with `call`. The CLIs reach the same object
    over MCP on the gateway (mounted by the runner), so they only check that the run has it."""

    @property
    def names(self) -> Collection[str]:
        """The tools' names, as in `specs()`."""
        ...

    def specs(self) -> list[dict[str, Any]]:
        """One JSON-schema definition per tool: {"name", "description", "parameters"}, the shape of
        ReAct's own tool specs."""
        ...

    def call(self, name: str, args: dict[str, Any], timeout: float | None = None) -> HostToolResult:
        """Run one tool with the model's arguments, blocking at most `timeout` seconds; a failure is
        a result with `is_error`, never an exception."""
        ...


@runtime_checkable
class CostStop(Protocol):
    """A run's cost-cap stop, the side a harness reads (`benchctl.limits.run.RunStop`; the run's
    limits set it when a cost cap is reached). Once set, the harness stops the agent — ReAct before
    its next model call, a CLI once `settled()` — and returns `budget_exhausted` with `reason`."""

    @property
    def reason(self) -> str | None:
        """Which cap was reached (None until set)."""
        ...

    @property
    def info(self) -> Mapping[str, Any]:
        """The cap's numbers, and under "notice" the text the agent is told."""
        ...

    def is_set(self) -> bool:
        """A cost cap is reached: no new model call may start."""
        ...

    def settled(self) -> bool:
        """Set, and none of the run's model calls is in flight any more: the agent can be ended."""
        ...


@dataclass
class HarnessContext:
    """Everything a harness may use during one run. Built by the runner."""

    run_id: str
    model: str  # the run's configured model id (the gateway serves it)
    instructions: str  # the task prompt given to the agent
    sandbox: Sandbox  # already started
    gateway: HarnessGateway  # already listening
    transcript: TranscriptWriter
    budget: Budget
    policies: RunPolicies
    run_dir: Path
    options: dict[str, Any] = field(
        default_factory=dict
    )  # harness options from task/sweep (e.g. reasoning_effort, disallowed_tools)
    stop_state: StopState = field(default_factory=StopState)
    cancel: threading.Event = field(default_factory=threading.Event)  # set on SIGINT/SIGTERM
    # hidden-behaviour audits (benchctl.targets) and imported tasks' tests: tools that run on the host
    # (ReAct uses them natively; CLIs get them over MCP), and an audit's token budget (a value:
    # harnesses apply it with benchctl.targets.token_budget.TokenBudgetHook); None for other tasks.
    target_tools: HostTools | None = None
    token_budget: TokenBudget | None = None
    # set when a cost cap is reached; the harness then stops the agent (ReAct before its next model
    # call; a CLI once no call is in flight) and returns budget_exhausted. The runner always gives one.
    stop: CostStop | None = None


def cost_stopped(ctx: HarnessContext) -> bool:
    """A cost cap stopped the run (see HarnessContext.stop)."""
    return ctx.stop is not None and ctx.stop.is_set()


def stop_reason(ctx: HarnessContext) -> str | None:
    """Which cost cap stopped the run: the error of its `budget_exhausted` result (None: none did)."""
    return ctx.stop.reason if ctx.stop is not None and ctx.stop.is_set() else None


def fallback_count(ctx: HarnessContext) -> int:
    """How often the run's gateway has switched to its fallback model so far (0 when it cannot say)."""
    try:
        return len(ctx.gateway.summary().get("fallbacks") or [])
    except Exception:
        return 0


def tool_notices(ctx: HarnessContext, tool_id: str | None, file_text: str | None, now: float, **ids: Any) -> list[str]:
    """The policy notices after one tool call, each also written to the transcript as a `notice`:
    the length-policy file's word count when the call changed it (`file_text`, else None), then the
    time remaining. ReAct appends them to the tool result; the CLI hook host (harnesses/hooks/host.py)
    returns them as the hook's additionalContext, so transcripts look alike across harnesses."""
    pol, notices = ctx.policies, []
    if pol.length is not None and file_text is not None:
        words = length_notice(pol.length, file_text)
        ctx.transcript.emit("notice", "policy", kind="words", text=words, tool_id=tool_id, **ids)
        notices.append(words)
    if pol.notify_time:
        tn = time_notice(ctx.budget, now)
        ctx.transcript.emit("notice", "policy", kind="time", text=tn, tool_id=tool_id, **ids)
        notices.append(tn)
    return notices


@dataclass
class HarnessResult:
    status: Outcome
    error: str | None = None
    exit_code: int | None = None
    turns: int = 0
    session_id: str | None = None  # for follow-ups (claude --resume / codex exec resume)
    details: dict[str, Any] = field(default_factory=dict)


class Harness(Protocol):
    name: str

    def mounts(self) -> list[Mount]:
        """Host paths (agent binaries, helper scripts) to mount read-only before the sandbox starts."""
        ...

    def tool_versions(self) -> dict[str, str]:
        """Versions of the agent binaries used, for meta.json."""
        ...

    def run(self, ctx: HarnessContext) -> HarnessResult:
        """Run the agent on ctx.instructions until it stops, the budget ends, or ctx.cancel is set."""
        ...

    def followup(self, ctx: HarnessContext, prompt: str, previous: HarnessResult) -> HarnessResult:
        """Send a follow-up prompt in the same session (after `run`)."""
        ...


HarnessFactory = Callable[..., Harness]  # a Harness class, or a callable returning one

HARNESSES: Registry[HarnessFactory] = Registry("benchctl.harnesses", "harness")


def create_harness(name: str, options: dict[str, Any] | None = None) -> Harness:
    """The harness called `name`; it gets its options as keyword `options` if it accepts it.
    An unknown name raises benchctl.plugins.UnknownPlugin, naming the known ones."""
    factory = HARNESSES.load(name)
    try:
        takes_options = "options" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_options = False
    return factory(options=dict(options or {})) if takes_options else factory()
