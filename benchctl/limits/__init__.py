"""Limits: the provider's rate limits and the researcher's money, shared by every run of a sweep.

The **Limiter** seam sits beside the gateway and answers one question per upstream request:
"may this call go now?" — yes, after a wait (a connection slot, a rate bucket, a 429's
retry-after held for the whole key), or no (the sweep's cost cap is spent).

- `local.LocalLimiter`: in-process, one per `benchctl run` on one machine, shared by the
  gateways of all its runs (each on its own thread and event loop).
- `ray_limiter.RayLimiter`: the same limiter inside one named Ray actor, when runs span the
  nodes of a Ray cluster; every node's gateways ask it, so every run on one key shares one limit.

Around it:
- `config`       the sweep's `[limits]` / `--max-connections` / `--max-cost` / `--allow-unpriced`
                 (the flags, shared by run, gateway and grade: benchctl/commands/limit_options.py);
- `state`        the bookkeeping (keys, buckets, holds, spend), pure;
- `headers`      retry-after and the providers' rate-limit headers;
- `upstream`     `LimitedUpstream`: asks the limiter before each attempt, releases after its body;
- `run`          `RunLimits`: one run's view — its waits (transcript `rate_limit_wait`, meta.json
                 `rate_limits`), the budget pause, its cost cap and its `RunStop`;
- `spend`        the priced spend of a results directory on disk (resume continues the count).

`benchctl gateway` gets a LocalLimiter of its own with the same flags (cost cap scope `gateway`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Grant:
    """A call may go: what it holds (release it when the call ends), and how long it waited."""

    permit: Any  # the limiter's handle for `release` (None when nothing needs releasing)
    waited_s: float = 0.0
    reason: str | None = None  # why it waited: max_connections | requests_per_minute | tokens_per_minute
    # | retry_after | rate_limit_headers (None: it did not wait)
    tracked: bool = False  # it holds a connection slot or owes tokens: release it when the call's body ends


class Limiter(Protocol):
    """Shared by every run of a sweep. Methods other than `acquire` never block for long."""

    async def acquire(self, keys: tuple[str, ...], holder: str, on_wait: Callable[[], None] | None = None) -> Grant:
        """Wait until a call on these limit keys may go. Raises state.Exhausted once the sweep's
        cost cap is reached. `holder` names the run (its permits are freed with it); `on_wait` is
        called once, as soon as the call has to wait (the run's budget pause starts then)."""
        ...

    def release(self, permit: Any, tokens: int = 0) -> None:
        """The call ended: free its slot; `tokens` (its usage) are charged to token limits."""
        ...

    def hold(self, key: str, until: float, reason: str) -> None:
        """Hold every call on `key` until `until` (unix seconds): a 429's retry-after, a spent header."""
        ...

    def charge(self, usd: float) -> bool:
        """Add priced spend; True when the sweep's cost cap is reached."""
        ...

    def exhausted(self) -> bool: ...

    def spent(self) -> float: ...

    def release_holder(self, holder: str) -> None:
        """A run ended: free whatever it still holds."""
        ...
