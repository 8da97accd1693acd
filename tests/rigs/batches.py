"""An in-memory BatchClient for the batch collector's tests (no tests here): it answers each request
with the fake judge in the request's own wire API, and can hold batches in progress, fail chosen
requests, expire a batch half done, and always returns results shuffled (matched by custom id).

The end-to-end tests (tests/grading/test_batch_e2e.py) use the fake upstream's batch APIs through
the real clients instead; this one makes the collector's rules quick to test one by one."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from benchctl.gateway.batch import EXPIRED, BatchItem, BatchOutcome, BatchStatus
from benchctl.gateway.complete import WIRE_FOR_PROVIDER, reset_upstreams
from benchctl.gateway.scripted.request import script_request
from benchctl.gateway.upstream import ModelId, UpstreamCall
from benchctl.gateway.wire import encode
from benchctl.gateway.wire.neutral import Reply, Usage
from benchctl.grading.fake_judge import judge as fake_judge
from benchctl.testing.fake_upstream import FakeUpstreamServer


@dataclass
class MemoryBatch:
    model: ModelId
    items: list[BatchItem]
    state: str = "in_progress"
    outcomes: dict[str, BatchOutcome] = field(default_factory=dict)


class MemoryBatches:
    """One vendor's batch API in memory, shared by the collectors of several "sessions"."""

    def __init__(self) -> None:
        self.batches: dict[str, MemoryBatch] = {}
        self.created = 0
        self.hold = False  # keep batches in progress (a session waiting) until released
        self.fails: Callable[[dict[str, Any]], str | None] = lambda body: None  # body -> error, or None
        self.expire_next = False  # the next batch expires with only its first half processed
        self.on_status: Callable[[str], None] | None = None
        self.rng = random.Random(7)

    def client(self, model: ModelId) -> MemoryBatches:
        return self

    async def submit(self, model: ModelId, items: Sequence[BatchItem]) -> str:
        self.created += 1
        batch_id = f"mb_{self.created:03d}"
        self.batches[batch_id] = MemoryBatch(model, list(items))
        return batch_id

    async def status(self, batch_id: str) -> BatchStatus:
        if self.on_status is not None:
            self.on_status(batch_id)
        b = self.batches[batch_id]
        if b.state == "in_progress" and not self.hold:
            self._run(b)
        done = len(b.outcomes)
        return BatchStatus(b.state, done, len(b.items))  # type: ignore[arg-type]

    async def results(self, batch_id: str) -> list[BatchOutcome]:
        b = self.batches[batch_id]
        got = list(b.outcomes.values())
        self.rng.shuffle(got)  # never in submission order
        return got

    async def cancel(self, batch_id: str) -> None:
        self.batches[batch_id].state = "cancelled"

    def _run(self, b: MemoryBatch) -> None:
        items = b.items
        if self.expire_next:
            self.expire_next = False
            b.state = "expired"
            half = len(items) // 2
            for it in items[half:]:
                b.outcomes[it.custom_id] = BatchOutcome(it.custom_id, None, EXPIRED)
            items = items[:half]
        else:
            b.state = "ended"
        for it in items:
            error = self.fails(it.body)
            body = None if error else answer(b.model, it.body)
            b.outcomes[it.custom_id] = BatchOutcome(it.custom_id, body, error)


def answer(model: ModelId, body: dict[str, Any]) -> dict[str, Any]:
    """The fake judge's answer to `body`, as the response body of the model's wire API."""
    wire_api = WIRE_FOR_PROVIDER[model.provider]
    req = script_request(UpstreamCall(wire_api, "POST", "/", model, body, False))
    text = fake_judge(req)["text"]
    reply = Reply(text=text, usage=Usage(input_tokens=1000, output_tokens=100), model=model.name)
    _, pieces = encode(wire_api, reply, stream=False, body=body)
    return dict(orjson.loads(b"".join(pieces)))


async def wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


@contextmanager
def vendor_upstream(monkeypatch: pytest.MonkeyPatch, script: Any = None, **kw: Any) -> Iterator[FakeUpstreamServer]:
    """The fake upstream as all three vendors (base URLs and keys set), batch APIs included."""
    with FakeUpstreamServer(script, **kw) as server:
        for var, url in (("ANTHROPIC", server.url), ("OPENAI", server.url + "/v1"), ("GOOGLE_GEMINI", server.url)):
            monkeypatch.setenv(f"{var}_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
        monkeypatch.setenv("GEMINI_API_KEY", "gm-test-0123456789")
        reset_upstreams()  # judge upstreams are cached per model: this server's, not an earlier one's
        try:
            yield server
        finally:
            reset_upstreams()
