"""Chat-completions streams are priced whether or not the client asked for usage (issue #12).

OpenAI sends a chat stream's usage only under `stream_options.include_usage`. The gateway asks for
it on every chat stream, records and prices it, and hands a client that did not ask the bytes the
vendor would have sent it: compared here, through the real `openai` SDK and the real gateway,
with what the fake upstream (which honours include_usage as OpenAI does) sends for the client's
own request."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from benchctl.executors.run_body import _gateway_summary
from benchctl.gateway import Gateway, GatewayConfig
from benchctl.gateway.clients import openai_client
from benchctl.testing.fake_upstream import FakeUpstreamServer
from benchctl.transcript import TranscriptWriter
from tests.rigs.gateway import Rig, events, make_rig

pytestmark = pytest.mark.timeout(60)
MSG: Any = [{"role": "user", "content": "look"}]
TURN = {
    "text": "Let me look at the data now.",
    "tool_calls": [{"name": "bash", "input": {"command": "ls"}}],
    "chunks": 4,
    "usage": {"input_tokens": 1000, "output_tokens": 200},
}
GPT5_COST = round((1000 * 1.25 + 200 * 10.0) / 1e6, 8)  # prices.toml: openai/gpt-5 input 1.25, output 10
USAGE_OPTIONS: dict[str, Any] = {
    "absent": {},
    "false": {"stream_options": {"include_usage": False}},
    "true": {"stream_options": {"include_usage": True}},
}


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig(tmp_path, monkeypatch, {"turns": [TURN]}, model="openai/gpt-5")


def _same(data: bytes) -> bytes:
    """A stream's bytes without what differs between two answers to one request: ids and times."""
    return re.sub(rb'"(id|created)":("[^"]*"|\d+)', rb'"\1":0', data)


def _raw_stream(client: openai.OpenAI, options: dict[str, Any]) -> bytes:
    with client.chat.completions.with_streaming_response.create(
        model="gpt-5", messages=MSG, stream=True, **options
    ) as response:
        return b"".join(response.iter_bytes())


def _direct(up: FakeUpstreamServer, options: dict[str, Any]) -> bytes:
    """What the vendor (the fake upstream, asked directly) sends for the client's own request."""
    return _raw_stream(openai.OpenAI(base_url=up.url + "/v1", api_key="sk-test", max_retries=0), options)


@pytest.mark.parametrize("asked", ["absent", "false"])
def test_stream_without_include_usage_is_priced_and_the_client_sees_the_vendors_bytes(rig: Rig, asked: str) -> None:
    options = USAGE_OPTIONS[asked]
    client = openai_client(rig.gw, max_retries=0)
    got = _raw_stream(client, options)
    assert rig.up.requests[-1].body["stream_options"] == {"include_usage": True}  # the gateway asked upstream
    assert b'"usage"' not in got and _same(got) == _same(_direct(rig.up, options))
    chunks = list(client.chat.completions.create(model="gpt-5", messages=MSG, stream=True, **options))
    assert chunks and all(c.choices and c.usage is None for c in chunks)  # no usage-only chunk
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    calls = rig.events("model_call")
    assert len(calls) == 2
    for call in calls:
        assert call["outcome"] == "ok" and call["stream"] is True
        assert call["usage"]["input_tokens"] == 1000 and call["usage"]["output_tokens"] == 200
        assert call["cost_usd"] == GPT5_COST
        assert call["response"]["tool_calls"][0]["name"] == "bash"
    meta: Any = {}
    _gateway_summary(rig.gw, meta)  # what a run writes to meta.json
    assert meta["cost_usd"] == pytest.approx(2 * GPT5_COST) and meta["usage"]["output_tokens"] == 400


def test_stream_with_include_usage_is_passed_through_with_its_usage_chunk(rig: Rig) -> None:
    options = USAGE_OPTIONS["true"]
    client = openai_client(rig.gw, max_retries=0)
    got = _raw_stream(client, options)
    assert rig.up.requests[-1].body["stream_options"] == {"include_usage": True}
    assert _same(got) == _same(_direct(rig.up, options))
    events = [orjson.loads(line[6:]) for line in got.split(b"\n") if line.startswith(b"data: {")]
    # OpenAI's shape, untouched: the usage-only chunk last, and a null usage in every other chunk.
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 200
    assert all("usage" in e and e["usage"] is None for e in events[:-1])
    chunks = list(client.chat.completions.create(model="gpt-5", messages=MSG, stream=True, **options))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 200
    assert all(c.usage is None for c in chunks[:-1])
    assert [c["cost_usd"] for c in rig.events("model_call")] == [GPT5_COST, GPT5_COST]


def test_other_stream_options_are_kept(rig: Rig) -> None:
    body = {"model": "gpt-5", "messages": MSG, "stream": True, "stream_options": {"include_obfuscation": False}}
    with openai_client(rig.gw, max_retries=0).chat.completions.with_streaming_response.create(**body) as r:
        got = b"".join(r.iter_bytes())
    assert rig.up.requests[-1].body["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    assert b'"usage"' not in got and rig.events("model_call")[0]["cost_usd"] == GPT5_COST


def test_usage_chunk_cut_across_reads_is_still_taken_out(rig: Rig) -> None:
    """The upstream's reads may cut the usage chunk anywhere: here in its middle, the rest a moment later."""
    later = threading.Event()
    rig.up.split_next(b'"choices":[],"usage":{"prompt', later)
    threading.Timer(0.2, later.set).start()
    got = _raw_stream(openai_client(rig.gw, max_retries=0), {})
    assert b'"usage"' not in got and _same(got) == _same(_direct(rig.up, {}))
    assert rig.events("model_call")[0]["cost_usd"] == GPT5_COST


def test_openai_compatible_server_stream_is_priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: a local OpenAI-compatible server, priced in the researcher's own price file."""
    prices = tmp_path / "prices.toml"
    prices.write_text('["openai-compatible/local"]\ninput = 1.0\noutput = 2.0\n')
    with FakeUpstreamServer({"turns": [TURN]}) as up, TranscriptWriter(tmp_path / "t.jsonl") as transcript:
        monkeypatch.setenv("BENCHCTL_OPENAI_COMPATIBLE_LOCAL_BASE_URL", up.url + "/v1")
        config = GatewayConfig(model="openai-compatible/local", socket_path=tmp_path / "gw.sock", prices_path=prices)
        with Gateway(config, transcript) as gw:
            got = _raw_stream(openai_client(gw, max_retries=0), {})
            assert up.requests[-1].body["stream_options"] == {"include_usage": True}
            assert b"data: [DONE]" in got and b'"usage"' not in got
            assert gw.summary()["cost_usd"] == round((1000 * 1.0 + 200 * 2.0) / 1e6, 8)
    (call,) = events(tmp_path / "t.jsonl", "model_call")
    assert call["usage"]["output_tokens"] == 200 and call["cost_usd"] == round((1000 * 1.0 + 200 * 2.0) / 1e6, 8)
