"""Scripted replies in each vendor wire format, parsed by the vendor's own SDK over real HTTP."""

from __future__ import annotations

import json

import anthropic
import pytest

from benchctl.testing import FakeUpstreamServer

TOOL_INPUT = {"command": "ls -la /data | head -n 3", "nested": {"k": [1, 2.5, None, True]}, "unicode": "é✓"}
LONG = "The quick brown fox jumps over the lazy dog. " * 12


def _script() -> dict:
    return {
        "turns": [
            {
                "text": "Let me look.",
                "tool_calls": [
                    {"name": "bash", "input": TOOL_INPUT},
                    {"name": "read_file", "input": {"path": "/data/a.txt"}},
                ],
                "usage": {
                    "input_tokens": 1200,
                    "output_tokens": 34,
                    "cache_read_tokens": 800,
                    "cache_write_tokens": 50,
                },
            },
            {"text": LONG, "chunks": 7},
            {"refusal": True, "text": "I can't help with that."},
            {"error": {"status": 429, "message": "slow down", "retry_after": 2}},
            {"text": "done", "stop_reason": "max_tokens"},
        ],
        "after_end": "error",
    }


@pytest.fixture()
def up():
    with FakeUpstreamServer(_script()) as server:
        yield server


# ---------------------------------------------------------------- Anthropic Messages


def _anthropic(up: FakeUpstreamServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=up.url, api_key="sk-ant-test", max_retries=0)


def _ask(client: anthropic.Anthropic, stream: bool):
    kw = dict(model="claude-test", max_tokens=512, messages=[{"role": "user", "content": "investigate /data"}])
    if not stream:
        return client.messages.create(**kw)
    with client.messages.stream(**kw) as s:
        events = [e.type for e in s]
        msg = s.get_final_message()
    msg.seen_events = events  # type: ignore[attr-defined]
    return msg


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_turns_in_order(up: FakeUpstreamServer, stream: bool) -> None:
    c = _anthropic(up)
    m = _ask(c, stream)
    assert m.stop_reason == "tool_use"
    assert [b.type for b in m.content] == ["text", "tool_use", "tool_use"]
    assert m.content[0].text == "Let me look."
    assert m.content[1].name == "bash" and m.content[1].input == TOOL_INPUT
    assert m.content[2].input == {"path": "/data/a.txt"}
    assert m.content[1].id.startswith("toolu_") and m.content[1].id != m.content[2].id
    assert m.usage.input_tokens == 1200 and m.usage.output_tokens == 34
    assert m.usage.cache_read_input_tokens == 800 and m.usage.cache_creation_input_tokens == 50

    m = _ask(c, stream)
    assert m.stop_reason == "end_turn" and m.content[0].text == LONG
    assert m.usage.output_tokens > 50  # estimated from the text length
    if stream:
        assert m.seen_events.count("text") >= 7

    m = _ask(c, stream)
    assert m.stop_reason == "refusal" and m.content[0].text == "I can't help with that."

    with pytest.raises(anthropic.RateLimitError) as err:
        _ask(c, stream)
    assert err.value.status_code == 429
    assert err.value.response.headers["retry-after"] == "2"
    assert err.value.body["error"] == {"type": "rate_limit_error", "message": "slow down"}

    m = _ask(c, stream)
    assert m.stop_reason == "max_tokens"

    with pytest.raises(anthropic.BadRequestError, match="script exhausted"):
        _ask(c, stream)


def test_anthropic_stream_event_sequence(up: FakeUpstreamServer) -> None:
    """The raw SSE sequence Claude Code parses, in the documented order."""
    c = _anthropic(up)
    stream = c.messages.create(
        model="claude-test", max_tokens=64, stream=True, messages=[{"role": "user", "content": "go"}]
    )
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == 3 == kinds.count("content_block_stop")
    json_deltas = [
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta" and e.index == 1
    ]
    assert json_deltas[0] == "" and json.loads("".join(json_deltas)) == TOOL_INPUT
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens == 34
    assert events[0].message.usage.input_tokens == 1200


