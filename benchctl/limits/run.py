"""One run's side of the limits: its waits, its budget pause, its spend and its stop.

`RunLimits` is created per run (benchctl/executors/run_body.py) and handed to the run's gateway,
whose upstreams ask the shared limiter through it (upstream.py). It:

- records every wait — for the limiter, or a 429/529 backoff — as a `rate_limit_wait` transcript
  event (reason, seconds) and sums them for meta.json `rate_limits`;
- keeps the **pause clock**: the wall time during which at least one of the run's calls was held
  back (overlapping waits count once). With `pause_budget_on_rate_limit` (default on) the run's
  deadline — the gateway's (`Gateway.deadline`) and the harness's `Budget` — moves by the pause
  of the current phase, so a slow provider does not shrink the agent's budget;
- counts the run's priced spend (a transcript listener over `model_call`, retried `refusal` and
  `target_call` costs) toward the run's cap (task `[limits] max_cost`) and the sweep's (charged
  to the limiter); when either is reached it requests a clean stop (`RunStop`): the gateway
  refuses new calls, calls in flight finish, the harness stops the agent, and the run ends
  `budget_exhausted`.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchctl.gateway.http_upstreams import UpstreamConfigError
from benchctl.limits import Grant, Limiter
from benchctl.limits.config import LimitsConfig
from benchctl.limits.headers import hold_until
from benchctl.limits.state import Exhausted

COST_NOTICE = (
    "[benchctl] The {cap} cost cap of ${max_cost:.2f} is reached (${spent:.2f} spent): this run stops "
    "now. Your files in /work are collected as they are."
)


class CallRefused(UpstreamConfigError):
    """A call the limits refuse to send (a cost cap is reached). Never sent, so never counted."""


@dataclass
class LimitsPlan:
    """What every run of a sweep gets (picklable with a Ray limiter: it travels to the nodes)."""

    limiter: Limiter
    config: LimitsConfig
    pause_budget: bool = True  # the task's pause_budget_on_rate_limit
    run_max_cost: float | None = None  # the task's [limits] max_cost
    scope: str = "sweep"  # what the shared cap (config.max_cost) belongs to: sweep | gateway
    # (`benchctl gateway --max-cost`: one gateway, no sweep)


def event_cost(ev: dict[str, Any]) -> float:
    """The priced USD a transcript event adds to a run's spend (0 when none or unknown).

    Each generation call has one `model_call`; an answer held back by the refusal-retry policy
    has its cost on its `refusal` event (action "retry"); target and auxiliary calls of audits
    are `target_call`s. An unknown cost (null) adds 0: it is a call cut off before its usage came."""
    t = ev.get("type")
    if t == "model_call" or t == "target_call" or (t == "refusal" and ev.get("action") == "retry"):
        c = ev.get("cost_usd")
        if isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0:
            return float(c)
    return 0.0


class PauseClock:
    """Wall time during which at least one waiter was waiting (overlapping waits count once)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._waiting = 0
        self._since = 0.0
        self._total = 0.0

    def begin(self, at: float | None = None) -> None:
        with self._lock:
            if self._waiting == 0:
                self._since = self.clock() if at is None else at
            self._waiting += 1

    def end(self) -> None:
        with self._lock:
            self._waiting -= 1
            if self._waiting == 0:
                self._total += max(0.0, self.clock() - self._since)

    def total(self) -> float:
        with self._lock:
            return self._total + (max(0.0, self.clock() - self._since) if self._waiting else 0.0)


