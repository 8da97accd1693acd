"""Judge calls through the vendors' batch APIs (`benchctl grade --batch`, `scan --batch`,
`targets validate --batch`): the `BatchCollector` behind `Judge._complete`, so no grader changes.

In batch mode a judge call builds its request body exactly as the synchronous call would
(`benchctl.gateway.complete.build_request`), names it by a `custom_id` (a hash of the model, the
sample number of a repeat, and the body: the same question gets the same id in every process) and
waits for its answer here. The collector:

- gathers requests and submits them as one batch per (model, batches.json) once no new request
  arrived for `quiet_s` (a grading session asks all its first questions at once; re-asks and the
  tournament's later stages make later rounds), or at once when a batch reaches its size cap;
- before submitting, looks the id up in batches.json (batch_record.py): a batch of an earlier
  session holding it pending or succeeded is waited for or read again instead of paying twice;
- records a new batch's id and custom ids in batches.json before waiting for it;
- polls (backing off from `poll_first_s` to `poll_max_s`), reporting requests done / total;
- matches results to requests by custom id, never by order; a request the vendor failed raises
  `BatchRequestFailed` with its reason (the judge leaves the item unscored; a rerun submits it
  anew); requests an expired or cancelled batch did not process are resubmitted at once;
- prices each answer at the model's batch price.

Identical requests in one session (same model, sample and body) are sent once and all askers get
the answer; its cost is charged to the first (`BatchAnswer.charge`), and never again when a spend
log already holds a line with its custom id (a rerun that reads a batch an interrupted session
had already read and counted). Cancellation (Ctrl-C) leaves the vendor's batches running: their
ids are on disk and the next run resumes them.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchctl.gateway.batch import CANCELLED, EXPIRED, BatchClient, BatchItem, BatchOutcome
from benchctl.gateway.complete import Completion
from benchctl.gateway.upstream import ModelId, UpstreamCall
from benchctl.grading.batch_record import (
    batches_path,
    find_resumable,
    new_batch,
    read_batches,
    update_batches,
)
from benchctl.grading.spend import counted_custom_ids

QUIET_S = 0.5  # a round of asks is complete once none arrived for this long
POLL_FIRST_S, POLL_MAX_S = 0.5, 60.0  # poll delay doubles from the first to the max
MAX_REQUESTS = 10_000  # per batch (vendors allow 50,000-100,000)
# bytes of request bodies per batch: Gemini's inline requests are capped at 20 MB, the others at 200+ MB
MAX_BYTES = {"google": 18_000_000}
DEFAULT_MAX_BYTES = 150_000_000
MAX_RESUBMITS = 3  # an unprocessed request is resubmitted at most this often per session
READ_TRIES = 5  # status / results calls that fail in a row before the batch's requests fail


class BatchRequestFailed(Exception):
    """A request of a batch has no usable answer (the vendor's error, or the batch could not be
    submitted or read); the judge turns it into JudgeFailed: the item stays unscored."""


@dataclass
class BatchRequest:
    model: ModelId
    call: UpstreamCall  # as the synchronous call would send it
    custom_id: str
    spend_log: Path | None  # its judge's spend log; batches.json sits beside its folder (None: kept in memory)
    subject: str
    ask: str
    resubmits: int = 0
    asked_at: float = field(default_factory=time.perf_counter)  # for the answer's latency: the whole wait

    @property
    def record(self) -> Path | None:
        return batches_path(self.spend_log) if self.spend_log is not None else None


@dataclass
class BatchAnswer:
    completion: Completion
    batch_id: str
    custom_id: str
    charge: bool  # its cost is new spend (False: counted already, by another asker or an earlier session)


@dataclass(frozen=True)
class BatchProgress:
    batch_id: str
    model: str
    state: str
    done: int
    total: int


@dataclass
class BatchStats:
    """What a session's batches did, for its summary."""

    batches_submitted: int = 0
    requests_submitted: int = 0
    requests_resumed: int = 0  # answered from a batch an earlier session submitted
    requests_resubmitted: int = 0  # not processed by an expired or cancelled batch: sent again
    requests_failed: int = 0
    batch_ids: list[str] = field(default_factory=list)  # submitted or resumed by this session


def custom_id(model: ModelId, body: dict[str, Any], sample: int) -> str:
    """The request's id: the same model, sample (a repeat's number) and body give the same id in
    every process. Anthropic allows [a-zA-Z0-9_-]{1,64}."""
    data = orjson.dumps({"model": str(model), "sample": sample, "body": body}, option=orjson.OPT_SORT_KEYS)
    return "j" + hashlib.sha256(data).hexdigest()[:40]


