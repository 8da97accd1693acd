"""The bookkeeping behind a limiter, with no threads, loops or clock of its own (callers pass `now`).

Per limit key: calls in flight (`max_connections`), a request bucket (`requests_per_minute`), a
token bucket (`tokens_per_minute`) and a hold (until a 429's retry-after or a rate-limit header's
reset has passed). A call waits as a ticket; `grant_ready` grants, in arrival order, every
waiting ticket whose keys all have room now — a ticket held back by its model's own limit does
not hold up calls of other models on the same provider. Sweep spend: `charge` adds priced USD;
at `max_cost` the limiter is exhausted and grants no more calls.

Buckets hold up to one minute's allowance and refill continuously. A request costs one request
at its start; a call's tokens are charged when its usage is known (at its end), so the token
limit holds on average: a call may start while the key's token bucket is not overdrawn, and the
burst is bounded by `max_connections` (and by the provider's own headers, see headers.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from benchctl.limits.config import LimitsConfig, ProviderLimit


@dataclass
class Permit:
    """A granted call: what it holds until `release`."""

    id: int
    keys: tuple[str, ...]
    holder: str
    tracked: bool  # holds a connection slot or owes tokens: must be released


@dataclass
class Ticket:
    id: int
    keys: tuple[str, ...]
    holder: str
    since: float
    reason: str | None = None  # why it waited (first reason seen)


@dataclass
class _Bucket:
    rate: float  # units per second
    capacity: float
    level: float
    t: float

    def refill(self, now: float) -> float:
        if now > self.t:
            self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
            self.t = now
        return self.level


@dataclass
class _Key:
    limit: ProviderLimit
    in_flight: int = 0
    requests: _Bucket | None = None
    tokens: _Bucket | None = None
    hold_until: float = 0.0
    hold_reason: str = ""
    stats: dict[str, float] = field(default_factory=lambda: {"granted": 0, "max_in_flight": 0})


class Exhausted(Exception):
    """The sweep's cost cap is reached: no more calls."""