class RunStop:
    """A request to stop a run cleanly because a cost cap is reached (outcome `budget_exhausted`).

    `settled()`: requested, and none of the run's calls is in flight any more (the gateway
    refuses new ones), so an agent CLI can be ended without cutting a call off."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.reason: str | None = None
        self.info: dict[str, Any] = {}
        self.busy: Callable[[], int] = lambda: 0

    def request(self, reason: str, **info: Any) -> bool:
        """True the first time (the first reason wins)."""
        with self._lock:
            if self._event.is_set():
                return False
            self.reason, self.info = reason, dict(info)
            self._event.set()
            return True

    def is_set(self) -> bool:
        return self._event.is_set()

    def settled(self) -> bool:
        return self._event.is_set() and self.busy() == 0


class RunLimits:
    def __init__(
        self,
        plan: LimitsPlan | None,
        transcript: Any,
        holder: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if plan is None:  # a gateway of its own (standalone, tests): a private limiter, no caps
            from benchctl.limits.local import LocalLimiter

            plan = LimitsPlan(LocalLimiter(), LimitsConfig())
        self.limiter = plan.limiter
        self.config = plan.config
        self.pause_budget = plan.pause_budget
        self.run_max_cost = plan.run_max_cost
        self.scope = plan.scope
        self.transcript = transcript
        self.holder = holder or uuid.uuid4().hex
        self.clock = clock
        self.stop = RunStop()
        self.stop.busy = lambda: self._active
        # calls are followed to their end when a limit needs it, or a cost cap (for a clean stop)
        self.track_calls = self.config.max_cost is not None or self.run_max_cost is not None
        self._pause = PauseClock(clock)
        self._phase_mark = 0.0
        self._lock = threading.Lock()
        self._active = 0
        self._waits = 0
        self._wait_s = 0.0
        self._by_reason: dict[str, dict[str, float]] = {}
        self.spent = 0.0

    # ---- budget ------------------------------------------------------------------------------

    def new_phase(self) -> None:
        """A new deadline was set (the run, a follow-up): its pause starts from zero."""
        self._phase_mark = self._pause.total()

    def extension(self) -> float:
        """Seconds the current phase's deadline has moved (0 when pausing is off)."""
        return max(0.0, self._pause.total() - self._phase_mark) if self.pause_budget else 0.0

    def paused_s(self) -> float:
        return self._pause.total()

    # ---- calls (used by upstream.LimitedUpstream and the retry layer) ---------------------------

    async def acquire(self, keys: tuple[str, ...], model: str, call_id: str | None) -> Grant:
        if self.stop.is_set():
            raise CallRefused(f"benchctl: {self.stop.reason}; the run is stopping")
        t0 = self.clock()
        waiting = False

        def on_wait() -> None:
            nonlocal waiting
            if not waiting:
                waiting = True
                self._pause.begin(at=t0)

        try:
            grant = await self.limiter.acquire(keys, self.holder, on_wait)
        except Exhausted:
            self._sweep_cap_reached()
            raise CallRefused(f"benchctl: {self.stop.reason}; the run is stopping") from None
        finally:
            if waiting:
                self._pause.end()
        if grant.reason is not None:
            self._record(grant.reason, self.clock() - t0, model, call_id, keys=list(keys))
        if self.stop.is_set():  # a cap was reached while this call waited
            self.limiter.release(grant.permit, 0)
            raise CallRefused(f"benchctl: {self.stop.reason}; the run is stopping")
        if self.track_calls or grant.tracked:
            with self._lock:
                self._active += 1
        return grant

    def finished(self, grant: Grant, tokens: int) -> None:
        """A call granted by `acquire` ended (its body read, or it failed)."""
        self.limiter.release(grant.permit, tokens)
        if self.track_calls or grant.tracked:
            with self._lock:
                self._active = max(0, self._active - 1)

    def follows(self, grant: Grant) -> bool:
        """Whether this call must be followed to the end of its body."""
        return self.track_calls or grant.tracked

    def observe(self, keys: tuple[str, ...], status: int, headers: dict[str, str]) -> None:
        """A response head arrived: a 429's retry-after or a spent rate-limit header holds the model's key."""
        held = hold_until(status, headers, self.clock())  # a few dict lookups when nothing is spent
        if held is not None:
            self.limiter.hold(keys[-1], held[0], held[1])

    # retry layer (benchctl/gateway/retry.py): a backoff after a 429 / 529 is a rate-limit wait too
    def pauses_backoff(self) -> bool:
        return self.pause_budget

    async def backoff(
        self, seconds: float, status: int | None, retry_after: bool, model: str, call_id: str | None
    ) -> None:
        self._pause.begin()
        t0 = self.clock()
        try:
            await asyncio.sleep(seconds)
        finally:
            self._pause.end()
            self._record("retry_after" if retry_after else "backoff", self.clock() - t0, model, call_id, status=status)

    def _record(self, reason: str, seconds: float, model: str, call_id: str | None, **extra: Any) -> None:
        seconds = max(0.0, seconds)
        with self._lock:
            self._waits += 1
            self._wait_s += seconds
            r = self._by_reason.setdefault(reason, {"waits": 0, "wait_s": 0.0})
            r["waits"] += 1
            r["wait_s"] += seconds
        fields = {"call_id": call_id} if call_id else {}
        self.transcript.emit(
            "rate_limit_wait",
            "gateway",
            **fields,
            model=model,
            reason=reason,
            wait_s=round(seconds, 3),
            paused=self.pause_budget,
            **extra,
        )

    # ---- money -------------------------------------------------------------------------------

    def on_event(self, ev: dict[str, Any]) -> None:
        """Transcript listener: every priced event adds to the run's and the sweep's spend."""
        cost = event_cost(ev)
        if cost <= 0:
            return
        with self._lock:
            self.spent += cost
            spent = self.spent
        sweep_reached = self.limiter.charge(cost)
        if self.run_max_cost is not None and spent >= self.run_max_cost:
            self._request_stop("run", self.run_max_cost, spent)
        elif sweep_reached:
            self._sweep_cap_reached()

    def _sweep_cap_reached(self) -> None:
        if self.config.max_cost is not None:
            self._request_stop(self.scope, self.config.max_cost, self.limiter.spent())

    def _request_stop(self, cap: str, max_cost: float, spent: float) -> None:
        """`cap`: run, or the shared cap's scope (sweep | gateway)."""
        text = COST_NOTICE.format(cap=f"{cap}'s", max_cost=max_cost, spent=spent)
        reason = f"the {cap}'s cost cap of ${max_cost:.2f} is reached"
        if self.stop.request(reason, cap=cap, max_cost_usd=max_cost, spent_usd=round(spent, 6), notice=text):
            self.transcript.emit(
                "notice",
                "policy",
                kind="cost_cap",
                text=text,
                cap=cap,
                max_cost_usd=max_cost,
                spent_usd=round(spent, 6),
            )

    # ---- end ---------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """meta.json `rate_limits`."""
        with self._lock:
            paused = self._pause.total()
            return {
                "pause_budget": self.pause_budget,
                "waits": self._waits,
                "wait_s": round(self._wait_s, 3),
                "paused_s": round(paused, 3),
                "budget_extended_s": round(paused if self.pause_budget else 0.0, 3),
                "by_reason": {
                    k: {"waits": int(v["waits"]), "wait_s": round(v["wait_s"], 3)} for k, v in self._by_reason.items()
                },
            }

    def close(self) -> None:
        """The run ended: whatever it still holds goes back to the shared limiter."""
        try:
            self.limiter.release_holder(self.holder)
        except Exception:
            pass
