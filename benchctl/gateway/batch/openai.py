"""The OpenAI Batch API through the vendor's SDK (`openai.AsyncOpenAI`).

The requests go up as a JSONL file (`POST /v1/files`, purpose "batch"), one line each
`{custom_id, method: "POST", url, body}` where url is the model's wire endpoint (`/v1/responses`
for openai/*, see complete.WIRE_FOR_PROVIDER); `POST /v1/batches` with `completion_window: "24h"`;
poll `GET /v1/batches/{id}`; then the output file (2xx answers) and the error file (failed requests,
and `batch_expired` / `batch_cancelled` lines for those never run) by id. Each line's
`response.body` is the endpoint's answer as sent. Lines come in any order: matched by `custom_id`.

Every request of the input file gets an outcome: one with no line (a batch that failed validation,
files still being written) gets an error that says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai
import orjson

from benchctl.gateway.batch.protocol import CANCELLED, EXPIRED, BatchItem, BatchOutcome, BatchState, BatchStatus
from benchctl.gateway.batch.transient import error_text, retried
from benchctl.gateway.complete import WIRE_FOR_PROVIDER
from benchctl.gateway.provider_env import PROVIDERS
from benchctl.gateway.upstream import ModelId

ENDPOINTS = {"openai_responses": "/v1/responses", "openai_chat": "/v1/chat/completions"}
STATES: dict[str, BatchState] = {
    "validating": "in_progress",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "cancelling": "in_progress",
    "completed": "ended",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}


class OpenAIBatches:
    """A `BatchClient` for openai/* models (key and base URL from provider_env.py)."""

    def __init__(self, client: openai.AsyncOpenAI | None = None) -> None:
        owned = client is None
        if client is None:
            env = PROVIDERS["openai"]
            client = openai.AsyncOpenAI(api_key=env.api_key() or "unset", base_url=env.base_url(), max_retries=0)
        self._client = client
        self._owned = owned  # a client handed in is its owner's to close

    async def submit(self, model: ModelId, items: Sequence[BatchItem]) -> str:
        url = ENDPOINTS[WIRE_FOR_PROVIDER[model.provider]]
        lines = [orjson.dumps({"custom_id": i.custom_id, "method": "POST", "url": url, "body": i.body}) for i in items]
        data = b"\n".join(lines) + b"\n"
        upload = await retried(
            f"{model}: uploading a batch input file of {len(items)} request(s)",
            lambda: self._client.files.create(
                file=("benchctl-batch.jsonl", data, "application/jsonl"), purpose="batch"
            ),
        )
        batch = await retried(
            f"{model}: creating a batch from {upload.id}",
            lambda: self._client.batches.create(input_file_id=upload.id, endpoint=url, completion_window="24h"),  # type: ignore[arg-type]
            creates=True,
        )
        return batch.id

    async def status(self, batch_id: str) -> BatchStatus:
        b = await retried(f"batch {batch_id}: status", lambda: self._client.batches.retrieve(batch_id))
        c = b.request_counts
        done, total = (c.completed + c.failed, c.total) if c is not None else (0, 0)
        return BatchStatus(STATES.get(b.status, "in_progress"), done, total)

    async def _file(self, file_id: str) -> bytes:
        response = await retried(f"batch file {file_id}: content", lambda: self._client.files.content(file_id))
        return response.content

    async def results(self, batch_id: str) -> list[BatchOutcome]:
        b = await retried(f"batch {batch_id}: status", lambda: self._client.batches.retrieve(batch_id))
        outcomes: dict[str, BatchOutcome] = {}
        for file_id in (b.output_file_id, b.error_file_id):
            if file_id:
                for line in (await self._file(file_id)).splitlines():
                    if line.strip():
                        entry = orjson.loads(line)
                        outcomes[entry["custom_id"]] = _outcome(entry)
        missing = _why_missing(b.status, b.errors.model_dump() if b.errors else None)
        for line in (await self._file(b.input_file_id)).splitlines():
            if line.strip():
                custom_id = orjson.loads(line)["custom_id"]
                outcomes.setdefault(custom_id, BatchOutcome(custom_id, None, missing))
        return list(outcomes.values())

    async def cancel(self, batch_id: str) -> None:
        await retried(f"batch {batch_id}: cancel", lambda: self._client.batches.cancel(batch_id))

    async def aclose(self) -> None:
        """Close the connections it opened (before the event loop that opened them ends)."""
        if self._owned:
            await self._client.close()


def _outcome(entry: dict[str, Any]) -> BatchOutcome:
    custom_id, response, error = entry["custom_id"], entry.get("response"), entry.get("error")
    if isinstance(response, dict):
        status, body = response.get("status_code"), response.get("body")
        if status == 200 and isinstance(body, dict):
            return BatchOutcome(custom_id, body, None)
        return BatchOutcome(custom_id, None, f"errored (HTTP {status}): {error_text(body)}")
    code = error.get("code") if isinstance(error, dict) else None
    if code == "batch_expired":
        return BatchOutcome(custom_id, None, EXPIRED)
    if code == "batch_cancelled":
        return BatchOutcome(custom_id, None, CANCELLED)
    return BatchOutcome(custom_id, None, f"errored: {error_text(error)}")


def _why_missing(status: str, errors: dict[str, Any] | None) -> str:
    if status == "expired":
        return EXPIRED
    if status == "cancelled":
        return CANCELLED
    if status == "failed":
        found = [error_text(e) for e in (errors or {}).get("data") or []]
        return "errored: the batch failed validation: " + ("; ".join(found) or "no reason given")
    return f"errored: no result for this request (batch status {status})"
