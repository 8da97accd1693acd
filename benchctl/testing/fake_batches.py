"""The vendors' batch APIs in the fake upstream server (`FakeUpstreamServer.batches`).

    Anthropic  POST /v1/messages/batches, GET /v1/messages/batches/{id}, GET .../{id}/results (JSONL
               at the batch's `results_url`), POST .../{id}/cancel
    OpenAI     POST /v1/files (multipart, purpose "batch"), GET /v1/files/{id}, GET /v1/files/{id}/content,
               POST /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel
    Gemini     POST /v1beta/models/{m}:batchGenerateContent (inline requests), GET /v1beta/batches/{id},
               POST /v1beta/batches/{id}:cancel

Each request of a batch is answered exactly as the synchronous endpoint would answer it (the
server's scripted upstream renders it, non-streaming), when the batch is processed: scripted
answers, usage and errors apply, in processing order. A script turn with an error status makes that
request fail the way the vendor reports a failed request in a batch.

Processing advances on each status poll: `per_poll` requests (None, the default: all of them on the
first poll). A test controls the rest:

    up.batches.per_poll = 1                 # one request per poll: progress is visible
    up.batches.fail("item-2", status=400)   # that custom id errors (or fail(lambda body: ...))
    up.batches.expire_after = 1             # batches end as expired after one processed request
    up.batches.advance(batch_id, n)         # process n more now (without a poll)

Results come back shuffled (a fixed seed; `shuffle = False` keeps processing order): clients must
match them by custom id. Expiry is the vendor's: Anthropic ends the batch with the unprocessed
requests `expired`; OpenAI status `expired` with `batch_expired` lines in the error file; Gemini
`BATCH_STATE_EXPIRED` with no results at all. Cancellation likewise (`canceled` results,
`batch_cancelled` lines, `BATCH_STATE_CANCELLED` with the answers processed so far).
Counters: `created`, `requests`, `polls`.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, Protocol

import orjson

from benchctl.gateway import wire
from benchctl.gateway.scripted import ScriptedUpstream
from benchctl.gateway.upstream import ModelId, UpstreamCall
from benchctl.gateway.wire import WireApi
from benchctl.gateway.wire.sse import new_id
from benchctl.testing.prompt_cache import CacheUse, PromptCache

Reply = tuple[int, dict[str, str], bytes]
JSON = {"content-type": "application/json"}

_ANTHROPIC = re.compile(r"^/v1/messages/batches(?:/([^/]+))?(?:/(results|cancel))?$")
_OPENAI_FILES = re.compile(r"^/v1/files(?:/([^/]+))?(/content)?$")
_OPENAI_BATCHES = re.compile(r"^/v1/batches(?:/([^/]+))?(/cancel)?$")
_GEMINI_CREATE = re.compile(r"^/(v1beta|v1)/models/([^/:]+):batchGenerateContent$")
_GEMINI_BATCH = re.compile(r"^/(v1beta|v1)/batches/([^/:]+)(:cancel)?$")
_OPENAI_ENDPOINTS: dict[str, WireApi] = {"/v1/responses": "openai_responses", "/v1/chat/completions": "openai_chat"}


class Server(Protocol):
    """What the batches need of their FakeUpstreamServer (a protocol: the server imports this module)."""

    @property
    def url(self) -> str: ...

    def upstream_for(self, model: str) -> ScriptedUpstream: ...

    prompt_cache: PromptCache | None

    def cache_plan(self, wire_api: WireApi, model: str | None, body: Any, path: str, query: str) -> CacheUse | None: ...


@dataclass
class Outcome:
    kind: str  # succeeded | errored | expired | canceled
    status: int = 200
    body: bytes = b""  # the synchronous endpoint's answer (or error body)


@dataclass
class FakeBatch:
    id: str
    vendor: str  # anthropic | openai | gemini
    wire_api: WireApi
    model: str
    requests: list[tuple[str, dict[str, Any]]]  # (custom id, body) in submission order
    path: str  # the synchronous endpoint each request is answered as
    created: float = field(default_factory=time.time)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    end: str | None = None  # None while processing; ended | expired | cancelled | failed
    ended_at: float | None = None
    cancel_at: float | None = None  # cancellation asked: ends on the next poll
    expire_after: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # openai: input file, endpoint, output files

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        return [(cid, body) for cid, body in self.requests if cid not in self.outcomes]

    def count(self, *kinds: str) -> int:
        return sum(1 for o in self.outcomes.values() if o.kind in kinds)


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _json(status: int, obj: Any) -> Reply:
    return status, dict(JSON), orjson.dumps(obj)


class FakeBatches:
    """Batch state of one fake upstream server; routes its batch and file requests (`answer`)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.per_poll: int | None = None
        self.expire_after: int | None = None  # for batches created from now on
        self.shuffle = True
        self.created = 0  # batches created
        self.requests = 0  # requests submitted in batches
        self.polls = 0  # status polls (every vendor's GET of a batch)
        self.batches: dict[str, FakeBatch] = {}
        self.files: dict[str, dict[str, Any]] = {}  # openai file id -> {meta..., "content": bytes}
        self._fail: list[tuple[Callable[[str, dict[str, Any]], bool], int, str]] = []
        self._faults: list[tuple[int, float | None, str, str]] = []  # fail_next
        self._lock = threading.RLock()
        self._rng = random.Random(0)

    # -- test controls
    def fail(self, match: str | Callable[[dict[str, Any]], bool], *, status: int = 400, message: str = "") -> None:
        """Requests with this custom id (or whose body the predicate accepts) fail with `status` and
        the vendor's error body, as the synchronous endpoint would answer a failed call."""

        def test(cid: str, body: dict[str, Any]) -> bool:
            return cid == match if isinstance(match, str) else bool(match(body))

        self._fail.append((test, status, message or f"injected {status} for a batch request"))

    def fail_next(
        self, status: int, *, times: int = 1, retry_after: float | None = 0, message: str = "", where: str = ""
    ) -> None:
        """The next `times` batch or file requests (any of the three APIs; with `where`, only those
        whose path contains it) get HTTP `status` with the vendor's error body and `retry-after`."""
        self._faults.extend([(status, retry_after, message or f"injected {status}", where)] * times)

    def advance(self, batch_id: str, n: int | None = None) -> None:
        """Process `n` more requests of the batch now (None: all), as a poll would."""
        with self._lock:
            self._process(self._get(batch_id), n)

    def expire(self, batch_id: str) -> None:
        """The batch's window runs out now: its unprocessed requests end as expired."""
        with self._lock:
            self._finish(self._get(batch_id), "expired")

    def get(self, batch_id: str) -> FakeBatch:
        with self._lock:
            return self._get(batch_id)

    # -- processing
    def _get(self, batch_id: str) -> FakeBatch:
        return self.batches[batch_id]

    def _new(self, batch: FakeBatch) -> FakeBatch:
        with self._lock:
            batch.expire_after = self.expire_after
            self.batches[batch.id] = batch
            self.created += 1
            self.requests += len(batch.requests)
        return batch

    def _poll(self, batch: FakeBatch) -> None:
        self.polls += 1
        if batch.end is None and batch.cancel_at is not None:
            self._finish(batch, "cancelled")
        elif batch.end is None:
            self._process(batch, self.per_poll)

    def _process(self, batch: FakeBatch, n: int | None) -> None:
        if batch.end is not None:
            return
        todo = batch.pending()
        for cid, body in todo if n is None else todo[:n]:
            if batch.expire_after is not None and len(batch.outcomes) >= batch.expire_after:
                break
            batch.outcomes[cid] = self._render(batch, cid, body)
        if batch.expire_after is not None and len(batch.outcomes) >= batch.expire_after and batch.pending():
            self._finish(batch, "expired")
        elif not batch.pending():
            self._finish(batch, "ended")

    def _render(self, batch: FakeBatch, cid: str, body: dict[str, Any]) -> Outcome:
        for test, status, message in self._fail:
            if test(cid, body):
                return Outcome("errored", status, wire.error_body(batch.wire_api, status, message))
        call = UpstreamCall(batch.wire_api, "POST", batch.path, ModelId("scripted", batch.model), body, False)
        # the prompt cache as for a synchronous request; a batch's requests are processed one after
        # another here, so each reads what the ones before it wrote (the vendors promise no more)
        use = self.server.cache_plan(batch.wire_api, batch.model, body, batch.path, "")
        try:
            rendered = self.server.upstream_for(batch.model).render(
                call, None if use is None else (use.read, use.write)
            )
        except Exception as e:  # a broken script: that request fails, as the sync endpoint says
            return Outcome("errored", 500, wire.error_body(batch.wire_api, 500, f"fake upstream script error: {e}"))
        if rendered.status == 200 and self.server.prompt_cache is not None:
            self.server.prompt_cache.commit(use)
        data = b"".join(rendered.pieces)
        return Outcome("succeeded" if rendered.status == 200 else "errored", rendered.status, data)

    def _finish(self, batch: FakeBatch, end: str) -> None:
        if batch.end is not None:
            return
        kind = {"expired": "expired", "cancelled": "canceled"}.get(end)
        if kind is not None:
            for cid, _ in batch.pending():
                batch.outcomes[cid] = Outcome(kind, 0)
        batch.end, batch.ended_at = end, time.time()

    def _ordered(self, batch: FakeBatch) -> list[tuple[str, Outcome]]:
        items = list(batch.outcomes.items())
        if self.shuffle:
            self._rng.shuffle(items)
        return items

    # -- routing
    def answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply | None:
        """The reply to a batch or file request, or None when the path is not one of them."""
        with self._lock:
            spoken = _api_of(path)
            fault = next((f for f in self._faults if f[3] in path), None) if spoken is not None else None
            if spoken is not None and fault is not None:
                self._faults.remove(fault)
                status, retry_after, message, _ = fault
                headers = {**JSON, **({"retry-after": str(retry_after)} if retry_after is not None else {})}
                return status, headers, wire.error_body(spoken, status, message)
            # Gemini before OpenAI: both have /v1/batches/{id} (the genai SDK's default version is v1)
            for route in (self._anthropic, self._openai_files, self._gemini, self._openai_batches):
                reply = route(method, path, headers, raw)
                if reply is not None:
                    return reply
        return None

    # -- Anthropic Message Batches
    def _anthropic(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply | None:
        m = _ANTHROPIC.match(path)
        if m is None:
            return None
        batch_id, action = m.group(1), m.group(2)

        def err(status: int, msg: str) -> Reply:
            error_type = "not_found_error" if status == 404 else None
            return status, dict(JSON), wire.error_body("anthropic_messages", status, msg, error_type)

        if batch_id is None:
            if method != "POST":
                return err(405, "listing batches is not supported by the fake upstream")
            body = _loads(raw)
            reqs = body.get("requests") if isinstance(body, dict) else None
            if not isinstance(reqs, list) or not reqs:
                return err(400, "requests: a non-empty list of {custom_id, params} is required")
            items = []
            for i, r in enumerate(reqs):
                if (
                    not isinstance(r, dict)
                    or not isinstance(r.get("custom_id"), str)
                    or not isinstance(r.get("params"), dict)
                ):
                    return err(400, f"requests.{i}: needs custom_id (a string) and params (an object)")
                items.append((r["custom_id"], r["params"]))
            if len({cid for cid, _ in items}) != len(items):
                return err(400, "requests: custom_id values must be unique within a batch")
            model = str(items[0][1].get("model") or "unknown")
            batch = self._new(
                FakeBatch(new_id("msgbatch_01"), "anthropic", "anthropic_messages", model, items, "/v1/messages")
            )
            return _json(200, self._anthropic_batch(batch))
        found = self.batches.get(batch_id)
        if found is None or found.vendor != "anthropic":
            return err(404, f"message batch {batch_id} not found")
        batch = found
        if action is None:
            self._poll(batch)
            return _json(200, self._anthropic_batch(batch))
        if action == "cancel" and method == "POST":
            if batch.end is None and batch.cancel_at is None:
                batch.cancel_at = time.time()
            return _json(200, self._anthropic_batch(batch))
        if action == "results":
            if batch.end is None:
                return err(400, f"message batch {batch_id} is still processing; its results are not ready")
            lines = [
                orjson.dumps({"custom_id": cid, "result": _anthropic_result(o)}) for cid, o in self._ordered(batch)
            ]
            return 200, {"content-type": "application/binary"}, b"\n".join(lines) + b"\n"
        return err(405, f"method {method} not allowed on {path}")

    def _anthropic_batch(self, b: FakeBatch) -> dict[str, Any]:
        ended = b.end is not None
        # The vendor's tallies: every request counts as processing until the whole batch has ended.
        counts = {
            "processing": 0 if ended else len(b.requests),
            "succeeded": b.count("succeeded") if ended else 0,
            "errored": b.count("errored") if ended else 0,
            "canceled": b.count("canceled") if ended else 0,
            "expired": b.count("expired") if ended else 0,
        }
        status = "ended" if ended else "canceling" if b.cancel_at is not None else "in_progress"
        return {
            "id": b.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": _iso(b.ended_at),
            "created_at": _iso(b.created),
            "expires_at": _iso(b.created + 86400),
            "archived_at": None,
            "cancel_initiated_at": _iso(b.cancel_at),
            "results_url": f"{self.server.url}/v1/messages/batches/{b.id}/results" if ended else None,
        }

    # -- OpenAI files and batches
    def _openai_files(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply | None:
        m = _OPENAI_FILES.match(path)
        if m is None:
            return None
        file_id, content = m.group(1), m.group(2)
        if file_id is None:
            if method != "POST":
                return _openai_error(405, "listing files is not supported by the fake upstream")
            fields = _multipart(headers.get("content-type", ""), raw)
            if "file" not in fields or fields.get("purpose", (b"", None))[0] != b"batch":
                return _openai_error(
                    400, "POST /v1/files needs a `file` part and purpose `batch` (the fake keeps batch inputs only)"
                )
            data, filename = fields["file"]
            return _json(200, self._file_meta(self._add_file(data, filename or "input.jsonl", "batch")))
        f = self.files.get(file_id)
        if f is None:
            return _openai_error(404, f"No such File object: {file_id}")
        if content:
            return 200, {"content-type": "application/octet-stream"}, f["content"]
        return _json(200, self._file_meta(f))

    def _add_file(self, data: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = new_id("file-")
        f = {"id": file_id, "bytes": len(data), "created_at": int(time.time()), "filename": filename}
        f.update(purpose=purpose, content=data)
        self.files[file_id] = f
        return f

    @staticmethod
    def _file_meta(f: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in f.items() if k != "content"}
        return {**meta, "object": "file", "status": "processed", "expires_at": None, "status_details": None}

    def _openai_batches(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply | None:
        m = _OPENAI_BATCHES.match(path)
        if m is None:
            return None
        batch_id, cancel = m.group(1), m.group(2)
        if batch_id is None:
            if method != "POST":
                return _openai_error(405, "listing batches is not supported by the fake upstream")
            return self._openai_create(_loads(raw))
        batch = self.batches.get(batch_id)
        if batch is None or batch.vendor != "openai":
            return _openai_error(404, f"No batch found with id '{batch_id}'.")
        if cancel:
            if method != "POST":
                return _openai_error(405, f"method {method} not allowed on {path}")
            if batch.end is None and batch.cancel_at is None:
                batch.cancel_at = time.time()
            return _json(200, self._openai_batch(batch))
        self._poll(batch)
        return _json(200, self._openai_batch(batch))

    def _openai_create(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            return _openai_error(400, "request body must be a JSON object")
        endpoint, window, file_id = body.get("endpoint"), body.get("completion_window"), body.get("input_file_id")
        if endpoint not in _OPENAI_ENDPOINTS:
            return _openai_error(400, f"endpoint must be one of {sorted(_OPENAI_ENDPOINTS)}, got {endpoint!r}")
        if window != "24h":
            return _openai_error(400, f"completion_window must be '24h', got {window!r}")
        f = self.files.get(str(file_id))
        if f is None:
            return _openai_error(400, f"input_file_id {file_id!r} is not an uploaded file")
        items, problems = [], []
        for n, line in enumerate(f["content"].splitlines(), 1):
            if not line.strip():
                continue
            r = _loads(line)
            ok = isinstance(r, dict) and isinstance(r.get("custom_id"), str) and isinstance(r.get("body"), dict)
            if not ok or r.get("url") != endpoint or r.get("method") != "POST":
                problems.append(
                    {
                        "code": "invalid_request",
                        "line": n,
                        "message": f"line {n}: needs custom_id, method POST, url {endpoint} and a body",
                        "param": None,
                    }
                )
                continue
            items.append((r["custom_id"], r["body"]))
        if len({cid for cid, _ in items}) != len(items):
            problems.append(
                {
                    "code": "duplicate_custom_id",
                    "line": None,
                    "message": "custom_id values must be unique",
                    "param": None,
                }
            )
        models = {str(b.get("model")) for _, b in items}
        if len(models) > 1:
            problems.append(
                {
                    "code": "mismatched_model",
                    "line": None,
                    "message": "all requests in a batch must use one model",
                    "param": None,
                }
            )
        model = next(iter(models), "unknown")
        batch = self._new(FakeBatch(new_id("batch_"), "openai", _OPENAI_ENDPOINTS[endpoint], model, items, endpoint))
        batch.extra = {"input_file_id": f["id"], "endpoint": endpoint, "metadata": body.get("metadata")}
        if problems or not items:
            batch.extra["errors"] = problems or [
                {"code": "empty_file", "line": None, "message": "the input file has no requests", "param": None}
            ]
            batch.end, batch.ended_at = "failed", time.time()
        return _json(200, self._openai_batch(batch, created=True))

    def _openai_batch(self, b: FakeBatch, created: bool = False) -> dict[str, Any]:
        if b.end is not None and b.end != "failed" and "output_file_id" not in b.extra:
            self._openai_outputs(b)
        status = {"ended": "completed", "expired": "expired", "cancelled": "cancelled", "failed": "failed"}.get(
            b.end or "", "cancelling" if b.cancel_at is not None else "validating" if created else "in_progress"
        )
        at = int(b.ended_at) if b.ended_at else None
        errors = b.extra.get("errors")
        return {
            "id": b.id,
            "object": "batch",
            "endpoint": b.extra["endpoint"],
            "errors": {"object": "list", "data": errors} if errors else None,
            "input_file_id": b.extra["input_file_id"],
            "completion_window": "24h",
            "status": status,
            "output_file_id": b.extra.get("output_file_id"),
            "error_file_id": b.extra.get("error_file_id"),
            "created_at": int(b.created),
            "in_progress_at": None if created else int(b.created),
            "expires_at": int(b.created) + 86400,
            "finalizing_at": at if status == "completed" else None,
            "completed_at": at if status == "completed" else None,
            "failed_at": at if status == "failed" else None,
            "expired_at": at if status == "expired" else None,
            "cancelling_at": int(b.cancel_at) if b.cancel_at else None,
            "cancelled_at": at if status == "cancelled" else None,
            "request_counts": {
                "total": len(b.requests),
                "completed": b.count("succeeded"),
                "failed": b.count("errored", "expired", "canceled"),
            },
            "metadata": b.extra.get("metadata"),
            "model": b.model,
        }

    def _openai_outputs(self, b: FakeBatch) -> None:
        """The output file (2xx answers) and the error file (failed, expired, cancelled), once ended."""
        out: list[bytes] = []
        errs: list[bytes] = []
        for cid, o in self._ordered(b):
            line: dict[str, Any] = {"id": new_id("batch_req_"), "custom_id": cid}
            if o.kind in ("succeeded", "errored"):
                line["response"] = {"status_code": o.status, "request_id": new_id("req_"), "body": _loads(o.body)}
                line["error"] = None
            else:
                code = "batch_expired" if o.kind == "expired" else "batch_cancelled"
                why = (
                    "could not be executed before the completion window expired"
                    if o.kind == "expired"
                    else "was cancelled"
                )
                line["response"], line["error"] = None, {"code": code, "message": f"This request {why}."}
            (out if o.kind == "succeeded" else errs).append(orjson.dumps(line))
        for key, lines in (("output_file_id", out), ("error_file_id", errs)):
            b.extra[key] = (
                self._add_file(b"\n".join(lines) + b"\n", f"batch_{b.id}_{key[:-8]}.jsonl", "batch_output")["id"]
                if lines
                else None
            )

    # -- Gemini batch mode
    def _gemini(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply | None:
        create, m = _GEMINI_CREATE.match(path), _GEMINI_BATCH.match(path)
        if create is None and m is None:
            return None
        if create is not None:
            if method != "POST":
                return _gemini_error(405, f"method {method} not allowed on {path}")
            return self._gemini_create(create.group(1), create.group(2), _loads(raw))
        assert m is not None
        batch = self.batches.get(m.group(2))
        if batch is None or batch.vendor != "gemini":
            if m.group(1) == "v1" and not m.group(3):
                return None  # perhaps an OpenAI batch id
            return _gemini_error(404, f"Batch batches/{m.group(2)} not found.")
        if m.group(3):
            if method != "POST":
                return _gemini_error(405, f"method {method} not allowed on {path}")
            if batch.end is None and batch.cancel_at is None:
                batch.cancel_at = time.time()
            return _json(200, {})
        if method != "GET":
            return _gemini_error(405, f"method {method} not allowed on {path}")
        self._poll(batch)
        return _json(200, self._gemini_operation(batch))

    def _gemini_create(self, version: str, model: str, body: Any) -> Reply:
        batch_body = body.get("batch") if isinstance(body, dict) else None
        reqs = (((batch_body or {}).get("inputConfig") or {}).get("requests") or {}).get("requests")
        if not isinstance(reqs, list) or not reqs:
            return _gemini_error(
                400, "batch.inputConfig.requests.requests: a non-empty list of inline requests is required"
            )
        items = []
        for i, r in enumerate(reqs):
            key = ((r or {}).get("metadata") or {}).get("key") if isinstance(r, dict) else None
            if not isinstance(r, dict) or not isinstance(r.get("request"), dict):
                return _gemini_error(400, f"requests[{i}]: needs a request object")
            items.append((str(key) if key is not None else str(i), r["request"]))
        path = f"/{version}/models/{model}:generateContent"
        batch = self._new(FakeBatch(new_id("", 16).lower(), "gemini", "gemini", model, items, path))
        batch.extra = {
            "displayName": (batch_body or {}).get("displayName") or batch.id,
            "inputConfig": (batch_body or {})["inputConfig"],
        }
        return _json(200, self._gemini_operation(batch, created=True))

    def _gemini_operation(self, b: FakeBatch, created: bool = False) -> dict[str, Any]:
        end = b.end
        state = {"ended": "SUCCEEDED", "expired": "EXPIRED", "cancelled": "CANCELLED", "failed": "FAILED"}.get(
            end or "", "PENDING" if created else "RUNNING"
        )
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "model": f"models/{b.model}",
            "displayName": b.extra["displayName"],
            "name": f"batches/{b.id}",
            "inputConfig": b.extra["inputConfig"],
            "createTime": _iso(b.created),
            "updateTime": _iso(b.ended_at or time.time()),
            # int64 fields are strings in the proto JSON mapping
            "batchStats": {
                "requestCount": str(len(b.requests)),
                "successfulRequestCount": str(b.count("succeeded")),
                "failedRequestCount": str(b.count("errored")),
                "pendingRequestCount": str(len(b.pending())),
            },
            "state": f"BATCH_STATE_{state}",
        }
        op: dict[str, Any] = {"name": f"batches/{b.id}", "metadata": meta, "done": end is not None}
        if end is not None:
            meta["endTime"] = _iso(b.ended_at)
        if end in ("ended", "cancelled"):  # an expired batch has no results to retrieve
            responses = []
            for cid, o in self._ordered(b):
                if o.kind == "succeeded":
                    responses.append({"response": _loads(o.body), "metadata": {"key": cid}})
                elif o.kind == "errored":
                    error = (_loads(o.body) or {}).get("error") or {"code": o.status, "message": "error"}
                    responses.append({"error": error, "metadata": {"key": cid}})
            output = {"inlinedResponses": {"inlinedResponses": responses}}
            meta["output"] = output
            op["response"] = {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput",
                **output,
            }
        return op


def _api_of(path: str) -> WireApi | None:
    """The wire API whose error shape a batch or file request's error takes; None for other paths."""
    if _ANTHROPIC.match(path):
        return "anthropic_messages"
    if _GEMINI_CREATE.match(path) or (_GEMINI_BATCH.match(path) and not _OPENAI_BATCHES.match(path)):
        return "gemini"
    if _OPENAI_FILES.match(path) or _OPENAI_BATCHES.match(path):
        return "openai_responses"
    return None


def _anthropic_result(o: Outcome) -> dict[str, Any]:
    if o.kind == "succeeded":
        return {"type": "succeeded", "message": _loads(o.body)}
    if o.kind == "errored":
        body = _loads(o.body)
        if not isinstance(body, dict) or "error" not in body:
            body = {"type": "error", "error": {"type": "api_error", "message": f"HTTP {o.status}"}}
        return {"type": "errored", "error": body}
    return {"type": o.kind}


def _openai_error(status: int, message: str) -> Reply:
    return status, dict(JSON), wire.error_body("openai_responses", status, message)


def _gemini_error(status: int, message: str) -> Reply:
    return status, dict(JSON), wire.error_body("gemini", status, message)


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        return None


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[bytes, str | None]]:
    """The parts of a multipart/form-data body: name -> (bytes, filename)."""
    if not content_type.lower().startswith("multipart/form-data"):
        return {}
    msg = BytesParser(policy=HTTP).parsebytes(b"content-type: " + content_type.encode() + b"\r\n\r\n" + raw)
    parts: dict[str, tuple[bytes, str | None]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            parts[name] = (payload if isinstance(payload, bytes) else b"", part.get_filename())
    return parts
