"""What one HTTP exchange (exchange.py) may use of the gateway that accepted its connection.

`server.Gateway` is the one implementation. exchange.py is typed against this protocol instead of
importing server.py, which imports exchange.py for `handle_connection`: so the two do not import
each other. A member exchange.py starts to use is added here (tests/gates/test_import_cycles.py checks
that every `gw.<name>` in exchange.py is declared here and that Gateway has all of them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from benchctl.gateway.body_limits import BodyBudget, BodyLimits
from benchctl.gateway.fallback import ModelRouter
from benchctl.gateway.pricing import PriceTable
from benchctl.gateway.recording import RequestRecorder
from benchctl.gateway.upstream import ModelId, Upstream
from benchctl.transcript import Redactor, TranscriptWriter

# an extra route's handler: (method, path, body) -> (status, headers, body), run in a worker thread
RouteHandler = Callable[[str, str, bytes], "tuple[int, dict[str, str], bytes]"]


class CallObserver(Protocol):
    """Told what the gateway itself sees of every generation call it forwards, for host-side checks
    that must not trust the sandbox (harnesses/hooks/ledger.py). Called on the gateway's event loop:
    be quick, and lock what another thread reads."""

    def request(self, headers: dict[str, str], wire_api: str, body: dict[str, Any]) -> None:
        """A request is about to be forwarded (before any answer)."""

    def response(self, headers: dict[str, str], wire_api: str, tool_call_ids: list[str], outcome: str) -> None:
        """Its answer was recorded (before the client has its last byte): the tool calls it asked for
        (when the outcome is `ok`) and how it ended."""


class ExchangeSettings(Protocol):
    other_model_policy: str  # serve | reject: a request naming another model than the run's


@runtime_checkable
class GatewayContext(Protocol):
    @property
    def config(self) -> ExchangeSettings: ...  # read-only here, so the Gateway's own config type fits

    router: ModelRouter
    prices: PriceTable
    transcript: TranscriptWriter
    recorder: RequestRecorder
    redact: Redactor  # host secrets, scrubbed from what clients get
    routes: list[tuple[str, RouteHandler]]  # extra routes, longest prefix first
    last_headers: dict[str, dict[str, str]]  # wire api -> pass-through headers last recorded
    body_limits: BodyLimits  # per-request and per-gateway body caps
    body_budget: BodyBudget  # bytes of request bodies held right now
    observers: list[CallObserver]  # host-side checks told of every call (hooks ledger)
    limits: Any  # the run's benchctl.limits.run.RunLimits (limiter, cost stop)
    phase: int  # +1 at each set_deadline: the run, then each follow-up
    forwarding: set[Any]  # exchanges with a call in flight, until recorded (deadline cut, settle)

    @property
    def deadline(self) -> float | None: ...  # unix seconds, None: no deadline

    def upstream_for(self, model: ModelId) -> Upstream: ...

    def next_call_id(self) -> str: ...

    def account(
        self,
        served: str,
        usage: dict[str, int],
        cost: float | None,
        refusal: bool,
        error: bool,
        counted: bool,
        requested: str | None = None,
    ) -> None: ...

    def track(self, task: asyncio.Task[None]) -> None: ...

    def observe(self, method: str, *args: Any) -> None: ...  # call every observer's `method`

    def open_connection(self) -> bool: ...  # False: too many connections already

    def close_connection(self) -> None: ...

    def refused(self, status: int | str, why: str) -> bool: ...  # count a refusal; True: record it too