def test_anthropic_async_client_and_count_tokens(up: FakeUpstreamServer) -> None:
    import asyncio

    async def go():
        c = anthropic.AsyncAnthropic(base_url=up.url, api_key="sk-ant-test", max_retries=0)
        n = await c.messages.count_tokens(model="claude-test", messages=[{"role": "user", "content": "x" * 400}])
        m = await c.messages.create(model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "x"}])
        await c.close()
        return n, m

    n, m = asyncio.run(go())
    assert n.input_tokens >= 100
    assert m.content[1].input == TOOL_INPUT  # count_tokens consumed no turn
    assert [r.wire_api for r in up.requests] == ["anthropic_count_tokens", "anthropic_messages"]


# ---------------------------------------------------------------- OpenAI Responses

import openai  # noqa: E402


def _openai(up: FakeUpstreamServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=up.url + "/v1", api_key="sk-test", max_retries=0)


def _respond(client: openai.OpenAI, stream: bool):
    kw = dict(model="gpt-test", input=[{"role": "user", "content": "investigate /data"}], instructions="be brief")
    if not stream:
        return client.responses.create(**kw)
    with client.responses.stream(**kw) as s:
        events = [e.type for e in s]
        r = s.get_final_response()
    r.seen_events = events  # type: ignore[attr-defined]
    return r


@pytest.mark.parametrize("stream", [False, True])
def test_responses_turns_in_order(up: FakeUpstreamServer, stream: bool) -> None:
    c = _openai(up)
    r = _respond(c, stream)
    assert r.status == "completed"
    assert [o.type for o in r.output] == ["message", "function_call", "function_call"]
    assert r.output[0].content[0].text == "Let me look."
    fc = r.output[1]
    assert fc.name == "bash" and json.loads(fc.arguments) == TOOL_INPUT
    assert fc.call_id.startswith("call_") and fc.call_id != r.output[2].call_id
    # OpenAI counts cached tokens inside input_tokens
    assert r.usage.input_tokens == 2000 and r.usage.input_tokens_details.cached_tokens == 800
    assert r.usage.output_tokens == 34 and r.usage.total_tokens == 2034
    if stream:
        assert r.seen_events[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
        assert "response.function_call_arguments.delta" in r.seen_events
        assert r.seen_events[-1] == "response.completed"

    r = _respond(c, stream)
    assert r.output_text == LONG
    if stream:
        assert r.seen_events.count("response.output_text.delta") == 7

    r = _respond(c, stream)
    assert r.output[0].content[0].type == "refusal" and r.output[0].content[0].refusal == "I can't help with that."

    with pytest.raises(openai.RateLimitError) as err:
        _respond(c, stream)
    assert err.value.status_code == 429 and err.value.response.headers["retry-after"] == "2"
    assert err.value.body["message"] == "slow down"

    if stream:
        # The API ends a truncated stream with response.incomplete (the SDK helper wants .completed).
        last = list(c.responses.create(model="gpt-test", input="go", stream=True))[-1]
        assert last.type == "response.incomplete" and last.response.status == "incomplete"
    else:
        r = _respond(c, stream)
        assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"


def test_responses_raw_stream_arguments_reassemble(up: FakeUpstreamServer) -> None:
    events = list(_openai(up).responses.create(model="gpt-test", input="go", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    args = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta" and e.output_index == 1
    )
    assert json.loads(args) == TOOL_INPUT
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i.type for i in done] == ["message", "function_call", "function_call"]
    assert events[-1].response.usage.output_tokens == 34


# ---------------------------------------------------------------- OpenAI chat completions


@pytest.mark.parametrize("stream", [False, True])
def test_chat_turns_in_order(up: FakeUpstreamServer, stream: bool) -> None:
    c = _openai(up)
    kw = dict(model="open-weights", messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "go"}])

    def ask():
        if not stream:
            return c.chat.completions.create(**kw)
        with c.chat.completions.stream(**kw, stream_options={"include_usage": True}) as s:
            for _ in s:
                pass
            return s.get_final_completion()

    r = ask()
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and msg.content == "Let me look."
    assert [t.function.name for t in msg.tool_calls] == ["bash", "read_file"]
    assert json.loads(msg.tool_calls[0].function.arguments) == TOOL_INPUT
    assert msg.tool_calls[0].id != msg.tool_calls[1].id
    assert r.usage.prompt_tokens == 2000 and r.usage.completion_tokens == 34
    assert r.usage.prompt_tokens_details.cached_tokens == 800

    r = ask()
    assert r.choices[0].message.content == LONG and r.choices[0].finish_reason == "stop"

    if stream:
        # The SDK's stream helper raises on a content-filter finish, as it would against OpenAI.
        with pytest.raises(openai.ContentFilterFinishReasonError):
            ask()
    else:
        r = ask()
        assert r.choices[0].finish_reason == "content_filter"
        assert r.choices[0].message.refusal == "I can't help with that." and r.choices[0].message.content is None

    with pytest.raises(openai.RateLimitError):
        ask()
    if stream:
        with pytest.raises(openai.LengthFinishReasonError):
            ask()
    else:
        assert ask().choices[0].finish_reason == "length"


