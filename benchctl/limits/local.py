"""The in-process limiter: one per `benchctl run` on one machine, shared by every run's gateway.

Each run's gateway serves from its own thread and event loop, so the limiter cannot use one
loop's primitives: its state (state.py) sits behind a threading lock, and a waiting call is a
future on its own loop, resolved from whichever thread freed the room (`call_soon_threadsafe`).
A wait that only the clock can end (a hold, a bucket refilling) wakes itself at the right time.
The Ray limiter (ray_limiter.py) runs this same class inside one actor.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from benchctl.limits import Grant
from benchctl.limits.config import LimitsConfig
from benchctl.limits.state import Exhausted, LimitState, Permit, Ticket

MAX_NAP_S = 1.0  # a waiter re-checks at least this often (a missed wake-up costs at most this)


class LocalLimiter:
    def __init__(
        self, config: LimitsConfig | None = None, spent: float = 0.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config or LimitsConfig()
        self.clock = clock
        self._state = LimitState(self.config, spent)
        self._lock = threading.Lock()
        self._waiters: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}

    # ---- the seam --------------------------------------------------------------------------

    async def acquire(self, keys: tuple[str, ...], holder: str, on_wait: Callable[[], None] | None = None) -> Grant:
        """Wait until a call on `keys` may go; raises Exhausted when the sweep's money is spent."""
        now = self.clock()
        with self._lock:
            permit = self._state.grant_now(keys, holder, now)  # the common case: room at once, no wait
            if permit is not None:
                return Grant(permit, 0.0, None, tracked=permit.tracked)
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[Any] = loop.create_future()
            ticket = self._state.enqueue(keys, holder, now)
            self._waiters[ticket.id] = (loop, fut)
            self._pump(now)
        if fut.done():  # room after all (the clock moved on)
            return self._grant(fut, ticket, now)
        if on_wait is not None:
            on_wait()
        try:
            while not fut.done():
                with self._lock:
                    hint = self._state.wait_hint(ticket.id, self.clock())
                nap = MAX_NAP_S if hint is None else min(MAX_NAP_S, max(hint, 0.001))
                await asyncio.wait({fut}, timeout=nap)
                if not fut.done():
                    with self._lock:
                        self._pump(self.clock())
        except BaseException:  # cancelled while waiting (client gone, run stopping)
            with self._lock:
                self._waiters.pop(ticket.id, None)
                self._state.drop(ticket.id)
                now = self.clock()
                # granted just as we were cancelled (its result may still be on its way to `fut`):
                # a permit's id is its ticket's, so give the room back by that id
                if self._state.release(ticket.id, 0, now):
                    self._pump(now)
            raise
        return self._grant(fut, ticket, now)

    def release(self, permit: Permit | None, tokens: int = 0) -> None:
        if permit is None or not permit.tracked:
            return
        with self._lock:
            now = self.clock()
            if self._state.release(permit.id, tokens, now):
                self._pump(now)

    def hold(self, key: str, until: float, reason: str) -> None:
        with self._lock:
            self._state.hold(key, until, reason, self.clock())

    def charge(self, usd: float) -> bool:
        with self._lock:
            reached = self._state.charge(usd)
            if reached:
                self._pump(self.clock())  # waiting calls are refused now
            return reached

    def exhausted(self) -> bool:
        with self._lock:
            return self._state.exhausted()

    def spent(self) -> float:
        with self._lock:
            return self._state.spent

    def release_holder(self, holder: str) -> None:
        with self._lock:
            now = self.clock()
            if self._state.release_holder(holder, now):
                self._pump(now)

    def stats(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return self._state.stats()

    # ---- inside the lock -------------------------------------------------------------------

    def _pump(self, now: float) -> None:
        for ticket, result in self._state.grant_ready(now):
            waiter = self._waiters.pop(ticket.id, None)
            if waiter is None:  # its caller is gone: give the room back at once
                if isinstance(result, Permit):
                    self._state.release(result.id, 0, now)
                continue
            loop, fut = waiter
            value = (ticket, result)
            try:
                if loop is _running_loop():
                    _settle(fut, value)
                else:
                    loop.call_soon_threadsafe(_settle, fut, value)
            except RuntimeError:  # that loop has closed: its run is over
                if isinstance(result, Permit):
                    self._state.release(result.id, 0, now)

    def _grant(self, fut: asyncio.Future[Any], ticket: Ticket, t0: float) -> Grant:
        t, result = fut.result()
        if isinstance(result, Exhausted):
            raise result
        waited = max(0.0, self.clock() - t0) if t.reason else 0.0
        return Grant(result, waited, t.reason, tracked=result.tracked)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _settle(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)