class LimitState:
    def __init__(self, config: LimitsConfig | None = None, spent: float = 0.0) -> None:
        self.config = config or LimitsConfig()
        self.spent = float(spent)
        self._keys: dict[str, _Key] = {}
        self._waiting: dict[int, Ticket] = {}  # arrival order (dicts keep insertion order)
        self._permits: dict[int, Permit] = {}
        self._ids = itertools.count(1)

    # ---- money -------------------------------------------------------------------------------

    def charge(self, usd: float) -> bool:
        """Add priced spend; True when the sweep's cap is (now) reached."""
        if usd > 0:
            self.spent += usd
        return self.exhausted()

    def exhausted(self) -> bool:
        return self.config.max_cost is not None and self.spent >= self.config.max_cost

    # ---- keys --------------------------------------------------------------------------------

    def key(self, name: str, now: float) -> _Key:
        k = self._keys.get(name)
        if k is None:
            lim = self.config.limit_for(name)
            k = self._keys[name] = _Key(lim)
            if lim.requests_per_minute:
                k.requests = _Bucket(
                    lim.requests_per_minute / 60.0, lim.requests_per_minute, lim.requests_per_minute, now
                )
            if lim.tokens_per_minute:
                k.tokens = _Bucket(lim.tokens_per_minute / 60.0, lim.tokens_per_minute, lim.tokens_per_minute, now)
        return k

    def hold(self, name: str, until: float, reason: str, now: float) -> None:
        """Hold every call on this key until `until` (a 429's retry-after, a spent rate-limit header)."""
        k = self.key(name, now)
        if until > k.hold_until:
            k.hold_until, k.hold_reason = until, reason

    def _blocked(self, k: _Key, now: float) -> tuple[str, float | None] | None:
        """(reason, seconds until it may clear or None = until a release) when the key has no room now."""
        if k.hold_until > now:
            return k.hold_reason or "retry_after", k.hold_until - now
        lim = k.limit
        if lim.max_connections is not None and k.in_flight >= lim.max_connections:
            return "max_connections", None
        if k.requests is not None and k.requests.refill(now) < 1.0:
            return "requests_per_minute", (1.0 - k.requests.level) / k.requests.rate
        if k.tokens is not None and k.tokens.refill(now) <= 0.0:
            return "tokens_per_minute", (1e-6 - k.tokens.level) / k.tokens.rate
        return None

    # ---- tickets and permits ---------------------------------------------------------------------

    def enqueue(self, keys: tuple[str, ...], holder: str, now: float) -> Ticket:
        t = Ticket(next(self._ids), tuple(keys), holder, now)
        self._waiting[t.id] = t
        return t

    def drop(self, ticket_id: int) -> None:
        self._waiting.pop(ticket_id, None)

    def grant_ready(self, now: float) -> list[tuple[Ticket, Permit | Exhausted]]:
        """Grant, in arrival order, every waiting ticket that may go now (or refuse them all when the
        sweep's money is spent); the others note why they wait."""
        out: list[tuple[Ticket, Permit | Exhausted]] = []
        if self.exhausted():
            for t in list(self._waiting.values()):
                out.append((t, Exhausted()))
            self._waiting.clear()
            return out
        for t in list(self._waiting.values()):
            blocked = None
            for name in t.keys:
                blocked = self._blocked(self.key(name, now), now)
                if blocked:
                    break
            if blocked:
                t.reason = t.reason or blocked[0]
                continue
            del self._waiting[t.id]
            out.append((t, self._grant(t, now)))
        return out

    def grant_now(self, keys: tuple[str, ...], holder: str, now: float) -> Permit | None:
        """The fast path: a permit at once when nobody waits and every key has room, else None
        (then the caller waits as a ticket). Raises Exhausted when the sweep's money is spent."""
        if self.exhausted():
            raise Exhausted()
        if self._waiting:
            return None
        for name in keys:
            if self._blocked(self.key(name, now), now):
                return None
        return self._grant(Ticket(next(self._ids), tuple(keys), holder, now), now)

    def _grant(self, t: Ticket, now: float) -> Permit:
        keys = [self.key(name, now) for name in t.keys]
        # Only a permit that holds a connection slot or owes tokens is kept (and must be released):
        # a call on keys without such limits costs the limiter nothing after its start.
        tracked = any(k.limit.max_connections is not None or k.tokens is not None for k in keys)
        for k in keys:
            k.stats["granted"] += 1
            if k.requests is not None:
                k.requests.level -= 1.0
            if tracked:
                k.in_flight += 1
                k.stats["max_in_flight"] = max(k.stats["max_in_flight"], k.in_flight)
        p = Permit(t.id, t.keys, t.holder, tracked)
        if tracked:
            self._permits[p.id] = p
        return p

    def wait_hint(self, ticket_id: int, now: float) -> float | None:
        """Seconds until this waiting ticket could clear by the clock alone (a hold or a bucket), or
        None when only a release (or a grant ahead of it) can let it go."""
        t = self._waiting.get(ticket_id)
        if t is None:
            return 0.0
        hints = [b[1] for name in t.keys if (b := self._blocked(self.key(name, now), now)) and b[1] is not None]
        return max(hints) if hints else None

    def release(self, permit_id: int, tokens: int, now: float) -> bool:
        """The call ended: free its slot and charge its tokens. False when it was already released."""
        p = self._permits.pop(permit_id, None)
        if p is None:
            return False
        for name in p.keys:
            k = self.key(name, now)
            k.in_flight = max(0, k.in_flight - 1)
            if k.tokens is not None and tokens > 0:
                k.tokens.refill(now)
                k.tokens.level -= tokens
        return True

    def release_holder(self, holder: str, now: float) -> int:
        """Free every permit and ticket of one holder (a run that ended, or whose node died)."""
        ids = [pid for pid, p in self._permits.items() if p.holder == holder]
        for pid in ids:
            self.release(pid, 0, now)
        for tid in [tid for tid, t in self._waiting.items() if t.holder == holder]:
            del self._waiting[tid]
        return len(ids)

    def in_flight(self, name: str) -> int:
        k = self._keys.get(name)
        return k.in_flight if k else 0

    def stats(self) -> dict[str, dict[str, float]]:
        return {name: {**k.stats, "in_flight": k.in_flight} for name, k in self._keys.items()}