@pytest.mark.parametrize("include_usage", [False, True])
def test_chat_raw_stream_usage_only_when_asked(up: FakeUpstreamServer, include_usage: bool) -> None:
    """As OpenAI: with stream_options.include_usage a last chunk with no choices carries the usage and
    every other chunk has `"usage": null`; without it no chunk has a usage field at all."""
    extra = {"stream_options": {"include_usage": True}} if include_usage else {}
    with _openai(up).chat.completions.with_streaming_response.create(
        model="m", messages=[{"role": "user", "content": "go"}], stream=True, **extra
    ) as raw:
        events = [
            json.loads(line[6:]) for line in raw.iter_lines() if line.startswith("data: ") and line != "data: [DONE]"
        ]
    chunks = [openai.types.chat.ChatCompletionChunk.model_validate(e) for e in events]
    assert chunks[0].choices[0].delta.role == "assistant"
    args = "".join(
        tc.function.arguments or ""
        for ch in chunks
        if ch.choices
        for tc in ch.choices[0].delta.tool_calls or []
        if tc.index == 0
    )
    assert json.loads(args) == TOOL_INPUT
    if include_usage:
        assert events[-1]["choices"] == [] and chunks[-1].usage.completion_tokens == 34
        assert all("usage" in e and e["usage"] is None for e in events[:-1])
        assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
    else:
        assert all("usage" not in e for e in events)
        assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


# ---------------------------------------------------------------- Gemini

from google import genai  # noqa: E402
from google.genai import errors as genai_errors  # noqa: E402
from google.genai import types as genai_types  # noqa: E402


def _gemini(up: FakeUpstreamServer) -> genai.Client:
    return genai.Client(
        api_key="g-test",
        http_options=genai_types.HttpOptions(base_url=up.url, retry_options=genai_types.HttpRetryOptions(attempts=1)),
    )


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_turns_in_order(up: FakeUpstreamServer, stream: bool) -> None:
    c = _gemini(up)
    cfg = genai_types.GenerateContentConfig(system_instruction="be brief", max_output_tokens=100)

    def ask():
        if not stream:
            return [c.models.generate_content(model="gemini-test", contents="investigate /data", config=cfg)]
        return list(c.models.generate_content_stream(model="gemini-test", contents="investigate /data", config=cfg))

    chunks = ask()
    parts = [p for ch in chunks for p in ch.candidates[0].content.parts]
    assert "".join(p.text for p in parts if p.text) == "Let me look."
    calls = [p.function_call for p in parts if p.function_call]
    assert [fc.name for fc in calls] == ["bash", "read_file"] and calls[0].args == TOOL_INPUT
    assert calls[0].id and calls[0].id != calls[1].id
    last = chunks[-1]
    assert last.candidates[0].finish_reason == genai_types.FinishReason.STOP
    assert last.usage_metadata.prompt_token_count == 2000 and last.usage_metadata.candidates_token_count == 34
    assert last.usage_metadata.cached_content_token_count == 800

    chunks = ask()
    assert "".join(ch.text or "" for ch in chunks) == LONG
    assert len(chunks) == (8 if stream else 1)  # 7 text pieces + the finishing chunk

    chunks = ask()
    assert chunks[-1].candidates[0].finish_reason == genai_types.FinishReason.SAFETY
    assert chunks[-1].candidates[0].content is None

    with pytest.raises(genai_errors.ClientError) as err:
        ask()
    assert err.value.code == 429 and err.value.status == "RESOURCE_EXHAUSTED" and err.value.message == "slow down"

    assert ask()[-1].candidates[0].finish_reason == genai_types.FinishReason.MAX_TOKENS
    if stream:
        assert up.requests[0].query == "alt=sse" and up.requests[0].path.endswith(":streamGenerateContent")
    assert up.requests[0].body["systemInstruction"]["parts"][0]["text"] == "be brief"