def default_client_for(model: ModelId) -> BatchClient:
    """The BatchClient of the model's provider; BatchUnsupported names the model and the fix."""
    from benchctl.gateway.batch import batch_client

    return batch_client(model)


def _unprocessed(outcome: BatchOutcome | None) -> bool:
    """No outcome, or the vendor's "expired" / "canceled": the request was never run (not billed),
    so it is resubmitted rather than failed."""
    if outcome is None:
        return True
    return outcome.body is None and outcome.error in (EXPIRED, CANCELLED)


class BatchCollector:
    """Every batched judge call of one session (one per root Judge: panels and repeats share it)."""

    def __init__(
        self,
        client_for: Callable[[ModelId], BatchClient] | None = None,
        *,
        on_progress: Callable[[BatchProgress], None] | None = None,
        quiet_s: float = QUIET_S,
        poll_first_s: float = POLL_FIRST_S,
        poll_max_s: float = POLL_MAX_S,
        max_requests: int = MAX_REQUESTS,
    ) -> None:
        self._client_for, self.on_progress = client_for, on_progress
        self.quiet_s, self.poll_first_s, self.poll_max_s, self.max_requests = (
            quiet_s,
            poll_first_s,
            poll_max_s,
            max_requests,
        )
        self.stats = BatchStats()
        self._clients: dict[str, BatchClient] = {}
        self._requests: dict[str, BatchRequest] = {}  # custom id -> the request its askers wait for
        self._waiters: dict[str, list[asyncio.Future[BatchAnswer]]] = {}
        self._queue: dict[tuple[str, Path | None], dict[str, BatchRequest]] = {}  # not yet submitted
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._routed: dict[str, set[str]] = {}  # batch id -> custom ids waiting for it
        self._watched: set[str] = set()
        self._ended: dict[str, tuple[str, dict[str, BatchOutcome]]] = {}  # batch id -> (state, outcomes)
        self._mine: set[str] = set()  # batch ids this session submitted
        self._batches: dict[Path | None, list[dict[str, Any]]] = {}  # batches.json, as last read or written
        self._write_lock = threading.Lock()
        self._counted: set[str] = set()  # custom ids whose cost a spend log holds
        self._spend_read: set[Path] = set()

    # ------------------------------------------------------------------ public

    def client(self, model: ModelId) -> BatchClient:
        key = str(model)
        if key not in self._clients:
            self._clients[key] = (self._client_for or default_client_for)(model)
        return self._clients[key]

    def check(self, model: str) -> None:
        """Raise BatchUnsupported when `model` has no batch API (before any work starts)."""
        self.client(ModelId.parse(model))

    def request(
        self, model: ModelId, call: UpstreamCall, *, sample: int, spend_log: Path | None, subject: str, ask: str
    ) -> BatchRequest:
        return BatchRequest(model, call, custom_id(model, call.body or {}, sample), spend_log, subject, ask)

    def on_vendor(self, req: BatchRequest) -> bool:
        """The request is already at the vendor (in flight this session, or in a batch an earlier
        session recorded pending or succeeded): asking it adds no spend."""
        return req.custom_id in self._waiters or self._resumable(req) is not None

    async def ask(self, req: BatchRequest) -> BatchAnswer:
        fut: asyncio.Future[BatchAnswer] = asyncio.get_running_loop().create_future()
        waiting = self._waiters.setdefault(req.custom_id, [])
        waiting.append(fut)
        if len(waiting) == 1:  # the first asker routes it; the others share its answer
            self._requests[req.custom_id] = req
            self._route(req)
        return await fut

    async def aclose(self) -> None:
        """Stop polling (the vendor's batches keep running: a rerun resumes them) and close clients."""
        if self._timer is not None:
            self._timer.cancel()
        for t in list(self._tasks):
            t.cancel()
        for c in self._clients.values():
            close = getattr(c, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:
                    pass

    # ------------------------------------------------------------------ routing

    def _records(self, record: Path | None) -> list[dict[str, Any]]:
        if record not in self._batches:
            self._batches[record] = read_batches(record) if record is not None else []
        return self._batches[record]

    def _resumable(self, req: BatchRequest) -> dict[str, Any] | None:
        return find_resumable(self._records(req.record), req.custom_id)

    def _write(self, record: Path | None, change: Callable[[list[dict[str, Any]]], None]) -> None:
        """Runs in a worker thread: one write at a time, so the copy kept is the latest written."""
        with self._write_lock:
            if record is None:
                change(self._records(None))
            else:  # merged into the file as it is now: another session may have added batches
                self._batches[record] = update_batches(record, change)

    def _route(self, req: BatchRequest) -> None:
        found = self._resumable(req)
        if found is None:
            self._enqueue(req)
            return
        batch_id = found["id"]
        if batch_id not in self._mine:
            self.stats.requests_resumed += 1
        if batch_id in self._ended:
            state, outcomes = self._ended[batch_id]
            self._deliver(req.custom_id, batch_id, state, outcomes.get(req.custom_id))
            return
        self._routed.setdefault(batch_id, set()).add(req.custom_id)
        if batch_id not in self._watched:
            self._watched.add(batch_id)
            if batch_id not in self.stats.batch_ids:
                self.stats.batch_ids.append(batch_id)
            self._spawn(self._watch(batch_id, req.model, req.record), batch_id)

    def _enqueue(self, req: BatchRequest) -> None:
        key = (str(req.model), req.record)
        queue = self._queue.setdefault(key, {})
        queue[req.custom_id] = req
        cap = MAX_BYTES.get(req.model.provider, DEFAULT_MAX_BYTES)
        if len(queue) >= self.max_requests or sum(len(orjson.dumps(r.call.body)) for r in queue.values()) >= cap:
            self._flush_key(key)
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.quiet_s, self._flush_all)

    def _flush_all(self) -> None:
        self._timer = None
        for key in list(self._queue):
            self._flush_key(key)

    def _flush_key(self, key: tuple[str, Path | None]) -> None:
        reqs = list(self._queue.pop(key, {}).values())
        if reqs:
            self._spawn(self._submit(reqs), None, [r.custom_id for r in reqs])

    def _spawn(
        self, coro: Coroutine[Any, Any, None], batch_id: str | None, custom_ids: list[str] | None = None
    ) -> None:
        """A background task whose unexpected error fails the requests it was for, never silently."""

        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception as e:
                ids = custom_ids if custom_ids is not None else sorted(self._routed.pop(batch_id or "", set()))
                for cid in ids:
                    self._fail(cid, f"{type(e).__name__}: {e}")

        task = asyncio.get_running_loop().create_task(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ submit and wait

    async def _submit(self, reqs: list[BatchRequest]) -> None:
        model, record = reqs[0].model, reqs[0].record
        try:
            batch_id = await self.client(model).submit(model, [BatchItem(r.custom_id, r.call.body or {}) for r in reqs])
        except asyncio.CancelledError:
            raise
        except Exception as e:
            for r in reqs:
                self._fail(r.custom_id, f"could not submit a batch of {len(reqs)} request(s) to {model}: {e}")
            return
        self._mine.add(batch_id)
        self.stats.batches_submitted += 1
        self.stats.requests_submitted += len(reqs)
        self.stats.batch_ids.append(batch_id)
        self._routed.setdefault(batch_id, set()).update(r.custom_id for r in reqs)
        self._watched.add(batch_id)
        entry = new_batch(batch_id, str(model), {r.custom_id: (r.subject, r.ask) for r in reqs})
        # on disk before the first wait: a session killed from now on resumes this batch
        await asyncio.to_thread(self._write, record, lambda batches: batches.append(entry))
        await self._watch(batch_id, model, record)

    async def _read(self, what: str, call: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """A status / results call, retried with back-off; the last error after READ_TRIES."""
        delay = self.poll_first_s
        for attempt in range(READ_TRIES):
            try:
                return await call()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if attempt == READ_TRIES - 1:
                    raise BatchRequestFailed(f"could not read {what}: {type(e).__name__}: {e}") from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.poll_max_s)
        raise AssertionError("unreachable")

    async def _watch(self, batch_id: str, model: ModelId, record: Path | None) -> None:
        client = self.client(model)
        what = f"batch {batch_id} of {model}"
        hint = f"; rerun to try again (its id is in {record})" if record is not None else ""
        delay = self.poll_first_s
        try:
            while True:
                status = await self._read(what, lambda: client.status(batch_id))
                if self.on_progress is not None:
                    self.on_progress(BatchProgress(batch_id, str(model), status.state, status.done, status.total))
                if status.state != "in_progress":
                    break
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.poll_max_s)
            outcomes: list[BatchOutcome] = await self._read(f"the results of {what}", lambda: client.results(batch_id))
        except BatchRequestFailed as e:
            for cid in sorted(self._routed.pop(batch_id, set())):
                self._fail(cid, f"{e}{hint}")
            self._watched.discard(batch_id)  # a later ask in this session tries again
            return
        by_id = {o.custom_id: o for o in outcomes}
        self._ended[batch_id] = (status.state, by_id)
        await asyncio.to_thread(self._write, record, lambda batches: _mark(batches, batch_id, status.state, by_id))
        for cid in sorted(self._routed.pop(batch_id, set())):
            self._deliver(cid, batch_id, status.state, by_id.get(cid))

    # ------------------------------------------------------------------ answers

    def _deliver(self, cid: str, batch_id: str, state: str, outcome: BatchOutcome | None) -> None:
        req = self._requests.get(cid)
        if req is None or cid not in self._waiters:
            return
        if outcome is not None and outcome.body is not None:
            try:
                completion = _completion(req, outcome.body)
            except BatchRequestFailed as e:
                self._fail(cid, str(e))
                return
            charge = not self._is_counted(req)
            self._counted.add(cid)
            for i, fut in enumerate(self._waiters.pop(cid)):
                if not fut.done():
                    fut.set_result(BatchAnswer(completion, batch_id, cid, charge and i == 0))
            self._requests.pop(cid, None)
            return
        if _unprocessed(outcome) and req.resubmits < MAX_RESUBMITS:
            req.resubmits += 1
            self.stats.requests_resubmitted += 1
            self._enqueue(req)
            return
        why = (outcome.error if outcome is not None else None) or f"batch {batch_id} ({state}) has no result for it"
        self._fail(cid, f"batch {batch_id}: {why}")

    def _is_counted(self, req: BatchRequest) -> bool:
        if req.spend_log is not None and req.spend_log not in self._spend_read:
            self._spend_read.add(req.spend_log)
            self._counted |= counted_custom_ids(req.spend_log)
        return req.custom_id in self._counted

    def _fail(self, cid: str, reason: str) -> None:
        waiting = self._waiters.pop(cid, [])
        self._requests.pop(cid, None)
        if waiting:
            self.stats.requests_failed += 1
        for fut in waiting:
            if not fut.done():
                fut.set_exception(BatchRequestFailed(reason))


