"""The limiter when runs span a Ray cluster: one named actor that every node's gateways ask.

The driver (`RayExecutor.limiter`) starts `LimiterActor` — an async actor holding the same
`LocalLimiter` a single machine uses — and hands each run a `RayLimiter`: a small picklable
client holding the actor's handle, which travels to the node with the run. There each call's
`acquire` is one round trip (the actor answers when the call may go); a release, a hold and
a charge are sent without waiting.

A node can die with permits in hand, so permits are leases: every process using the client
renews its runs' holders every RENEW_S (and learns whether the sweep's money is spent), and
the actor frees the permits of a holder it has not heard from for LEASE_S. Nothing here
imports ray at module level.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchctl.limits import Grant
from benchctl.limits.config import LimitsConfig
from benchctl.limits.state import Exhausted, Permit

ACTOR_PREFIX = "benchctl-limiter-"
RENEW_S = 2.0  # clients renew their holders (and learn about the cost cap) this often
LEASE_S = 30.0  # a holder unheard of for this long has its permits freed (its node died)
WAIT_NOTICE_S = 0.25  # an acquire unanswered for this long counts as a wait (the budget pause starts then,
# dated back to the call's start)


class LimiterActor:
    """Runs as `ray.remote(LimiterActor)` (async methods: many calls wait at once on one loop)."""

    def __init__(self, config: LimitsConfig, spent: float, lease_s: float = LEASE_S) -> None:
        from benchctl.limits.local import LocalLimiter

        self.limiter = LocalLimiter(config, spent)
        self.lease_s = lease_s
        self._acquiring: dict[str, asyncio.Task[Any]] = {}  # client ticket -> its acquire
        self._granted: dict[str, Permit] = {}  # client ticket -> permit (tracked ones)
        self._seen: dict[str, float] = {}  # holder -> last heard of
        self._reaper: asyncio.Task[None] | None = None

    async def acquire(self, keys: list[str], holder: str, ticket: str) -> tuple[Any, ...]:
        self._seen[holder] = time.monotonic()
        if self._reaper is None:
            self._reaper = asyncio.ensure_future(self._reap())
        task = asyncio.current_task()
        if task is not None:
            self._acquiring[ticket] = task
        try:
            grant = await self.limiter.acquire(tuple(keys), holder)
        except Exhausted:
            return ("exhausted",)
        except asyncio.CancelledError:
            return ("cancelled",)
        finally:
            self._acquiring.pop(ticket, None)
        if grant.tracked:
            self._granted[ticket] = grant.permit
        return ("granted", grant.tracked, grant.waited_s, grant.reason)

    def cancel(self, ticket: str) -> None:
        """The client gave up on this call: stop its wait, or free what it was granted."""
        task = self._acquiring.get(ticket)
        if task is not None:
            task.cancel()
        else:
            self.release(ticket, 0)

    def release(self, ticket: str, tokens: int) -> None:
        permit = self._granted.pop(ticket, None)
        if permit is not None:
            self.limiter.release(permit, tokens)

    def hold_for(self, key: str, seconds: float, reason: str) -> None:
        self.limiter.hold(key, time.time() + max(0.0, seconds), reason)  # the actor's clock, not the node's

    def charge(self, usd: float) -> bool:
        return self.limiter.charge(usd)

    def renew(self, holders: list[str]) -> bool:
        now = time.monotonic()
        for h in holders:
            self._seen[h] = now
        return self.limiter.exhausted()

    def release_holder(self, holder: str) -> None:
        self._seen.pop(holder, None)
        self._drop_holder(holder)

    def exhausted(self) -> bool:
        return self.limiter.exhausted()

    def spent(self) -> float:
        return self.limiter.spent()

    def stats(self) -> dict[str, dict[str, float]]:
        return self.limiter.stats()

    def _drop_holder(self, holder: str) -> None:
        for ticket in [t for t, p in self._granted.items() if p.holder == holder]:
            del self._granted[ticket]
        self.limiter.release_holder(holder)

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(RENEW_S, self.lease_s / 2))
            cutoff = time.monotonic() - self.lease_s
            for holder in [h for h, t in self._seen.items() if t < cutoff]:
                del self._seen[holder]
                self._drop_holder(holder)


class RayLimiter:
    """The Limiter seam for a run on a Ray node (or the driver): a client of the sweep's actor."""

    def __init__(self, actor: Any, name: str) -> None:
        self.actor = actor
        self.name = name
        self._init_local()

    def _init_local(self) -> None:
        self._lock = threading.Lock()
        self._holders: set[str] = set()
        self._exhausted = False
        self._renewer: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"actor": self.actor, "name": self.name}  # threads and locks stay in their process

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.actor, self.name = state["actor"], state["name"]
        self._init_local()

    # ---- the seam --------------------------------------------------------------------------

    async def acquire(self, keys: tuple[str, ...], holder: str, on_wait: Callable[[], None] | None = None) -> Grant:
        self._keep_alive(holder)
        ticket = uuid.uuid4().hex
        pending = asyncio.ensure_future(_awaited(self.actor.acquire.remote(list(keys), holder, ticket)))
        try:
            done, _ = await asyncio.wait({pending}, timeout=WAIT_NOTICE_S)
            if not done and on_wait is not None:
                on_wait()
            result = await pending
        except BaseException:
            pending.cancel()
            self.actor.cancel.remote(ticket)
            raise
        if result[0] == "exhausted":
            self._exhausted = True
            raise Exhausted()
        if result[0] != "granted":
            raise asyncio.CancelledError()
        _, tracked, waited, reason = result
        return Grant(ticket if tracked else None, float(waited), reason, tracked=bool(tracked))

    def release(self, permit: Any, tokens: int = 0) -> None:
        if permit is not None:
            self.actor.release.remote(permit, int(tokens))

    def hold(self, key: str, until: float, reason: str) -> None:
        self.actor.hold_for.remote(key, until - time.time(), reason)

    def charge(self, usd: float) -> bool:
        if usd > 0:
            self.actor.charge.remote(float(usd))
        return self._exhausted  # what the actor last said; renewals keep it fresh

    def exhausted(self) -> bool:
        import ray

        self._exhausted = bool(ray.get(self.actor.exhausted.remote()))
        return self._exhausted

    def spent(self) -> float:
        import ray

        return float(ray.get(self.actor.spent.remote()))

    def release_holder(self, holder: str) -> None:
        with self._lock:
            self._holders.discard(holder)
        self.actor.release_holder.remote(holder)

    def stats(self) -> dict[str, dict[str, float]]:
        import ray

        return ray.get(self.actor.stats.remote())

    # ---- leases ----------------------------------------------------------------------------

    def _keep_alive(self, holder: str) -> None:
        with self._lock:
            self._holders.add(holder)
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew_loop, name="benchctl-limiter-lease", daemon=True)
                self._renewer.start()

    def _renew_loop(self) -> None:
        import ray

        while True:
            time.sleep(RENEW_S)
            with self._lock:
                holders = list(self._holders)
                if not holders:  # no run of this process holds anything: the next acquire starts a new one
                    self._renewer = None
                    return
            try:
                self._exhausted = bool(ray.get(self.actor.renew.remote(holders), timeout=30))
            except Exception:
                pass  # the driver (and its actor) may be gone: the run is being torn down anyway


async def _awaited(ref: Any) -> Any:
    return await ref


HEAD_NODE = "node:__internal_head__"  # the resource only the head node has (Ray Train's state actor uses it too)


def start_actor(ray: Any, config: LimitsConfig, spent: float) -> RayLimiter:
    """The driver's side: one named limiter actor for this sweep, on the head node — a worker node
    that dies must not take the sweep's limits and spend count with it; without its head the
    cluster is gone anyway. It ends with the driver."""
    name = f"{ACTOR_PREFIX}{uuid.uuid4().hex[:12]}"
    actor = (
        ray.remote(LimiterActor)
        .options(name=name, num_cpus=0, max_concurrency=10_000, max_restarts=0, resources={HEAD_NODE: 0.001})
        .remote(config, spent)
    )
    return RayLimiter(actor, name)
