"""Anthropic Message Batches through the vendor's SDK (`anthropic.AsyncAnthropic`).

`POST /v1/messages/batches` with `requests: [{custom_id, params}]` (params: the Messages body the
synchronous call would send), poll `GET /v1/messages/batches/{id}` until `processing_status` is
"ended", then read the JSONL at the batch's `results_url` as bytes: each line's `message` is the
Messages API answer exactly as sent (the SDK's typed models are bypassed so nothing is dropped,
e.g. a thinking block's signature). Results come in any order and are matched by `custom_id`.

The vendor counts every request as `processing` until the whole batch has ended, so `done` stays 0
until then. A batch whose 24 hours ran out also ends: its unprocessed requests come back `expired`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic
import orjson

from benchctl.gateway.batch.protocol import CANCELLED, EXPIRED, BatchItem, BatchOutcome, BatchState, BatchStatus
from benchctl.gateway.batch.transient import error_text, retried
from benchctl.gateway.provider_env import PROVIDERS
from benchctl.gateway.upstream import ModelId


class AnthropicBatches:
    """A `BatchClient` for anthropic/* models (key and base URL from provider_env.py)."""

    def __init__(self, client: anthropic.AsyncAnthropic | None = None) -> None:
        owned = client is None
        if client is None:
            env = PROVIDERS["anthropic"]
            # retries are ours (transient.py), classified like every other benchctl call
            client = anthropic.AsyncAnthropic(api_key=env.api_key() or "unset", base_url=env.base_url(), max_retries=0)
        self._client = client
        self._owned = owned  # a client handed in is its owner's to close

    async def submit(self, model: ModelId, items: Sequence[BatchItem]) -> str:
        requests: list[Any] = [{"custom_id": it.custom_id, "params": it.body} for it in items]
        batch = await retried(
            f"{model}: creating a message batch of {len(items)} request(s)",
            lambda: self._client.messages.batches.create(requests=requests),
            creates=True,
        )
        return batch.id

    async def status(self, batch_id: str) -> BatchStatus:
        b = await retried(f"message batch {batch_id}: status", lambda: self._client.messages.batches.retrieve(batch_id))
        c = b.request_counts
        total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
        state: BatchState = "in_progress"
        if b.processing_status == "ended":
            state = "expired" if c.expired else "cancelled" if c.canceled and b.cancel_initiated_at else "ended"
        return BatchStatus(state, total - c.processing, total)

    async def results(self, batch_id: str) -> list[BatchOutcome]:
        async def fetch() -> bytes:
            raw = await self._client.messages.batches.with_raw_response.results(batch_id)
            return await raw.read()

        data = await retried(f"message batch {batch_id}: results", fetch)
        outcomes: dict[str, BatchOutcome] = {}
        for line in data.splitlines():
            if line.strip():
                entry = orjson.loads(line)
                outcomes[entry["custom_id"]] = _outcome(entry["custom_id"], entry.get("result") or {})
        return list(outcomes.values())

    async def cancel(self, batch_id: str) -> None:
        await retried(f"message batch {batch_id}: cancel", lambda: self._client.messages.batches.cancel(batch_id))

    async def aclose(self) -> None:
        """Close the connections it opened (before the event loop that opened them ends)."""
        if self._owned:
            await self._client.close()


def _outcome(custom_id: str, result: dict[str, Any]) -> BatchOutcome:
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return BatchOutcome(custom_id, result["message"], None)
    if kind == "expired":
        return BatchOutcome(custom_id, None, EXPIRED)
    if kind == "canceled":
        return BatchOutcome(custom_id, None, CANCELLED)
    return BatchOutcome(custom_id, None, f"errored: {error_text(result.get('error') or kind)}")
