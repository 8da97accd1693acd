"""Prompt caching on the wire: the bodies benchctl builds with cache breakpoints, and the fake
upstream's simulated caches read back through the vendors' own SDKs (so its usage fields are the
ones the SDKs know)."""

from __future__ import annotations

import threading

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from benchctl.gateway.complete import ModelCallError, build_request
from benchctl.gateway.upstream import ModelId
from benchctl.gateway.wire.neutral import TextBlock, cache_segments
from benchctl.testing.fake_upstream import FakeUpstreamServer

pytestmark = pytest.mark.timeout(60)

LONG = "The shared reference report, sentence after sentence. " * 120  # ~6,500 chars: ~1,600 tokens
SHORT = "A short system prompt. " * 20  # ~115 tokens: under every vendor's minimum


@pytest.fixture
def up():
    with FakeUpstreamServer({"turns": [{"text": "ok"}], "after_end": "repeat_last"}) as server:
        yield server


def _blocks(tail: str) -> list[dict[str, object]]:
    return [{"type": "text", "text": LONG, "cache": True}, {"type": "text", "text": tail}]


# ---------------------------------------------------------------- request bodies


def test_anthropic_body_marks_each_breakpoint_with_cache_control() -> None:
    call = build_request(
        ModelId.parse("anthropic/claude-sonnet-4-5"), [{"role": "user", "content": _blocks("F1")}], "sys", 100, 0
    )
    content = call.body["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "F1"},
    ]
    # no breakpoint: the content stays one string, as before
    plain = build_request(
        ModelId.parse("anthropic/claude-sonnet-4-5"), [{"role": "user", "content": "hi"}], None, 100, 0
    )
    assert plain.body["messages"][0]["content"] == "hi"
    five = [{"type": "text", "text": f"part {i} ", "cache": True} for i in range(5)]
    with pytest.raises(ModelCallError, match="5 prompt-cache breakpoints; Anthropic allows 4"):
        build_request(ModelId.parse("anthropic/claude-sonnet-4-5"), [{"role": "user", "content": five}], None, 100, 0)


def test_other_wires_send_the_text_contiguous_and_responses_names_the_prefix() -> None:
    msgs = [{"role": "user", "content": _blocks("F1")}]
    for model, text in (
        ("openai/gpt-5", lambda b: b["input"][0]["content"]),
        ("openai-compatible/m", lambda b: b["messages"][-1]["content"]),
        ("google/gemini-2.5-flash", lambda b: b["contents"][0]["parts"][0]["text"]),
    ):
        body = build_request(ModelId.parse(model), msgs, "sys", 100, 0).body
        assert text(body) == LONG + "F1"
    key = build_request(ModelId.parse("openai/gpt-5"), msgs, "sys", 100, 0).body["prompt_cache_key"]
    other_batch = [{"role": "user", "content": _blocks("F2")}]
    assert build_request(ModelId.parse("openai/gpt-5"), other_batch, "sys", 100, 0).body["prompt_cache_key"] == key
    other_prefix = [{"role": "user", "content": [{"type": "text", "text": "x", "cache": True}]}]
    assert build_request(ModelId.parse("openai/gpt-5"), other_prefix, "sys", 100, 0).body["prompt_cache_key"] != key
    assert (
        "prompt_cache_key"
        not in build_request(ModelId.parse("openai/gpt-5"), [{"role": "user", "content": "hi"}], None, 9, 0).body
    )


def test_cache_segments_merge_between_breakpoints_and_drop_empty_ones() -> None:
    blocks = [TextBlock("a"), TextBlock("b", True), TextBlock("", True), TextBlock("c"), TextBlock("d")]
    assert cache_segments(blocks) == [TextBlock("ab", True), TextBlock("cd")]


# ---------------------------------------------------------------- the fake's caches, through the SDKs


def test_anthropic_sdk_reads_cache_writes_then_reads(up: FakeUpstreamServer) -> None:
    client = anthropic.Anthropic(base_url=up.url, api_key="sk-ant-test", max_retries=0)

    def ask(system_text: str, question: str) -> anthropic.types.Usage:
        system = [{"type": "text", "text": system_text, "cache_control": {"type": "ephemeral"}}]
        msg = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=50, system=system, messages=[{"role": "user", "content": question}]
        )
        return msg.usage

    first, second = ask(LONG, "question one"), ask(LONG, "question two, longer")
    prefix = (len(LONG) + 3) // 4
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (prefix, 0)
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, prefix)
    assert second.input_tokens < 10  # only what follows the breakpoint is uncached input
    short = ask(SHORT, "question")  # under 1,024 tokens: marked, but not cached
    assert (short.cache_creation_input_tokens, short.cache_read_input_tokens) == (0, 0)
    assert ask(LONG + " changed", "question one").cache_read_input_tokens == 0  # another prefix
    cache = up.prompt_cache
    assert cache is not None and (cache.hits, cache.read_tokens) == (1, prefix)
    assert cache.write_tokens == prefix + (len(LONG + " changed") + 3) // 4
    haiku = client.messages.create(  # Haiku needs 2,048 tokens
        model="claude-haiku-4-5",
        max_tokens=50,
        system=[{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "q"}],
    )
    assert haiku.usage.cache_creation_input_tokens == 0


