"""OpenAI chat completions: POST /v1/chat/completions (OpenAI and OpenAI-compatible servers).

The system prompt is a message of the list. Streams are chat.completion.chunk deltas (role,
content | refusal, tool_calls with index/id/name then argument pieces), a finish_reason chunk,
a usage chunk when asked for (chat_usage.py), [DONE]. Reasoning is not in OpenAI's own API: the
OpenAI-compatible servers (vLLM, DeepSeek, OpenRouter) send it as `message.reasoning_content`
(newer vLLM: `reasoning`), streamed as deltas of the same name; it is one reasoning block with
no signature, and clients do not send it back. Usage reports the whole prompt with the cached part
broken out.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from benchctl.gateway.wire.base import Wire
from benchctl.gateway.wire.chat_usage import ask_for_usage
from benchctl.gateway.wire.neutral import (
    Message,
    Reply,
    ResponseSummary,
    ToolDef,
    Turn,
    Usage,
    WireApi,
    joined,
    reasoning,
    text_parts,
    tool_call,
)
from benchctl.gateway.wire.responses import WIRE as RESPONSES
from benchctl.gateway.wire.sse import dumps, error_message, json_events, new_id, parse_args, split_text

REASONING_FIELDS = ("reasoning_content", "reasoning")
FINISH_REASONS = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
    "stop_sequence": "stop",
}


class ChatWire(Wire):
    names: tuple[WireApi, ...] = ("openai_chat",)
    list_key = "messages"
    cut_off_reasons = frozenset({"length"})

    def classify(self, method: str, path: str) -> WireApi | None:
        return "openai_chat" if method == "POST" and path == "/v1/chat/completions" else None

    def prepare_stream(self, body: dict[str, Any]) -> bool:
        return ask_for_usage(body)  # else its usage, so the run's cost, is unknown

    def build_request(
        self,
        model: str,
        messages: list[Turn],
        system: str | None,
        max_tokens: int,
        temperature: float | None,
        top_p: float | None = None,
    ) -> tuple[str, dict[str, Any]]:
        # the text contiguous: servers that cache (vLLM's prefix caching, DeepSeek) do it by prefix
        msgs = ([{"role": "system", "content": system}] if system else []) + [
            {"role": role, "content": joined(blocks)} for role, blocks in messages
        ]
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": msgs}
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        return "/v1/chat/completions", body

    def without_system(self, body: dict[str, Any]) -> dict[str, Any]:
        out = dict(body)
        if isinstance(out.get("messages"), list):
            out["messages"] = [m for m in out["messages"] if not (isinstance(m, dict) and m.get("role") == "system")]
        return out

    # ------------------------------------------------------------------ reading requests

    def read_items(self, items: list[Any]) -> list[list[Message]]:
        return [_message(m) if isinstance(m, dict) else [Message("user", text_parts(m))] for m in items]

    def read_tools(self, fields: dict[str, Any]) -> list[ToolDef]:
        out: list[ToolDef] = []
        for t in fields.get("tools") or []:
            fn = t.get("function") if isinstance(t, dict) else None
            if isinstance(fn, dict) and fn.get("name"):
                params = fn.get("parameters")
                out.append(
                    ToolDef(
                        str(fn["name"]), str(fn.get("description") or ""), params if isinstance(params, dict) else {}
                    )
                )
        return out

    def rebuild_assistant(self, response: dict[str, Any]) -> Any:
        text, calls = response.get("text") or "", response.get("tool_calls") or []
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": orjson.dumps(c["input"]).decode()},
                }
                for c in calls
            ]
        return msg

    # ------------------------------------------------------------------ answers

    def summarize(self, stream: bool, body: bytes, s: ResponseSummary) -> None:
        if stream:
            _read_stream(body, s)
            return
        obj = orjson.loads(body)
        if "error" in obj and "choices" not in obj:
            s.error = error_message(obj)
        else:
            _read_object(obj, s)

    def encode(self, reply: Reply, stream: bool, body: dict[str, Any], query: str) -> tuple[str, list[bytes]]:
        if not stream:
            return "application/json", [_json(reply)]
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return "text/event-stream", _sse(reply, include_usage)

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        return RESPONSES.error_body(status, message, error_type)  # OpenAI's one error shape

    def stream_error_event(self, message: str, status: int) -> bytes:
        error = {"message": message, "type": "server_error", "param": None, "code": "server_error"}
        return b"data: " + dumps({"error": error}) + b"\n\n"


WIRE = ChatWire()


# ---------------------------------------------------------------- requests


def _message(msg: dict[str, Any]) -> list[Message]:
    role = msg.get("role")
    if role == "tool":
        return [
            Message(
                "tool",
                text_parts(msg.get("content")),
                tool_call_id=str(msg["tool_call_id"]) if msg.get("tool_call_id") else None,
                tool_name=msg.get("name"),
            )
        ]
    if role == "assistant":
        calls = [
            tool_call(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
            for c in msg.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        parts = text_parts(msg.get("content"))
        if (thought := _reasoning_text(msg)) is not None:
            parts.insert(0, reasoning(thought))
        return [Message("assistant", parts, calls)]
    system = role in ("system", "developer")
    return [Message("system" if system else "user", text_parts(msg.get("content")), developer=role == "developer")]


def _reasoning_text(msg: dict[str, Any]) -> str | None:
    """A message's (or a stream delta's) reasoning, in either field the servers use."""
    for key in REASONING_FIELDS:
        if isinstance(msg.get(key), str):
            return str(msg[key])
    return None


# ---------------------------------------------------------------- reading answers


def _usage(u: dict[str, Any], usage: dict[str, int]) -> None:
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    usage["input_tokens"] = (u.get("prompt_tokens") or 0) - cached
    usage["cached_input_tokens"] = cached
    usage["output_tokens"] = u.get("completion_tokens") or 0
    usage["reasoning_tokens"] = (u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0


def _read_object(obj: dict[str, Any], s: ResponseSummary) -> None:
    s.served_model = obj.get("model") or s.served_model
    choice = (obj.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    s.text = msg.get("content") or ""
    if thought := _reasoning_text(msg):
        s.reasoning.append(reasoning(thought))
    if msg.get("refusal"):
        s.refusal, s.text = True, s.text or msg["refusal"]
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function") or {}
        s.tool_calls.append({"id": tc.get("id"), "name": fn.get("name"), "input": parse_args(fn.get("arguments", ""))})
    s.stop_reason = choice.get("finish_reason")
    if s.stop_reason == "content_filter":
        s.refusal = True
    if obj.get("usage"):
        _usage(obj["usage"], s.usage)
        s.usage_final = True


def _read_stream(body: bytes, s: ResponseSummary) -> None:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for _event, ev in json_events(body, s, names=False):
        if "error" in ev and not ev.get("choices"):
            s.error = error_message(ev)
            continue
        s.served_model = ev.get("model") or s.served_model
        for choice in ev.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                texts.append(delta["content"])
            if thought := _reasoning_text(delta):
                thoughts.append(thought)
            if delta.get("refusal"):
                s.refusal = True
                texts.append(delta["refusal"])
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc.get("index", len(calls)), {"id": None, "name": None, "args": ""})
                fn = tc.get("function") or {}
                slot["id"] = tc.get("id") or slot["id"]
                slot["name"] = fn.get("name") or slot["name"]
                slot["args"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                s.stop_reason = choice["finish_reason"]
        if ev.get("usage"):
            _usage(ev["usage"], s.usage)
            s.usage_final = True
    s.text = "".join(texts)
    if thoughts:
        s.reasoning.append(reasoning("".join(thoughts)))
    s.tool_calls = [
        {"id": c["id"], "name": c["name"], "input": parse_args(c["args"])} for _i, c in sorted(calls.items())
    ]
    if s.stop_reason == "content_filter":
        s.refusal = True


# ---------------------------------------------------------------- encoding answers


def _wire_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input_tokens + u.cached_input_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u.output_tokens,
        "total_tokens": prompt + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    }


def _visible_reasoning(reply: Reply) -> str:
    """The reasoning a chat server shows: the blocks' text (a redacted block has none to show)."""
    return "\n\n".join(p.text for p in reply.reasoning if p.text)


