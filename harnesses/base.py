"""The Harness seam: how an agent is run inside a sandbox.

Built-ins (react, claude_code, codex) use exactly this contract; so would a plugin. The
runner owns the sandbox, the gateway and the transcript; a harness only drives the agent.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from benchctl.policies import Budget, RunPolicies, StopState, length_notice, time_notice
from benchctl.sandbox.base import Mount, Sandbox
from benchctl.transcript import TranscriptWriter

# budget_exhausted: a cost cap (benchctl/limits) stopped the run cleanly; finished, never averaged into scores
Outcome = Literal["completed", "timeout", "refused", "error", "budget_exhausted"]


@dataclass
class HarnessContext:
    """Everything a harness may use during one run. Built by the runner."""
    run_id: str
    model: str                      # the run's configured model id (the gateway serves it)
    instructions: str               # the task prompt given to the agent
    sandbox: Sandbox                # already started
    gateway: Any                    # benchctl.gateway.Gateway, already listening
    transcript: TranscriptWriter
    budget: Budget
    policies: RunPolicies
    run_dir: Path
    options: dict[str, Any] = field(default_factory=dict)   # harness options from task/sweep (e.g. reasoning_effort, disallowed_tools)
    stop_state: StopState = field(default_factory=StopState)
    cancel: threading.Event = field(default_factory=threading.Event)  # set on SIGINT/SIGTERM
    # hidden-behaviour audits (benchctl.targets): the target tools (TargetTools) and a token budget
    # (TokenBudget); None for other tasks. ReAct uses them natively; CLIs get the tools over MCP.
    target_tools: Any = None
    token_budget: Any = None
    # benchctl.limits.run.RunStop: set when a cost cap is reached; the harness then stops the agent
    # (ReAct before its next model call; a CLI once no call is in flight) and returns budget_exhausted.
    stop: Any = None


def cost_stopped(ctx: HarnessContext) -> bool:
    """A cost cap stopped the run (see HarnessContext.stop)."""
    return ctx.stop is not None and ctx.stop.is_set()


def fallback_count(ctx: HarnessContext) -> int:
    """How often the run's gateway has switched to its fallback model so far (0 when it cannot say)."""
    try:
        return len(ctx.gateway.summary().get("fallbacks") or [])
    except Exception:
        return 0


def tool_notices(ctx: HarnessContext, tool_id: str | None, file_text: str | None, now: float,
                 **ids: Any) -> list[str]:
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
    session_id: str | None = None          # for follow-ups (claude --resume / codex exec resume)
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