def test_anthropic_requests_in_flight_together_all_miss(up: FakeUpstreamServer) -> None:
    """An entry is readable once its writer is answered: two requests sent at once both write."""
    client = anthropic.Anthropic(base_url=up.url, api_key="sk-ant-test", max_retries=0)
    up.latency = 0.3
    usages: list[anthropic.types.Usage] = []

    def ask() -> None:
        system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
        msg = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=50, system=system, messages=[{"role": "user", "content": "q"}]
        )
        usages.append(msg.usage)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [u.cache_read_input_tokens for u in usages] == [0, 0]
    assert all(u.cache_creation_input_tokens > 1000 for u in usages)


def test_openai_sdk_reads_cached_tokens_in_128_token_steps(up: FakeUpstreamServer) -> None:
    client = openai.OpenAI(base_url=up.url + "/v1", api_key="sk-test", max_retries=0)

    def ask(question: str) -> openai.types.responses.ResponseUsage:
        r = client.responses.create(model="gpt-5", instructions=LONG, input=question, prompt_cache_key="k")
        assert r.usage is not None
        return r.usage

    first, second = ask("question one"), ask("question two")
    assert first.input_tokens_details.cached_tokens == 0
    cached = second.input_tokens_details.cached_tokens
    assert cached >= 1024 and cached % 128 == 0 and cached <= (len(LONG) + 3) // 4
    assert second.input_tokens > cached  # input_tokens counts the whole prompt, the cached part within
    assert up.prompt_cache is not None and up.prompt_cache.hits == 1 and up.prompt_cache.write_tokens == 0
    short = client.responses.create(model="gpt-5", instructions=SHORT, input="q")
    short2 = client.responses.create(model="gpt-5", instructions=SHORT, input="q")
    assert short.usage and short2.usage and short2.usage.input_tokens_details.cached_tokens == 0


def test_gemini_sdk_reads_implicitly_cached_tokens(up: FakeUpstreamServer) -> None:
    client = genai.Client(
        api_key="g-test",
        http_options=genai_types.HttpOptions(base_url=up.url, retry_options=genai_types.HttpRetryOptions(attempts=1)),
    )

    def ask(question: str) -> genai_types.GenerateContentResponseUsageMetadata:
        r = client.models.generate_content(model="gemini-2.5-flash", contents=LONG + question)
        assert r.usage_metadata is not None
        return r.usage_metadata

    first, second = ask("one"), ask("two")
    assert not first.cached_content_token_count
    cached = second.cached_content_token_count
    assert cached is not None and 1024 <= cached <= (second.prompt_token_count or 0)
    # Gemini 2.5 Pro caches from 4,096 tokens: this prompt is too short for it
    pro = [client.models.generate_content(model="gemini-2.5-pro", contents=LONG + q) for q in ("a", "b")]
    assert pro[1].usage_metadata is not None and not pro[1].usage_metadata.cached_content_token_count


def test_anthropic_batch_requests_read_the_cache_too(up: FakeUpstreamServer) -> None:
    """The fake's batch API processes requests one after another through the same cache."""
    client = anthropic.Anthropic(base_url=up.url, api_key="sk-ant-test", max_retries=0)
    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    params = {"model": "claude-sonnet-4-5", "max_tokens": 50, "system": system}
    batch = client.messages.batches.create(
        requests=[
            {"custom_id": f"r{i}", "params": {**params, "messages": [{"role": "user", "content": f"q{i}"}]}}
            for i in range(3)
        ]
    )
    client.messages.batches.retrieve(batch.id)
    usage = {r.custom_id: r.result.message.usage for r in client.messages.batches.results(batch.id)}
    prefix = (len(LONG) + 3) // 4
    assert usage["r0"].cache_creation_input_tokens == prefix
    assert [usage[c].cache_read_input_tokens for c in ("r1", "r2")] == [prefix, prefix]
