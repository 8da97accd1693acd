"""The vendors' batch APIs, for judge calls that can wait (`benchctl grade --batch`, `scan --batch`,
`targets validate --batch`): one module per wire API, each a `BatchClient`.

- `anthropic.py`: Anthropic Message Batches (`POST /v1/messages/batches`, poll, JSONL results).
- `openai.py`: the OpenAI Batch API (a JSONL input file, `POST /v1/batches`, output / error files).
- `gemini.py`: Gemini batch mode (`models/{model}:batchGenerateContent`, inline requests).

A client submits requests already built in the model's own wire API (the body
`benchctl.gateway.complete.build_request` makes for the synchronous call, so an answer reads the same
either way) and hands back each request's response body in that wire API's own shape, keyed by its
`custom_id`: results are matched by id, never by order. What to do with them (resume from
`grades/<grader>/batches.json`, resubmit the expired, leave the failed unscored) is the caller's:
`benchctl.grading.batches`.

`batch_client(model)` gives the client for a model's provider (BatchUnsupported for the others).
An outcome's `error` is `EXPIRED` ("expired") or `CANCELLED` ("cancelled") for a request the batch
never ran, else starts with "errored" and quotes the vendor. Calls are retried like every benchctl
call (transient.py); one that still fails raises `benchctl.gateway.complete.ModelCallError`.
"""

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


def batch_client(model: ModelId) -> BatchClient:
    """The batch client for `model`'s provider: Anthropic Message Batches, the OpenAI Batch API or
    Gemini batch mode, with the key and base URL the rest of benchctl uses (provider_env.py)."""
    from benchctl.gateway.provider_env import PROVIDERS

    if model.provider not in PROVIDERS:
        why = (
            "its servers (vLLM, SGLang, proxies) have no batch API benchctl speaks"
            if model.provider == "openai-compatible"
            else "a scripted model answers at once"
        )
        raise BatchUnsupported(
            f"{model}: no batch API for provider {model.provider!r} ({why}); batches work for "
            f"anthropic/*, openai/* and google/* models: run without --batch"
        )
    env = PROVIDERS[model.provider]
    if not env.configured():
        from benchctl.gateway.complete import ModelCallError

        raise ModelCallError(
            f"cannot batch calls to {model}: set {' or '.join(env.keys)} in the environment "
            f"(or {env.base_url_var} to a proxy that needs no key)"
        )
    if model.provider == "anthropic":
        from benchctl.gateway.batch.anthropic import AnthropicBatches

        return AnthropicBatches()
    if model.provider == "openai":
        from benchctl.gateway.batch.openai import OpenAIBatches

        return OpenAIBatches()
    from benchctl.gateway.batch.gemini import GeminiBatches

    return GeminiBatches()
