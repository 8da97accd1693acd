"""Batch prices: a call through a vendor's batch API costs the model's batch price (half the list
price for all three vendors), and a batch price the table lacks is unknown (None), never 0 or the
list price."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from benchctl.gateway import wire
from benchctl.gateway.batch import BatchItem, batch_client
from benchctl.gateway.complete import build_request, complete, reset_upstreams
from benchctl.gateway.pricing import PriceTable, PriceTableError
from benchctl.gateway.upstream import ModelId
from benchctl.testing import FakeUpstreamServer

USAGE = {"input_tokens": 1_000_000, "output_tokens": 100_000}


def test_batch_price_is_half_the_list_price_for_each_vendor() -> None:
    table = PriceTable()
    for model in ("anthropic/claude-sonnet-4-5-20250929", "openai/gpt-5", "google/gemini-2.5-pro"):
        sync, batch = table.cost(model, USAGE), table.cost(model, USAGE, batch=True)
        assert sync is not None and batch is not None and batch == pytest.approx(sync / 2)
    # Anthropic's batch discount stacks with prompt caching: cache reads and writes at half too
    cached = {"cached_input_tokens": 1_000_000, "cache_write_tokens": 1_000_000}
    assert table.cost("anthropic/claude-haiku-4-5", cached, batch=True) == pytest.approx((0.10 + 1.25) / 2)


def test_unknown_batch_price_is_none_never_zero_or_list() -> None:
    table = PriceTable()
    assert table.cost("anthropic/some-future-model", USAGE, batch=True) is None
    # Gemini publishes no batch price for cached input: a batch call that read the cache is unknown
    assert table.cost("google/gemini-2.5-pro", {"input_tokens": 10, "cached_input_tokens": 10}, batch=True) is None
    assert table.cost("google/gemini-2.5-pro", {"input_tokens": 10, "cached_input_tokens": 10}) is not None
    assert table.cost("openai/gpt-4o", {"cached_input_tokens": 5}, batch=True) is None
    assert table.cost("scripted/x.json", USAGE, batch=True) == 0.0


def test_override_file_takes_batch_keys_and_names_the_allowed_ones(tmp_path: Path) -> None:
    good = tmp_path / "prices.toml"
    good.write_text('["openai/my-model"]\ninput = 2.0\noutput = 4.0\n')  # no batch prices given
    table = PriceTable(good)
    assert table.cost("openai/my-model", {"input_tokens": 1_000_000}) == 2.0
    assert table.cost("openai/my-model", {"input_tokens": 1_000_000}, batch=True) is None
    good.write_text('["openai/my-model"]\ninput = 2.0\nbatch_input = 1.0\n')
    assert PriceTable(good).cost("openai/my-model", {"input_tokens": 1_000_000}, batch=True) == 1.0
    bad = tmp_path / "bad.toml"
    bad.write_text('["openai/x"]\nbatch_inptu = 1.0\n')
    with pytest.raises(PriceTableError, match=r"bad.toml.*batch_inptu.*batch_input"):
        PriceTable(bad)


def test_a_batch_answer_costs_half_the_same_synchronous_call(monkeypatch: pytest.MonkeyPatch) -> None:
    model = ModelId.parse("anthropic/claude-sonnet-4-5")
    turn = {"text": "7/10", "usage": {"input_tokens": 12_000, "output_tokens": 800}}
    with FakeUpstreamServer({"turns": [turn, turn]}) as up:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", up.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-prices-0123456789")
        reset_upstreams()
        try:
            sync = complete(str(model), [{"role": "user", "content": "grade"}], max_tokens=64)
        finally:
            reset_upstreams()
        body = build_request(model, [{"role": "user", "content": "grade"}], None, 64, None).body
        assert body is not None

        async def go() -> dict:
            client = batch_client(model)
            batch_id = await client.submit(model, [BatchItem("one", body)])
            await client.status(batch_id)
            (outcome,) = await client.results(batch_id)
            assert outcome.body is not None
            return outcome.body

        answer = wire.summarize("anthropic_messages", False, orjson.dumps(asyncio.run(go())))
    assert answer.text == sync.text == "7/10" and answer.usage == sync.usage
    batch_cost = PriceTable().cost_served(str(model), answer.served_model, answer.usage, batch=True)
    assert sync.cost_usd == pytest.approx(12_000 * 3 / 1e6 + 800 * 15 / 1e6)
    assert batch_cost == pytest.approx(sync.cost_usd / 2)
