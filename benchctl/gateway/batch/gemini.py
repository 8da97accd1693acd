"""Gemini batch mode over HTTP (httpx2): the google-genai SDK's batch types re-model a request
(contents plus a `config` it re-encodes) and parse each answer into its own classes, so a wire body
would go through two conversions each way; the REST API takes and gives the generateContent JSON
as is. (The tests drive the fake with the SDK too, to show it speaks the API the SDK expects.)

`POST /v1beta/models/{model}:batchGenerateContent` with `{batch: {displayName, inputConfig:
{requests: {requests: [{request, metadata: {key}}]}}}}` (request: the generateContent body the
synchronous call would send; key: the custom id); poll `GET /v1beta/batches/{id}` (an operation
whose `metadata` is the batch: `state` BATCH_STATE_PENDING|RUNNING|SUCCEEDED|FAILED|CANCELLED|EXPIRED,
`batchStats`); when done, `metadata.output.inlinedResponses.inlinedResponses[]` holds
`{response | error, metadata: {key}}`, matched by key. An expired batch has no results: every
request comes back expired. Cancel: `POST /v1beta/batches/{id}:cancel`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import httpx2
import orjson

from benchctl.gateway.batch.protocol import CANCELLED, EXPIRED, BatchItem, BatchOutcome, BatchState, BatchStatus
from benchctl.gateway.batch.transient import HttpStatusError, error_text, retried
from benchctl.gateway.provider_env import PROVIDERS
from benchctl.gateway.upstream import ModelId

VERSION = "v1beta"  # as the synchronous calls (wire/gemini.py)
STATES: dict[str, BatchState] = {
    "BATCH_STATE_PENDING": "in_progress",
    "BATCH_STATE_RUNNING": "in_progress",
    "BATCH_STATE_SUCCEEDED": "ended",
    "BATCH_STATE_FAILED": "failed",
    "BATCH_STATE_CANCELLED": "cancelled",
    "BATCH_STATE_EXPIRED": "expired",
}
_NAMES = itertools.count(1)


class GeminiBatches:
    """A `BatchClient` for google/* models (key and base URL from provider_env.py)."""

    def __init__(self, client: httpx2.AsyncClient | None = None) -> None:
        env = PROVIDERS["google"]
        self._base = env.base_url().rstrip("/")
        self._key = env.api_key()
        self._owned = client is None  # a client handed in is its owner's to close
        self._client = client or httpx2.AsyncClient(timeout=httpx2.Timeout(60.0, connect=15.0), trust_env=True)
        self._submitted: dict[str, list[str]] = {}  # batch name -> its keys (when the batch lists none)

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        headers = {"x-goog-api-key": self._key} if self._key else {}
        content = None if body is None else orjson.dumps(body)
        if content is not None:
            headers["content-type"] = "application/json"
        r = await self._client.request(method, f"{self._base}/{VERSION}/{path}", content=content, headers=headers)
        if r.status_code >= 400:
            raise HttpStatusError(r.status_code, dict(r.headers), r.text)
        data = orjson.loads(r.content) if r.content else {}
        return data if isinstance(data, dict) else {}

    async def submit(self, model: ModelId, items: Sequence[BatchItem]) -> str:
        requests = [{"request": i.body, "metadata": {"key": i.custom_id}} for i in items]
        body = {
            "batch": {"displayName": f"benchctl-{next(_NAMES)}", "inputConfig": {"requests": {"requests": requests}}}
        }
        op = await retried(
            f"{model}: creating a batch of {len(items)} request(s)",
            lambda: self._call("POST", f"models/{model.name}:batchGenerateContent", body),
            creates=True,
        )
        name = str(op.get("name") or "")
        if not name.startswith("batches/"):
            raise HttpStatusError(502, {}, f"batchGenerateContent answered without a batch name: {op!r:.300}")
        self._submitted[name] = [i.custom_id for i in items]
        return name

    async def _get(self, batch_id: str) -> dict[str, Any]:
        name = batch_id if batch_id.startswith("batches/") else f"batches/{batch_id}"
        return await retried(f"{name}: status", lambda: self._call("GET", name))

    async def status(self, batch_id: str) -> BatchStatus:
        meta = (await self._get(batch_id)).get("metadata") or {}
        stats = meta.get("batchStats") or {}
        total, pending = int(stats.get("requestCount") or 0), int(stats.get("pendingRequestCount") or 0)
        return BatchStatus(STATES.get(str(meta.get("state")), "in_progress"), total - pending, total)

    async def results(self, batch_id: str) -> list[BatchOutcome]:
        op = await self._get(batch_id)
        meta = op.get("metadata") or {}
        output = meta.get("output") or op.get("response") or {}
        if output.get("responsesFile"):
            raise HttpStatusError(501, {}, f"{batch_id}: results in a file ({output['responsesFile']}) are not read")
        outcomes: dict[str, BatchOutcome] = {}
        for entry in (output.get("inlinedResponses") or {}).get("inlinedResponses") or []:
            key = str((entry.get("metadata") or {}).get("key"))
            if isinstance(entry.get("response"), dict):
                outcomes[key] = BatchOutcome(key, entry["response"], None)
            else:
                error = entry.get("error") or {}
                outcomes[key] = BatchOutcome(key, None, f"errored (HTTP {error.get('code')}): {error_text(error)}")
        state = str(meta.get("state"))
        missing = {"BATCH_STATE_EXPIRED": EXPIRED, "BATCH_STATE_CANCELLED": CANCELLED}.get(state)
        for key in _keys(meta) or self._submitted.get(str(op.get("name")), []):
            outcomes.setdefault(
                key, BatchOutcome(key, None, missing or f"errored: no result for this request ({state})")
            )
        return list(outcomes.values())

    async def cancel(self, batch_id: str) -> None:
        name = batch_id if batch_id.startswith("batches/") else f"batches/{batch_id}"
        await retried(f"{name}: cancel", lambda: self._call("POST", f"{name}:cancel", {}))

    async def aclose(self) -> None:
        """Close the connections it opened (before the event loop that opened them ends)."""
        if self._owned:
            await self._client.aclose()


def _keys(meta: dict[str, Any]) -> list[str]:
    """The custom ids the batch was created with, from its own input config."""
    requests = (((meta.get("inputConfig") or {}).get("requests") or {}).get("requests")) or []
    return [str((r.get("metadata") or {}).get("key")) for r in requests if isinstance(r, dict)]