def test_gemini_stream_without_alt_sse_is_a_json_array(up: FakeUpstreamServer) -> None:
    import httpx2

    r = httpx2.post(
        up.url + "/v1beta/models/g:streamGenerateContent",
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    )
    arr = r.json()
    assert isinstance(arr, list) and arr[-1]["candidates"][0]["finishReason"] == "STOP"
    assert arr[-1]["candidates"][0]["content"]["parts"][0]["functionCall"]["args"] == TOOL_INPUT


# ---------------------------------------------------------------- agreement with the gateway's parser


@pytest.mark.parametrize("wire_api", ["anthropic_messages", "openai_responses", "openai_chat", "gemini"])
@pytest.mark.parametrize("stream", [False, True])
def test_gateway_summarize_reads_what_we_encode(wire_api: str, stream: bool) -> None:
    """The gateway records usage/cost from benchctl.gateway.wire.summarize: it must read our output exactly."""
    from benchctl.gateway.scripted import ScriptedUpstream
    from benchctl.gateway.upstream import ModelId, UpstreamCall
    from benchctl.gateway.wire import summarize

    up = ScriptedUpstream(
        {
            "turns": [
                {
                    "text": LONG,
                    "tool_calls": [{"name": "bash", "input": TOOL_INPUT}],
                    "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 50, "reasoning_tokens": 3},
                },
                {"refusal": True, "text": "no"},
            ]
        }
    )
    # (stream_options as the gateway forwards every chat stream: a chat stream has usage only when asked)
    body = {"model": "m", "messages": [], "stream_options": {"include_usage": True}}
    call = UpstreamCall(
        wire_api,
        "POST",
        "/x",
        ModelId("scripted", "m"),
        body,  # type: ignore[arg-type]
        stream,
        "alt=sse" if stream else "",
    )
    r = up.render(call)
    s = summarize(wire_api, stream, b"".join(r.pieces), r.status)
    assert s.error is None and s.text == LONG and not s.refusal
    assert [(t["name"], t["input"]) for t in s.tool_calls] == [("bash", TOOL_INPUT)]
    assert s.usage["input_tokens"] == 100 and s.usage["cached_input_tokens"] == 50
    assert s.usage["output_tokens"] == 20
    r = up.render(call)
    assert summarize(wire_api, stream, b"".join(r.pieces), r.status).refusal


# ---------------------------------------------------------------- thinking / reasoning

THINK = {
    "turns": [
        {
            "thinking": "The user wants a listing; " * 6,
            "text": "Listing now.",
            "tool_calls": [{"name": "bash", "input": {"command": "ls"}}],
            "usage": {"input_tokens": 10, "output_tokens": 60, "reasoning_tokens": 40},
        }
    ]
}


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_in_every_sdk(stream: bool) -> None:
    thought = THINK["turns"][0]["thinking"]
    with FakeUpstreamServer(THINK) as up:
        m = _ask(_anthropic(up), stream)
        assert [b.type for b in m.content] == ["thinking", "text", "tool_use"]
        assert m.content[0].thinking == thought and m.content[0].signature

        r = _respond(_openai(up), stream)
        assert [o.type for o in r.output] == ["reasoning", "message", "function_call"]
        assert r.output[0].summary[0].text == thought and r.output_text == "Listing now."
        assert r.output[0].encrypted_content is None  # not asked for
        if stream:
            assert "response.reasoning_summary_text.delta" in r.seen_events  # type: ignore[attr-defined]
        assert r.usage.output_tokens_details.reasoning_tokens == 40 and r.usage.output_tokens == 60

        kw = dict(model="g", contents="x")
        c = _gemini(up)
        chunks = list(c.models.generate_content_stream(**kw)) if stream else [c.models.generate_content(**kw)]
        parts = [p for ch in chunks for p in ch.candidates[0].content.parts]
        assert "".join(p.text for p in parts if p.thought) == thought
        assert "".join(p.text for p in parts if p.text and not p.thought) == "Listing now."
        assert chunks[-1].usage_metadata.thoughts_token_count == 40
        assert chunks[-1].usage_metadata.candidates_token_count == 20

        oc = _openai(up)
        if stream:
            deltas = [
                ch.choices[0].delta
                for ch in oc.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}], stream=True
                )
                if ch.choices
            ]
            assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == thought
        else:
            msg = oc.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}]).choices[0].message
            assert msg.reasoning_content == thought and msg.content == "Listing now."


