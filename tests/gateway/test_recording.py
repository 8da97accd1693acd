"""Request deltas (size and exact reconstruction), response summaries for the four wire APIs, prices."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from benchctl.gateway.clients import anthropic_client
from benchctl.gateway.pricing import PriceTable, PriceTableError
from benchctl.gateway.recording import RequestRecorder, reconstruct
from benchctl.gateway.wire import summarize
from tests.rigs.gateway import Rig, make_rig

pytestmark = pytest.mark.timeout(120)

TOOLS = [
    {
        "name": f"tool_{i}",
        "description": "does a thing " * 40,
        "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
    }
    for i in range(8)
]
SYSTEM = "You are an auditing agent. " * 100


def _tool_output(turn: int) -> str:
    # Distinct, realistic-sized tool output (a file listing / log excerpt), ~3 KB.
    return "\n".join(f"2026-01-{turn % 28 + 1:02d} line {turn}-{i}: request from 10.0.{turn}.{i} ok" for i in range(60))


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    script = {
        "turns": [
            {
                "match": ".",
                "text": "Checking the next file.",
                "tool_calls": [{"name": "tool_1", "input": {"arg": "next"}}],
            }
        ]
    }
    yield from make_rig(tmp_path, monkeypatch, script)


def test_200_turn_transcript_is_linear_and_reconstructs_every_request(rig: Rig) -> None:
    client = anthropic_client(rig.gw)
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Investigate /data."}]}]
    unique = len(orjson.dumps(SYSTEM)) + len(orjson.dumps(TOOLS)) + len(orjson.dumps(messages[0]))
    for turn in range(200):
        # Like Claude Code: a cache breakpoint on the newest message only, moved every turn.
        sent = [dict(m) for m in messages]
        last = dict(sent[-1])
        last["content"] = [*last["content"][:-1], {**last["content"][-1], "cache_control": {"type": "ephemeral"}}]
        sent[-1] = last
        reply = client.messages.create(
            model="claude-sonnet-5-5", max_tokens=1000, system=SYSTEM, tools=TOOLS, messages=sent
        )
        assistant = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
        result = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": reply.content[1].id, "content": _tool_output(turn)}],
        }
        messages += [assistant, result]
        unique += len(orjson.dumps(assistant)) + len(orjson.dumps(result))
    calls = rig.events("model_call")
    assert len(calls) == 200
    size = sum(len(orjson.dumps(e)) + 1 for e in calls)
    naive = sum(len(r.raw) for r in rig.up.generation_requests())
    print(f"transcript {size} bytes, unique content {unique} bytes, ratio {size / unique:.3f}")
    assert size <= 1.2 * unique, f"transcript {size} bytes vs unique content {unique}"
    assert naive > 50 * size  # what storing whole requests would have cost
    rebuilt = reconstruct(calls)
    for call, upstream_request in zip(calls, rig.up.generation_requests()):
        assert rebuilt[call["call_id"]] == upstream_request.body
    assert all(c["request"]["conv"] == "call-1" for c in calls)
    assert calls[5]["request"]["append"][0] == {"$response": calls[4]["call_id"]}


def test_deltas_handle_branches_changed_fields_and_separate_conversations() -> None:
    rec = RequestRecorder()
    events = []

    def call(i: int, wire: str, body: dict) -> None:
        events.append(
            {
                "type": "model_call",
                "call_id": f"c{i}",
                "wire_api": wire,
                "request": rec.delta(f"c{i}", wire, body),
                "response": None,
            }
        )

    a = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    bodies = {
        1: ("anthropic_messages", {"model": "m", "system": "S", "temperature": 0.2, "messages": a}),
        2: ("anthropic_messages", {"model": "m", "system": "S2", "messages": a + [{"role": "user", "content": "d"}]}),
        3: (
            "anthropic_messages",
            {"model": "m", "system": "S2", "messages": a[:2] + [{"role": "user", "content": "x"}]},
        ),
        4: ("anthropic_messages", {"model": "small", "messages": [{"role": "user", "content": "title this"}]}),
        5: ("openai_responses", {"model": "g", "input": "plain string input"}),
        6: ("gemini", {"contents": [{"role": "user", "parts": [{"text": "q"}]}]}),
        7: (
            "gemini",
            {"contents": [{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "parts": [{"text": "r"}]}]},
        ),
    }
    for i, (wire, body) in bodies.items():
        call(i, wire, body)
    d = {e["call_id"]: e["request"] for e in events}
    assert d["c2"]["set"] == {"system": "S2"} and d["c2"]["unset"] == ["temperature"] and d["c2"]["keep"] == 3
    assert d["c3"]["base"] == "c2" and d["c3"]["keep"] == 2  # a branch: kept the shared prefix only
    assert d["c4"]["base"] is None and d["c4"]["conv"] == "c4"
    assert d["c7"]["base"] == "c6" and len(d["c7"]["append"]) == 1
    rebuilt = reconstruct(events)
    assert {k: v for k, v in rebuilt.items()} == {f"c{i}": body for i, (_w, body) in bodies.items()}


# ---------------------------------------------------------------- response summaries


def _sse(*events: dict, named: bool = True) -> bytes:
    return b"".join(
        (b"event: " + e["type"].encode() + b"\n" if named else b"") + b"data: " + orjson.dumps(e) + b"\n\n"
        for e in events
    )


def test_summaries_detect_refusals_in_every_wire_api() -> None:
    anth = _sse(
        {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 7}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "I can't"}},
        {"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    )
    s = summarize("anthropic_messages", True, anth)
    assert (s.refusal, s.text, s.usage["input_tokens"], s.usage["output_tokens"], s.served_model) == (
        True,
        "I can't",
        7,
        3,
        "claude-x",
    )
    resp = {
        "model": "gpt-5",
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 2,
            "output_tokens_details": {"reasoning_tokens": 1},
        },
    }
    s = summarize("openai_responses", False, orjson.dumps(resp))
    assert s.refusal and s.usage == {
        "input_tokens": 6,
        "cached_input_tokens": 4,
        "cache_write_tokens": 0,
        "output_tokens": 2,
        "reasoning_tokens": 1,
    }
    s = summarize("openai_responses", True, _sse({"type": "response.completed", "response": resp}))
    assert s.refusal and s.text == "No."
    chat = {"model": "m", "choices": [{"message": {"content": None}, "finish_reason": "content_filter"}]}
    assert summarize("openai_chat", False, orjson.dumps(chat)).refusal
    gem = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "SAFETY"}]}
    assert summarize("gemini", True, _sse(gem | {"type": "x"}, named=False)).refusal
    assert summarize("gemini", False, orjson.dumps({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})).refusal
    ok = {"candidates": [{"content": {"parts": [{"text": "fine"}]}, "finishReason": "STOP"}]}
    assert not summarize("gemini", False, orjson.dumps(ok)).refusal


def test_summaries_of_errors_and_malformed_streams_never_raise() -> None:
    assert (
        summarize("anthropic_messages", False, b'{"type":"error","error":{"type":"x","message":"boom"}}', 500).error
        == "HTTP 500: boom"
    )
    assert summarize("openai_chat", True, b"data: {not json\n\n").error.startswith("malformed SSE")
    assert summarize("gemini", False, b"<html>").error.startswith("unparseable gemini response")
    chat = (
        b'data: {"model":"m","choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f",'
        b'"arguments":"{\\"a\\":"}}]}}]}\n\ndata: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":'
        b'{"arguments":"1}"}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    )
    s = summarize("openai_chat", True, chat)
    assert s.tool_calls == [{"id": "c1", "name": "f", "input": {"a": 1}}] and s.error is None


# ---------------------------------------------------------------- prices


def test_prices_unknown_is_none_prefixes_match_and_override_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = PriceTable()
    assert table.cost("anthropic/claude-haiku-4-5-20251001", {"input_tokens": 1_000_000}) == 1.0
    assert table.cost("anthropic/some-future-model", {"input_tokens": 1}) is None
    assert table.cost("openai/gpt-5", {"cache_write_tokens": 10}) is None  # no cache-write price: unknown, not 0
    assert table.cost("scripted/x.json", {"input_tokens": 5, "output_tokens": 5}) == 0.0
    override = tmp_path / "prices.toml"
    override.write_text('["anthropic/some-future-model"]\ninput = 2.0\noutput = 4.0\n')
    monkeypatch.setenv("BENCHCTL_PRICES", str(override))
    assert PriceTable().cost("anthropic/some-future-model", {"input_tokens": 500_000, "output_tokens": 500_000}) == 3.0
    override.write_text('["m"]\ninptu = 1\n')
    with pytest.raises(PriceTableError, match="unknown keys"):
        PriceTable()
    override.write_text('["m"]\ninput = "3 dollars"\n')  # names the file and the model, not a bare ValueError
    with pytest.raises(PriceTableError, match=r"prices\.toml: \['m'\] prices must be non-negative numbers"):
        PriceTable()


def test_unknown_price_makes_run_cost_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rig in make_rig(tmp_path, monkeypatch, model="anthropic/claude-unpriced-9"):
        anthropic_client(rig.gw).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert rig.events("model_call")[0]["cost_usd"] is None
        assert rig.gw.summary()["cost_usd"] is None
