"""Reasoning is part of the record: the gateway writes every answer's reasoning into that call's own
`model_call` event as `response.reasoning` (the neutral blocks of benchctl/gateway/wire/neutral.py),
for each wire API, streamed and not, and for an answer cut off mid-stream (what had arrived). The
fake upstream answers with reasoning in each vendor's real shape (an Anthropic thinking block with
its signature and a redacted_thinking block; Responses reasoning items with encrypted content;
chat `reasoning_content`; Gemini thought parts and a functionCall with thoughtSignatures), which the
official SDK reads through the gateway."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchctl.gateway.clients import anthropic_client, genai_client, openai_client
from tests.rigs.gateway import Rig, make_rig

pytestmark = pytest.mark.timeout(120)

THOUGHT = "The log is in /data; list it before reading anything."
SIG = base64.b64encode(bytes(range(200, 248))).decode()  # standard base64 with '+' and '/': as vendors send it
RED = base64.b64encode(b"\xfb\xef\xbe" * 20).decode()
CALL_SIG = base64.b64encode(b"\xff\xfe call signature").decode()
TURN = {
    "reasoning": [{"text": THOUGHT, "signature": SIG}, {"redacted": True, "signature": RED}],
    "text": "Looking.",
    "tool_calls": [{"name": "bash", "input": {"command": "ls /data"}, "signature": CALL_SIG}],
    "chunks": 5,
    "usage": {"input_tokens": 50, "output_tokens": 40, "reasoning_tokens": 30},
}
MSG = [{"role": "user", "content": "investigate /data"}]
MODELS = {
    "anthropic": "anthropic/claude-haiku-4-5",
    "responses": "openai/gpt-5",
    "chat": "openai/gpt-5",
    "gemini": "google/gemini-2.5-pro",
}


def block(text: str = "", *, redacted: bool = False, signature: str | None = None) -> dict[str, Any]:
    return {"type": "reasoning", "text": text, "summary": False, "redacted": redacted, "signature": signature}


# what each wire API can carry of TURN's reasoning (chat completions: the visible text, nothing opaque)
EXPECTED = {
    "anthropic": [block(THOUGHT, signature=SIG), block(redacted=True, signature=RED)],
    "responses": [block(THOUGHT, signature=SIG), block(redacted=True, signature=RED)],
    "chat": [block(THOUGHT)],
    "gemini": [block(THOUGHT, signature=SIG), block(redacted=True, signature=RED)],
}


def ask(wire: str, rig: Rig, stream: bool) -> None:
    """One call through the gateway with the vendor's SDK, checking the SDK read the reasoning."""
    if wire == "anthropic":
        client = anthropic_client(rig.gw, max_retries=0)
        kw: dict[str, Any] = {"model": "m", "max_tokens": 64, "messages": MSG}
        if stream:
            with client.messages.stream(**kw) as s:
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kw)
        thinking, redacted = msg.content[0], msg.content[1]
        assert (thinking.type, thinking.thinking, thinking.signature) == ("thinking", THOUGHT, SIG)
        assert (redacted.type, redacted.data) == ("redacted_thinking", RED)
    elif wire == "responses":
        oa = openai_client(rig.gw, max_retries=0)
        kw = {"model": "gpt-5", "input": "investigate", "include": ["reasoning.encrypted_content"]}
        if stream:
            with oa.responses.stream(**kw) as s:
                r = s.get_final_response()
        else:
            r = oa.responses.create(**kw)
        first, second = r.output[0], r.output[1]
        assert first.type == "reasoning" and [c.text for c in first.content or []] == [THOUGHT]
        assert (first.encrypted_content, second.encrypted_content, second.summary) == (SIG, RED, [])
    elif wire == "chat":
        oa = openai_client(rig.gw, max_retries=0)
        if stream:
            pieces = [
                (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                for c in oa.chat.completions.create(model="gpt-5", messages=MSG, stream=True)
                if c.choices
            ]
            assert "".join(pieces) == THOUGHT
        else:
            msg = oa.chat.completions.create(model="gpt-5", messages=MSG).choices[0].message
            assert msg.model_extra["reasoning_content"] == THOUGHT
    else:
        g = genai_client(rig.gw)
        if stream:
            parts = [
                p for c in g.models.generate_content_stream(model="gemini-2.5-pro", contents="hi") for p in c.parts
            ]
        else:
            parts = g.models.generate_content(model="gemini-2.5-pro", contents="hi").parts
        assert "".join(p.text or "" for p in parts if p.thought) == THOUGHT
        signed = [p.thought_signature for p in parts if p.thought_signature]
        assert signed == [base64.b64decode(s) for s in (SIG, RED, CALL_SIG)]  # the SDK checked they are base64


def without_ids(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "id"} for b in blocks]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", list(MODELS))
def test_each_answers_reasoning_is_in_its_own_model_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: str, stream: bool
) -> None:
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [TURN]}, model=MODELS[wire]):
        ask(wire, rig, stream)
        (call,) = rig.events("model_call")
        assert call["outcome"] == "ok" and call["stream"] is stream
        response = call["response"]
        assert without_ids(response["reasoning"]) == EXPECTED[wire]
        if wire == "responses":  # the reasoning items' own ids are kept
            assert all(b["id"].startswith("rs_") for b in response["reasoning"])
        assert response["text"] == "Looking." and response["tool_calls"][0]["name"] == "bash"
        # Gemini: a thoughtSignature on the functionCall part stays with that call
        assert response["tool_calls"][0].get("signature") == (CALL_SIG if wire == "gemini" else None)
        # reasoning tokens where the vendor reports them (Anthropic does not)
        assert call["usage"]["reasoning_tokens"] == (0 if wire == "anthropic" else 30)


# (after how many stream pieces the upstream cuts the connection: inside the first block's text)
CUT_AFTER = {"anthropic": 3, "responses": 5, "chat": 2, "gemini": 1}


def _stream(wire: str, rig: Rig) -> Callable[[], Any]:
    if wire == "anthropic":
        return lambda: list(
            anthropic_client(rig.gw, max_retries=0).messages.create(model="m", max_tokens=64, messages=MSG, stream=True)
        )
    if wire == "responses":
        return lambda: list(
            openai_client(rig.gw, max_retries=0).responses.create(
                model="gpt-5", input="hi", include=["reasoning.encrypted_content"], stream=True
            )
        )
    if wire == "chat":
        return lambda: list(
            openai_client(rig.gw, max_retries=0).chat.completions.create(model="gpt-5", messages=MSG, stream=True)
        )
    return lambda: list(genai_client(rig.gw).models.generate_content_stream(model="gemini-2.5-pro", contents="hi"))


@pytest.mark.parametrize("wire", list(MODELS))
def test_a_cut_off_answer_keeps_the_reasoning_that_had_arrived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: str
) -> None:
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [TURN]}, model=MODELS[wire]):
        rig.up.reset_next(after_pieces=CUT_AFTER[wire])
        with contextlib.suppress(Exception):  # (how each SDK reports the broken stream is not the point)
            _stream(wire, rig)()
        (call,) = rig.wait_for("model_call")
        assert call["partial"] is True and call["outcome"] == "error"
        (thought,) = call["response"]["reasoning"]
        # the first piece of the text arrived; the signature, which comes last, did not
        assert thought["text"] and THOUGHT.startswith(thought["text"]) and thought["text"] != THOUGHT
        assert thought["signature"] is None and not thought["redacted"]
