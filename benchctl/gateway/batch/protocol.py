"""The batch seam's types (re-exported by benchctl.gateway.batch, whose docstring describes them):
here, below the package and its clients, so each client can import them without a circle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from benchctl.gateway.upstream import ModelId

BatchState = Literal["in_progress", "ended", "expired", "cancelled", "failed"]
EXPIRED = "expired"  # BatchOutcome.error of a request the batch's window ran out on
CANCELLED = "cancelled"  # ... of a request the batch was cancelled before running


class BatchUnsupported(Exception):
    """The model's provider has no batch API benchctl speaks (openai-compatible servers, scripted models)."""


@dataclass(frozen=True)
class BatchItem:
    """One request of a batch: `body` as the synchronous call would send it (model field included)."""

    custom_id: str  # stable across processes (a hash of model + body): a rerun finds its answer by it
    body: dict[str, Any]


@dataclass(frozen=True)
class BatchStatus:
    state: BatchState  # "ended": every request has an outcome; "expired"/"cancelled": some may not
    done: int  # requests with an outcome (succeeded or not)
    total: int


@dataclass(frozen=True)
class BatchOutcome:
    """One request's outcome. `body` is the response JSON in the wire API's own shape (read with
    `benchctl.gateway.wire.wire(api).summarize` like a synchronous answer) when it succeeded; otherwise
    `error` says why (errored with the vendor's message, expired, cancelled) and the item is retried
    individually on the next run."""

    custom_id: str
    body: dict[str, Any] | None
    error: str | None


class BatchClient(Protocol):
    async def submit(self, model: ModelId, items: Sequence[BatchItem]) -> str:
        """Create a batch of `items` for `model`; its id (written to batches.json before waiting)."""
        ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, batch_id: str) -> list[BatchOutcome]:
        """Every request's outcome once the batch has ended (or expired / was cancelled: those not
        processed come back with an error)."""
        ...

    async def cancel(self, batch_id: str) -> None: ...