def _mark(batches: list[dict[str, Any]], batch_id: str, state: str, by_id: dict[str, BatchOutcome]) -> None:
    """Record a finished batch's state and each request's outcome."""
    for b in batches:
        if b["id"] != batch_id:
            continue
        b["state"], b["ended_at"] = state, round(time.time(), 3)
        for cid, req in b["requests"].items():
            o = by_id.get(cid)
            if o is not None and o.body is not None:
                req.update(outcome="succeeded", error=None)
            elif _unprocessed(o):
                req.update(outcome="unprocessed", error=o.error if o is not None else "no result")
            else:
                req.update(outcome="failed", error=o.error if o is not None else None)


def _completion(req: BatchRequest, body: dict[str, Any]) -> Completion:
    """A batch result read like a synchronous answer, priced at the batch price."""
    from benchctl.gateway.wire import summarize

    s = summarize(req.call.wire_api, False, orjson.dumps(body), 200)
    if s.error:
        raise BatchRequestFailed(f"{req.model}: {s.error}")
    served = s.served_model or req.model.name
    cost = batch_cost(req.model, served, s.usage)
    latency = time.perf_counter() - req.asked_at
    return Completion(s.text, s.usage, cost, served, s.stop_reason, s.refusal, latency)


def batch_cost(model: ModelId, served: str | None, usage: dict[str, int]) -> float | None:
    from benchctl.gateway.complete import _price_table

    return _price_table().cost_served(str(model), served, usage, batch=True)