def _call_ids(reply: Reply) -> list[str]:
    return [tc.id or new_id("call_") for tc in reply.tool_calls]


def _json(reply: Reply) -> bytes:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if reply.refusal else (reply.text or None),
        "refusal": reply.text if reply.refusal else None,
    }
    if thinking := _visible_reasoning(reply):
        message["reasoning_content"] = thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": tc.flat_name, "arguments": tc.arguments_json()}}
            for tc, cid in zip(reply.tool_calls, _call_ids(reply))
        ]
    return dumps(
        {
            "id": new_id("chatcmpl-", 29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": FINISH_REASONS[reply.effective_stop],
                }
            ],
            "usage": _wire_usage(reply.usage),
        }
    )


def _sse(reply: Reply, include_usage: bool = True) -> list[bytes]:
    """A chat-completions stream as OpenAI sends it. Usage only with stream_options.include_usage:
    then a last chunk with no choices carries it and every other chunk has `"usage": null`; without
    it no chunk has a usage field (the gateway asks for it on every stream: chat_usage.py)."""
    cid, created = new_id("chatcmpl-", 29), int(time.time())
    tail = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: Usage | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "system_fingerprint": None,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **tail,
        }
        if usage is not None:
            body["usage"] = _wire_usage(usage)
        return b"data: " + dumps(body) + b"\n\n"

    key = "refusal" if reply.refusal else "content"
    ev = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for piece in split_text(_visible_reasoning(reply), reply.chunk_chars):
        ev.append(chunk({"reasoning_content": piece}))
    for piece in split_text(reply.text, reply.chunk_chars):
        ev.append(chunk({key: piece}))
    for i, (tc, tid) in enumerate(zip(reply.tool_calls, _call_ids(reply))):
        start = {"index": i, "id": tid, "type": "function", "function": {"name": tc.flat_name, "arguments": ""}}
        ev.append(chunk({"tool_calls": [start]}))
        for piece in split_text(tc.arguments_json(), reply.chunk_chars):
            ev.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    ev.append(chunk({}, FINISH_REASONS[reply.effective_stop]))
    if include_usage:
        ev.append(chunk(None, usage=reply.usage))
    ev.append(b"data: [DONE]\n\n")
    return ev