@pytest.mark.parametrize("wire_api", ["anthropic_messages", "openai_responses", "openai_chat", "gemini"])
@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_blocks_read_back_one_for_one(wire_api: str, stream: bool) -> None:
    """A turn's reasoning blocks, encoded in each wire API and read back by the gateway's reader,
    stay the blocks they were (in order, each with its own signature), streamed in small pieces or
    whole; chat completions has one field for it: one block of the visible text."""
    from benchctl.gateway.scripted import ScriptedUpstream
    from benchctl.gateway.upstream import ModelId, UpstreamCall
    from benchctl.gateway.wire import summarize

    sigs = ["c2lnLW9uZQ==", "c2lnLXR3bw==", "cmVkYWN0ZWQ="]
    blocks = [
        {"text": "first thought, long enough to stream in pieces", "signature": sigs[0]},
        {"text": "second thought", "signature": sigs[1], "summary": True},
        {"redacted": True, "signature": sigs[2]},
    ]
    turn = {"reasoning": blocks, "text": "Done.", "chunks": 6}
    body = {"model": "m", "include": ["reasoning.encrypted_content"], "stream_options": {"include_usage": True}}
    call = UpstreamCall(wire_api, "POST", "/x", ModelId("scripted", "m"), body, stream, "alt=sse")
    r = ScriptedUpstream({"turns": [turn]}).render(call)
    s = summarize(wire_api, stream, b"".join(r.pieces), r.status)
    got = [(p.text, p.redacted, p.signature) for p in s.reasoning]
    if wire_api == "openai_chat":
        assert got == [(blocks[0]["text"] + "\n\n" + blocks[1]["text"], False, None)]
    else:
        assert got == [(blocks[0]["text"], False, sigs[0]), (blocks[1]["text"], False, sigs[1]), ("", True, sigs[2])]
    # the summary flag says how Responses carried the text (summary_text, not reasoning_text)
    summaries = [p.summary for p in s.reasoning]
    assert summaries == ([False, True, False] if wire_api == "openai_responses" else [False] * len(s.reasoning))
    assert s.text == "Done."


@pytest.mark.parametrize("wire_api", ["anthropic_messages", "openai_responses", "openai_chat", "gemini"])
@pytest.mark.parametrize("stream", [False, True])
def test_gateway_summarize_keeps_thinking_out_of_text(wire_api: str, stream: bool) -> None:
    from benchctl.gateway.scripted import ScriptedUpstream
    from benchctl.gateway.upstream import ModelId, UpstreamCall
    from benchctl.gateway.wire import summarize

    body = {"model": "m", "stream_options": {"include_usage": True}}  # as the gateway forwards a chat stream
    call = UpstreamCall(
        wire_api,
        "POST",
        "/x",
        ModelId("scripted", "m"),
        body,
        stream,  # type: ignore[arg-type]
        "alt=sse" if stream else "",
    )
    r = ScriptedUpstream(THINK).render(call)
    s = summarize(wire_api, stream, b"".join(r.pieces), r.status)
    assert s.text == "Listing now." and s.usage["output_tokens"] == 60
    assert [t["name"] for t in s.tool_calls] == ["bash"]
    if wire_api != "anthropic_messages":  # Anthropic reports no separate reasoning count
        assert s.usage["reasoning_tokens"] == 40
    # the short form `thinking` is one reasoning block; Responses sends it as a summary, as OpenAI does
    thought = THINK["turns"][0]["thinking"]
    assert [(p.text, p.summary) for p in s.reasoning] == [(thought, wire_api == "openai_responses")]
    # a signature where the wire API has one (made up), none over Responses (no encrypted content was asked)
    assert (s.reasoning[0].signature is not None) == (wire_api in ("anthropic_messages", "gemini"))
