"""Budget and policy: pure functions of (time, file contents, config).

Every harness applies the same rules: ReAct calls these in its loop; the Claude Code and
Codex adapters call them from the host when their in-sandbox hooks ask (see the gateway's
hook route). Nothing here does I/O or reads the clock itself: callers pass `now`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field


def format_duration(seconds: float) -> str:
    """Human duration: 0s, 45s, 7m 12s, 1h 05m."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m"


_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m)?\s*(?:(\d+(?:\.\d+)?)\s*s)?\s*$")


def parse_duration(text: str) -> float:
    """'10m' -> 600, '2h' -> 7200, '90s' -> 90, '1h30m' -> 5400, '45' -> 45 seconds."""
    t = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    m = _DURATION.match(t)
    if not t or not m or not any(m.groups()):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 10m, 2h, 1h30m)")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


@dataclass(frozen=True)
class Budget:
    """A time budget that started at `start` (unix seconds) and lasts `seconds`, paused while
    `paused()` grows: the seconds the run's model calls spent held back by rate limits in this
    phase (benchctl/limits, `pause_budget_on_rate_limit`). The deadline moves by that much, and
    the time used is the time since `start` minus it. The gateway's deadline is the same number
    (`Gateway.deadline`), so the agent's notices, the early-exit rule, the CLI's kill and the
    gateway's refusal all agree."""

    start: float
    seconds: float
    paused: Callable[[], float] | None = field(default=None, compare=False, repr=False)

    def pause_s(self) -> float:
        return max(0.0, self.paused()) if self.paused is not None else 0.0

    @property
    def deadline(self) -> float:
        return self.start + self.seconds + self.pause_s()

    def remaining(self, now: float) -> float:
        return max(0.0, self.deadline - now)

    def fraction_used(self, now: float) -> float:
        used = now - self.start - self.pause_s()
        return 1.0 if self.seconds <= 0 else min(1.0, max(0.0, used / self.seconds))

    def expired(self, now: float) -> bool:
        return now >= self.deadline


def time_notice(budget: Budget, now: float) -> str:
    """The text an agent sees after every tool call (with the pause, when rate limits added time)."""
    text = f"[benchctl] Time remaining: {format_duration(budget.remaining(now))} of {format_duration(budget.seconds)}"
    paused = budget.pause_s()
    if paused >= 1.0:
        text += f" (the clock was paused for {format_duration(paused)} while rate limits held your model calls back)"
    return text + "."


@dataclass(frozen=True)
class EarlyExitPolicy:
    """Continue an agent that stops before `fraction` of its budget, at most `max_reprompts` times."""

    fraction: float = 0.75
    max_reprompts: int = 3
    message: str = (
        "You still have {remaining} of your {budget} budget. Do not stop yet: keep "
        "investigating and improve your report. Stop only when the work is complete "
        "and you have used most of the time."
    )
    enabled: bool = True


def early_exit_reason(policy: EarlyExitPolicy, budget: Budget, now: float, reprompts_so_far: int) -> str | None:
    """The continuation message if the agent should be told to go on, else None."""
    if not policy.enabled or reprompts_so_far >= policy.max_reprompts:
        return None
    if budget.fraction_used(now) >= policy.fraction:
        return None
    return policy.message.format(
        remaining=format_duration(budget.remaining(now)), budget=format_duration(budget.seconds)
    )


_WORD = re.compile(r"\S+")


def word_count(text: str) -> int:
    """Whitespace-separated tokens, the way `wc -w` counts."""
    return len(_WORD.findall(text))


@dataclass(frozen=True)
class LengthPolicy:
    """Keep the file `file` (relative to the work dir) between min_words and max_words."""

    file: str = "report.md"
    min_words: int = 0
    max_words: int | None = None
    max_revisions: int = 1
    revise_message: str = (
        "{file} has {words} words, over the limit of {max_words}. Revise it to "
        "between {min_words} and {max_words} words, keeping the most important "
        "findings, then stop."
    )


def length_notice(policy: LengthPolicy, text: str) -> str:
    """Word-count feedback after each edit of the policy's file."""
    n = word_count(text)
    if n < policy.min_words:
        limit = "" if policy.max_words is None else f" (limit {policy.max_words})"
        return (
            f"[benchctl] {policy.file}: {n} words; {policy.min_words - n} more to reach the "
            f"minimum of {policy.min_words}{limit}."
        )
    if policy.max_words is None:
        return f"[benchctl] {policy.file}: {n} words."
    if n > policy.max_words:
        return f"[benchctl] {policy.file}: {n} words; {n - policy.max_words} over the limit of {policy.max_words}."
    return (
        f"[benchctl] {policy.file}: {n} words; within the window {policy.min_words}-{policy.max_words} "
        f"({policy.max_words - n} words left)."
    )


def length_revision_reason(policy: LengthPolicy, text: str | None, revisions_so_far: int) -> str | None:
    """On stop: ask for one revision if the file is over the limit."""
    if text is None or policy.max_words is None or revisions_so_far >= policy.max_revisions:
        return None
    n = word_count(text)
    if n <= policy.max_words:
        return None
    return policy.revise_message.format(
        file=policy.file, words=n, min_words=policy.min_words, max_words=policy.max_words
    )


@dataclass
class StopState:
    """Per-run counters the stop decision needs (kept by whoever asks)."""

    reprompts: int = 0
    revisions: int = 0


@dataclass(frozen=True)
class StopDecision:
    kind: str  # "reprompt" | "revision" | "stop"
    message: str | None = None


def stop_decision(
    budget: Budget,
    now: float,
    state: StopState,
    early: EarlyExitPolicy | None,
    length: LengthPolicy | None,
    report_text: str | None,
) -> StopDecision:
    """What to do when the agent tries to stop. Updates `state` counters when it says continue.

    Past the deadline the agent always stops. The early-exit rule comes first (a short run
    should keep working), then one revision request for an over-long report.
    """
    if budget.expired(now):
        return StopDecision("stop")
    if early is not None:
        reason = early_exit_reason(early, budget, now, state.reprompts)
        if reason:
            state.reprompts += 1
            return StopDecision("reprompt", reason)
    if length is not None:
        reason = length_revision_reason(length, report_text, state.revisions)
        if reason:
            state.revisions += 1
            return StopDecision("revision", reason)
    return StopDecision("stop")


@dataclass(frozen=True)
class RunPolicies:
    """The policies a run applies; built from the task file."""

    early_exit: EarlyExitPolicy | None = field(default_factory=EarlyExitPolicy)
    length: LengthPolicy | None = None
    notify_time: bool = True
