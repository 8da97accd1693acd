"""ReAct keeps the model's reasoning: each `assistant` event carries the answer's reasoning blocks,
every `model_call` (the run's last answer included) records them, and the next request sends them
back as the vendor requires, the opaque parts unchanged: Anthropic thinking signatures and
redacted_thinking data, Responses encrypted_content, Gemini thoughtSignatures (the same bytes; the
google-genai SDK writes them in base64's URL-safe alphabet). Chat completions servers get no
reasoning back (they reject or ignore it), but it is recorded. A real run per wire API: a real
Docker sandbox, the real gateway, the vendor's SDK, and the fake upstream answering in the
vendor's shape; the requests are asserted as the upstream received them (raw bytes)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchctl.gateway.recording import reconstruct
from benchctl.testing.fake_upstream import FakeUpstreamServer, RecordedRequest
from tests.rigs.gateway import point_env_at
from tests.rigs.run import make_scripted_task, only_run, run_inprocess

pytestmark = pytest.mark.docker

MODELS = {
    "anthropic": "anthropic/claude-sonnet-5-5",
    "responses": "openai/gpt-5",
    "chat": "openai-compatible/reasoner",
    "gemini": "google/gemini-2.5-pro",
}
SIG1 = base64.b64encode(bytes(range(130, 190))).decode()  # with '+' and '/', as the vendors' base64 has
RED1 = base64.b64encode(b"\xfb\xff\xbe redacted" * 4).decode()
CALL1 = base64.b64encode(b"\xfa\xfb call signature").decode()
SIG2 = base64.b64encode(bytes(range(60, 120))).decode()
T1, T2 = "Count the errors in the log first.", "The count is in; submit."
TURNS = [
    {
        "reasoning": [{"text": T1, "signature": SIG1}, {"redacted": True, "signature": RED1}],
        "text": "Counting.",
        "tool_calls": [{"name": "bash", "input": {"command": "grep -c ERROR /data/app.log"}, "signature": CALL1}],
    },
    {"reasoning": [{"text": T2, "signature": SIG2}], "tool_calls": [{"name": "submit", "input": {}}]},
]


def block(text: str = "", *, redacted: bool = False, signature: str | None = None) -> dict[str, Any]:
    return {"type": "reasoning", "text": text, "summary": False, "redacted": redacted, "signature": signature}


def expected(wire: str) -> list[list[dict[str, Any]]]:
    """Each answer's reasoning as recorded: chat completions carries the visible text only."""
    if wire == "chat":
        return [[block(T1)], [block(T2)]]
    return [[block(T1, signature=SIG1), block(redacted=True, signature=RED1)], [block(T2, signature=SIG2)]]


def without_ids(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "id"} for b in blocks]


def check_sent_back(wire: str, second: RecordedRequest) -> None:
    """The second request carries the first answer's reasoning as the vendor requires it."""
    body, raw = orjson.loads(second.raw), second.raw
    if wire == "anthropic":
        (answer,) = [m for m in body["messages"] if m["role"] == "assistant"]
        assert answer["content"][:2] == [
            {"type": "thinking", "thinking": T1, "signature": SIG1},
            {"type": "redacted_thinking", "data": RED1},
        ]
        assert f'"signature":"{SIG1}"'.encode() in raw.replace(b" ", b"")  # the bytes as they went
    elif wire == "responses":
        items = [i for i in body["input"] if i.get("type") == "reasoning"]
        assert [i["encrypted_content"] for i in items] == [SIG1, RED1]
        assert [[c["text"] for c in i.get("content") or []] for i in items] == [[T1], []]
        assert SIG1.encode() in raw and RED1.encode() in raw
    elif wire == "chat":
        (answer,) = [m for m in body["messages"] if m["role"] == "assistant"]
        assert "reasoning_content" not in answer and "reasoning" not in answer and T1.encode() not in raw
    else:
        (answer,) = [c for c in body["contents"] if c["role"] == "model"]
        parts = answer["parts"]
        thought = next(p for p in parts if p.get("thought"))
        call = next(p for p in parts if "functionCall" in p)
        assert thought["text"] == T1
        signed = [p["thoughtSignature"] for p in parts if "thoughtSignature" in p]
        # the same bytes, in the alphabet the SDK writes (the API reads both)
        assert [base64.urlsafe_b64decode(s) for s in signed] == [base64.b64decode(s) for s in (SIG1, RED1, CALL1)]
        assert call["thoughtSignature"] == base64.urlsafe_b64encode(base64.b64decode(CALL1)).decode()


@pytest.mark.parametrize("wire", list(MODELS))
def test_react_records_reasoning_and_sends_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: str) -> None:
    task, _ = make_scripted_task(
        tmp_path, TURNS, '[early_exit]\nenabled = false\n[harness_options]\nreasoning_effort = "low"\n'
    )
    with FakeUpstreamServer({"turns": TURNS, "after_end": "error"}) as up:
        point_env_at(monkeypatch, up)
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", up.url + "/v1")
        assert run_inprocess(task, MODELS[wire], tmp_path / "out", budget="1m") == 0
        requests = up.generation_requests()
    meta, events, _run = only_run(tmp_path / "out")
    assert meta["status"] == "completed", meta.get("error")
    assert len(requests) == 2
    calls = [e for e in events if e["type"] == "model_call"]
    assistants = [e for e in events if e["type"] == "assistant"]
    assert len(calls) == len(assistants) == 2
    # every answer's reasoning, the last one's included, in its own model_call and assistant event
    assert [without_ids(c["response"]["reasoning"]) for c in calls] == expected(wire)
    assert [without_ids(a["reasoning"]) for a in assistants] == expected(wire)
    check_sent_back(wire, requests[1])
    # the record rebuilds each request exactly as the upstream got it; an Anthropic answer echoed
    # back whole (its thinking blocks with their signatures) is stored as a reference to its call
    bodies = reconstruct(events)
    assert [bodies[c["call_id"]] for c in calls] == [orjson.loads(r.raw) for r in requests]
    if wire == "anthropic":
        assert {"$response": calls[0]["call_id"]} in calls[1]["request"]["append"]
    if wire == "gemini":  # a functionCall's signature stays with that call in the record
        assert calls[0]["response"]["tool_calls"][0]["signature"] == CALL1
