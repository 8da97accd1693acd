"""benchctl's batch clients (benchctl.gateway.batch) against the fake upstream's batch APIs, for each
of the three vendors: submit, progress, results matched by custom id (the fake shuffles them),
per-request failures, expiry, cancellation, transient errors retried, keys kept out of errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from benchctl.gateway import wire
from benchctl.gateway.batch import (
    CANCELLED,
    EXPIRED,
    BatchClient,
    BatchItem,
    BatchOutcome,
    BatchUnsupported,
    batch_client,
)
from benchctl.gateway.batch.anthropic import AnthropicBatches
from benchctl.gateway.batch.gemini import GeminiBatches
from benchctl.gateway.batch.openai import OpenAIBatches
from benchctl.gateway.complete import WIRE_FOR_PROVIDER, ModelCallError, build_request
from benchctl.gateway.upstream import ModelId
from benchctl.testing import FakeUpstreamServer

KEY = "sk-test-batchwire-0123456789"
N = 5
SCRIPT = {"turns": [{"text": f"answer-{i}", "usage": {"input_tokens": 100 + i, "output_tokens": 10}} for i in range(N)]}
MODELS = ["anthropic/claude-sonnet-4-5", "openai/gpt-5", "google/gemini-2.5-pro"]


@pytest.fixture
def up(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstreamServer]:
    with FakeUpstreamServer(SCRIPT) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
            monkeypatch.setenv(var, KEY)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        yield server


def _items(model: ModelId, n: int = N) -> list[BatchItem]:
    items = []
    for i in range(n):
        call = build_request(model, [{"role": "user", "content": f"question {i}"}], "Grade strictly.", 256, 0.0)
        assert call.body is not None
        items.append(BatchItem(f"item-{i}", call.body))
    return items


def _text(model: ModelId, outcome: BatchOutcome) -> str:
    assert outcome.body is not None, outcome.error
    import orjson

    return wire.summarize(WIRE_FOR_PROVIDER[model.provider], False, orjson.dumps(outcome.body)).text


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


@pytest.mark.parametrize("model_id", MODELS)
def test_submit_progress_and_results_matched_by_custom_id(up: FakeUpstreamServer, model_id: str) -> None:
    model = ModelId.parse(model_id)
    up.batches.per_poll = 2

    async def go() -> tuple[list, list[BatchOutcome]]:
        client = batch_client(model)
        batch_id = await client.submit(model, _items(model))
        seen = []
        while True:
            status = await client.status(batch_id)
            seen.append((status.state, status.done, status.total))
            if status.state != "in_progress":
                break
        return seen, await client.results(batch_id)

    seen, outcomes = _run(go())
    # Anthropic counts every request as processing until the batch ends; the others show progress.
    progress = (
        [(s, 0, N) for s in ("in_progress",) * 2]
        if model.provider == "anthropic"
        else [
            ("in_progress", 2, N),
            ("in_progress", 4, N),
        ]
    )
    assert seen == [*progress, ("ended", N, N)]
    ids = [o.custom_id for o in outcomes]
    assert sorted(ids) == [f"item-{i}" for i in range(N)]
    assert ids != sorted(ids)  # the fake answered shuffled: matching by order would pair them wrong
    for o in outcomes:  # item-i was processed i-th, so it got script turn i: read like a sync answer
        assert o.error is None and _text(model, o) == f"answer-{o.custom_id[-1]}"
    assert (up.batches.created, up.batches.requests) == (1, N)
    bodies = [r.body for r in up.requests if r.wire_api == "batch" and r.method == "POST" and r.body]
    assert not any(KEY in str(b) for b in bodies)


@pytest.mark.parametrize("model_id", MODELS)
def test_a_failed_request_is_an_error_outcome_and_the_rest_succeed(up: FakeUpstreamServer, model_id: str) -> None:
    model = ModelId.parse(model_id)
    up.batches.fail("item-1", status=400, message="prompt is too long: 250000 tokens")

    async def go() -> dict[str, BatchOutcome]:
        client = batch_client(model)
        batch_id = await client.submit(model, _items(model))
        assert (await client.status(batch_id)).state == "ended"
        return {o.custom_id: o for o in await client.results(batch_id)}

    outcomes = _run(go())
    failed = outcomes.pop("item-1")
    assert failed.body is None and failed.error is not None
    assert failed.error.startswith("errored") and "prompt is too long: 250000 tokens" in failed.error
    assert len(outcomes) == N - 1 and all(o.body is not None and o.error is None for o in outcomes.values())


@pytest.mark.parametrize("model_id", MODELS)
def test_expired_batch_gives_the_unprocessed_requests_back_as_expired(up: FakeUpstreamServer, model_id: str) -> None:
    model = ModelId.parse(model_id)
    up.batches.expire_after = 2

    async def go() -> tuple[str, list[BatchOutcome]]:
        client = batch_client(model)
        batch_id = await client.submit(model, _items(model))
        return (await client.status(batch_id)).state, await client.results(batch_id)

    state, outcomes = _run(go())
    assert state == "expired"
    assert sorted(o.custom_id for o in outcomes) == [f"item-{i}" for i in range(N)]
    expired = sorted(o.custom_id for o in outcomes if o.error == EXPIRED)
    # Gemini keeps no results of an expired batch; the others return what was done before the window closed
    assert expired == (
        [f"item-{i}" for i in range(N)] if model.provider == "google" else ["item-2", "item-3", "item-4"]
    )


@pytest.mark.parametrize("model_id", MODELS)
def test_cancel(up: FakeUpstreamServer, model_id: str) -> None:
    model = ModelId.parse(model_id)
    up.batches.per_poll = 1

    async def go() -> tuple[str, list[BatchOutcome]]:
        client = batch_client(model)
        batch_id = await client.submit(model, _items(model))
        assert (await client.status(batch_id)).state == "in_progress"  # item-0 done
        await client.cancel(batch_id)
        return (await client.status(batch_id)).state, await client.results(batch_id)

    state, outcomes = _run(go())
    assert state == "cancelled"
    by_id = {o.custom_id: o for o in outcomes}
    assert by_id["item-0"].error is None and _text(model, by_id["item-0"]) == "answer-0"
    assert [by_id[f"item-{i}"].error for i in range(1, N)] == [CANCELLED] * (N - 1)


@pytest.mark.parametrize("model_id", MODELS)
def test_transient_errors_are_retried(up: FakeUpstreamServer, model_id: str) -> None:
    model = ModelId.parse(model_id)

    async def go() -> str:
        client = batch_client(model)
        up.batches.fail_next(503, times=2)  # the create (or upload) is refused twice, then taken
        batch_id = await client.submit(model, _items(model, 2))
        up.batches.fail_next(500, times=2)
        up.batches.fail_next(429)
        return (await client.status(batch_id)).state

    assert _run(go()) == "ended"
    assert up.batches.created == 1


@pytest.mark.parametrize("model_id", MODELS)
def test_a_create_answered_500_is_not_repeated_and_errors_name_no_key(up: FakeUpstreamServer, model_id: str) -> None:
    model = ModelId.parse(model_id)
    before = len(up.requests)
    # a 500 on the create may mean the batch exists: creating it again would bill it twice
    up.batches.fail_next(500, message=f"internal error for key {KEY}", where="atch")  # batches, not files
    if model.provider == "openai":  # the file upload is retried (it creates nothing billable)
        up.batches.fail_next(500, where="/files", times=2)
    with pytest.raises(ModelCallError) as e:
        _run(batch_client(model).submit(model, _items(model, 1)))
    assert KEY not in str(e.value) and "[REDACTED]" in str(e.value) and str(model) in str(e.value)
    creates = [r for r in up.requests[before:] if r.method == "POST" and "/files" not in r.path]
    assert len(creates) == 1 and up.batches.created == 0
    uploads = [r for r in up.requests[before:] if r.method == "POST" and r.path == "/v1/files"]
    assert len(uploads) == (3 if model.provider == "openai" else 0)


def test_a_vendor_message_quoting_the_key_is_redacted_in_outcomes(up: FakeUpstreamServer) -> None:
    model = ModelId.parse("anthropic/claude-sonnet-4-5")
    up.batches.fail("item-0", message=f"bad request from {KEY}")

    async def go() -> list[BatchOutcome]:
        client = batch_client(model)
        batch_id = await client.submit(model, _items(model, 1))
        await client.status(batch_id)
        return await client.results(batch_id)

    (outcome,) = _run(go())
    assert outcome.error is not None and KEY not in outcome.error and "[REDACTED]" in outcome.error


def test_factory_picks_the_vendor_client_and_refuses_the_others(up: FakeUpstreamServer) -> None:
    kinds = [type(batch_client(ModelId.parse(m))) for m in MODELS]
    assert kinds == [AnthropicBatches, OpenAIBatches, GeminiBatches]
    clients: list[BatchClient] = [AnthropicBatches(), OpenAIBatches(), GeminiBatches()]  # the protocol, typed
    assert len(clients) == 3
    with pytest.raises(BatchUnsupported, match="openai-compatible/vllm: no batch API.*run without --batch"):
        batch_client(ModelId.parse("openai-compatible/vllm"))
    with pytest.raises(BatchUnsupported, match="scripted"):
        batch_client(ModelId.parse("scripted/judge.json"))


def test_factory_without_a_key_says_which_variable_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelCallError, match="set OPENAI_API_KEY"):
        batch_client(ModelId.parse("openai/gpt-5"))


def test_openai_batch_that_fails_validation_reports_every_request(up: FakeUpstreamServer) -> None:
    model = ModelId.parse("openai/gpt-5")
    items = [BatchItem("a", {"model": "gpt-5", "input": "x"}), BatchItem("b", {"model": "gpt-4.1", "input": "y"})]

    async def go() -> tuple[str, list[BatchOutcome]]:
        client = batch_client(model)
        batch_id = await client.submit(model, items)
        return (await client.status(batch_id)).state, await client.results(batch_id)

    state, outcomes = _run(go())
    assert state == "failed"
    assert sorted(o.custom_id for o in outcomes) == ["a", "b"]
    assert all(o.error and "one model" in o.error for o in outcomes)