def estimate_usd(req: BatchRequest, max_tokens: int) -> float | None:
    """A generous bound on a request's cost before it is sent, for the cost cap: its body's UTF-8
    bytes / 3 as input tokens (English runs ~4 bytes a token, CJK ~3), max_tokens as output,
    at the batch price. None: the model has no price (counted 0, as an unpriced call is)."""
    from benchctl.gateway.complete import _price_table

    tokens_in = len(orjson.dumps(req.call.body)) // 3 + 1
    usage = {"input_tokens": tokens_in, "output_tokens": max_tokens}
    return _price_table().cost(str(req.model), usage, batch=True)


def status_line(p: BatchProgress) -> str:
    return f"batch {p.batch_id} ({p.model}): {p.done} / {p.total} requests done, {p.state}"


def batch_lines(stats: BatchStats, where: str) -> list[str]:
    """What a session's summary says about its batches; `where`: its batches.json files."""
    out = [
        f"batch: {stats.requests_submitted} request(s) submitted in {stats.batches_submitted} batch(es) at "
        f"batch prices, {stats.requests_resumed} answered by batches of an earlier session; ids in {where}"
    ]
    if stats.requests_resubmitted:
        out.append(f"batch: {stats.requests_resubmitted} request(s) resubmitted (their batch expired or was cancelled)")
    if stats.requests_failed:
        out.append(
            f"batch: {stats.requests_failed} request(s) failed at the vendor; their items are unscored with the "
            f"reason (judge logs), and a rerun asks them again"
        )
    return out
