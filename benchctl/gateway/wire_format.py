"""Encoders: one neutral model reply -> the exact bytes a vendor API would send.

`Reply` is the wire-neutral answer (text, tool calls, refusal, stop reason, usage). For each
wire API there is a JSON encoder (non-streaming) and an SSE encoder (a list of byte strings,
one SSE event each, so a caller can pace them). The event sequences follow the vendors'
documented streams because real clients (the `anthropic` / `openai` / `google-genai` SDKs,
Claude Code, Codex) parse them:

- Anthropic Messages: message_start, content_block_start / ping / content_block_delta
  (text_delta, input_json_delta) / content_block_stop, message_delta (stop_reason, usage),
  message_stop.
- OpenAI Responses: response.created, response.in_progress, response.output_item.added,
  response.content_part.added, response.output_text.delta | response.refusal.delta,
  ...done events, response.function_call_arguments.delta/.done, response.output_item.done,
  response.completed (or response.incomplete) with usage. Function calls may carry a
  `namespace`; a client-side tool search is a `tool_search_call` item (arguments an object).
- OpenAI chat completions: chat.completion.chunk deltas (role, content | refusal, tool_calls
  with index/id/name then argument pieces), a finish_reason chunk, a usage chunk, [DONE].
- Gemini: GenerateContentResponse chunks as `data:` lines (alt=sse) or a JSON array.

Usage convention (neutral): `input_tokens` is *uncached* input, as Anthropic reports it;
`cache_read_tokens` / `cache_write_tokens` are separate; OpenAI and Gemini report the total
prompt (input + cache_read) with the cached part broken out, as those vendors do.
`output_tokens` includes `reasoning_tokens` (as OpenAI reports it; Gemini's
candidatesTokenCount is the rest, thoughtsTokenCount the reasoning part).
"""

from __future__ import annotations

import json
import random
import secrets
import string
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "refusal", "stop_sequence")

_ALNUM = string.ascii_letters + string.digits


_RNG = random.Random(secrets.randbits(128))  # ids need uniqueness, not secrecy; this is 30x faster


def new_id(prefix: str, n: int = 24) -> str:
    """A vendor-looking unique id, e.g. toolu_01AbC..., call_..., msg_..."""
    return prefix + "".join(_RNG.choices(_ALNUM, k=n))


@dataclass
class ToolCall:
    name: str
    input: dict[str, Any] | str  # a string is a free-form ("custom") tool input, e.g. Codex's apply_patch
    id: str = ""  # generated per wire API when empty
    # Responses only: the `namespace` tool that holds `name` (Codex offers each MCP server as one,
    # e.g. mcp__target; other APIs get the flat name `<namespace>__<name>`), and the kind of call:
    # "tool_search" is a client-executed tool search (a `tool_search_call` item, `arguments` = input).
    namespace: str = ""
    kind: str = "function"  # "function" | "tool_search"

    @property
    def is_custom(self) -> bool:
        return isinstance(self.input, str)

    @property
    def flat_name(self) -> str:
        return f"{self.namespace}__{self.name}" if self.namespace else self.name

    @property
    def object_input(self) -> dict[str, Any]:
        # APIs without free-form tools get a string input as {"input": "..."}.
        return {"input": self.input} if isinstance(self.input, str) else self.input

    def arguments_json(self) -> str:
        # Compact, key order preserved: what the caller put in the script is what it gets.
        return json.dumps(self.object_input, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    refusal: bool = False
    stop_reason: str | None = None  # None: derived (refusal > tool_use > end_turn)
    usage: Usage = field(default_factory=Usage)
    model: str = "scripted"
    chunk_chars: int = 64  # text/argument piece size in streams
    thinking: str = ""  # reasoning shown before the answer (thinking block / reasoning summary)

    @property
    def effective_stop(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        if self.refusal:
            return "refusal"
        return "tool_use" if self.tool_calls else "end_turn"


def split_text(text: str, size: int) -> list[str]:
    if not text:
        return []
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def pieces_for(length: int, chunks: int | None, default_size: int = 64) -> int:
    """Piece size that splits a text of `length` characters into about `chunks` pieces (or the default size)."""
    if chunks and chunks > 0 and length:
        return max(1, -(-length // chunks))
    return default_size


def _j(obj: Any) -> bytes:
    return orjson.dumps(obj)


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + _j(data) + b"\n\n"


# ---------------------------------------------------------------- Anthropic Messages


def _anthropic_usage(u: Usage) -> dict[str, Any]:
    return {
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "output_tokens": u.output_tokens,
        "service_tier": "standard",
    }


def _tool_ids(reply: Reply, prefix: str) -> list[str]:
    return [tc.id or new_id(prefix) for tc in reply.tool_calls]


def _signature() -> str:
    # Opaque to clients; they send it back with the thinking block and we never check it.
    return "Es" + new_id("", 86)


def anthropic_json(reply: Reply) -> bytes:
    content: list[dict[str, Any]] = []
    if reply.thinking:
        content.append({"type": "thinking", "thinking": reply.thinking, "signature": _signature()})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for tc, tid in zip(reply.tool_calls, _tool_ids(reply, "toolu_01")):
        content.append({"type": "tool_use", "id": tid, "name": tc.flat_name, "input": tc.object_input})
    return _j(
        {
            "id": new_id("msg_01"),
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": content,
            "stop_reason": reply.effective_stop,
            "stop_sequence": None,
            "usage": _anthropic_usage(reply.usage),
        }
    )


def anthropic_sse(reply: Reply) -> list[bytes]:
    u = reply.usage
    start_usage = _anthropic_usage(Usage(u.input_tokens, 1, u.cache_read_tokens, u.cache_write_tokens))
    ev = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": new_id("msg_01"),
                    "type": "message",
                    "role": "assistant",
                    "model": reply.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
    ]
    index = 0
    if reply.thinking:
        ev.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            )
        )
        for piece in split_text(reply.thinking, reply.chunk_chars):
            ev.append(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": piece},
                    },
                )
            )
        ev.append(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": _signature()},
                },
            )
        )
        ev.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if reply.text:
        ev.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
        )
        ev.append(_sse("ping", {"type": "ping"}))
        for piece in split_text(reply.text, reply.chunk_chars):
            ev.append(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                )
            )
        ev.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for tc, tid in zip(reply.tool_calls, _tool_ids(reply, "toolu_01")):
        ev.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": tid, "name": tc.flat_name, "input": {}},
                },
            )
        )
        # The API opens every tool input with an empty partial_json, then the JSON in pieces.
        for piece in [""] + split_text(tc.arguments_json(), reply.chunk_chars):
            ev.append(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        ev.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    ev.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.effective_stop, "stop_sequence": None},
                "usage": {k: v for k, v in _anthropic_usage(u).items() if k != "service_tier"},
            },
        )
    )
    ev.append(_sse("message_stop", {"type": "message_stop"}))
    return ev


# ---------------------------------------------------------------- OpenAI Responses


def _responses_usage(u: Usage) -> dict[str, Any]:
    total_in = u.input_tokens + u.cache_read_tokens
    return {
        "input_tokens": total_in,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": total_in + u.output_tokens,
    }


def _responses_output(reply: Reply) -> list[dict[str, Any]]:
    """The completed output items (ids fixed, so the stream and the final object agree)."""
    items: list[dict[str, Any]] = []
    if reply.thinking:
        items.append(
            {
                "id": new_id("rs_", 32),
                "type": "reasoning",
                "encrypted_content": None,
                "summary": [{"type": "summary_text", "text": reply.thinking}],
            }
        )
    if reply.refusal:
        items.append(
            {
                "id": new_id("msg_", 32),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": reply.text}],
            }
        )
    elif reply.text:
        items.append(
            {
                "id": new_id("msg_", 32),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}],
            }
        )
    for tc, cid in zip(reply.tool_calls, _tool_ids(reply, "call_")):
        if tc.kind == "tool_search":
            items.append(
                {
                    "id": new_id("tsc_", 32),
                    "type": "tool_search_call",
                    "status": "completed",
                    "call_id": cid,
                    "execution": "client",
                    "arguments": tc.object_input,
                }
            )
        elif isinstance(tc.input, str):
            items.append(
                {
                    "id": new_id("ctc_", 32),
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": cid,
                    "name": tc.name,
                    "input": tc.input,
                }
            )
        else:
            item = {
                "id": new_id("fc_", 32),
                "type": "function_call",
                "status": "completed",
                "arguments": tc.arguments_json(),
                "call_id": cid,
                "name": tc.name,
            }
            if tc.namespace:
                item["namespace"] = tc.namespace
            items.append(item)
    return items


def _responses_object(
    reply: Reply, rid: str, created: int, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": None,
        "model": reply.model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def _responses_status(reply: Reply) -> str:
    return "incomplete" if reply.effective_stop == "max_tokens" else "completed"


def responses_json(reply: Reply) -> bytes:
    return _j(
        _responses_object(
            reply,
            new_id("resp_", 32),
            int(time.time()),
            _responses_status(reply),
            _responses_output(reply),
            _responses_usage(reply.usage),
        )
    )


def responses_sse(reply: Reply) -> list[bytes]:
    rid, created, output = new_id("resp_", 32), int(time.time()), _responses_output(reply)
    ev: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        ev.append(_sse(kind, {"type": kind, "sequence_number": len(ev), **data}))

    emit("response.created", response=_responses_object(reply, rid, created, "in_progress", [], None))
    emit("response.in_progress", response=_responses_object(reply, rid, created, "in_progress", [], None))
    for oi, item in enumerate(output):
        if item["type"] == "reasoning":
            text = item["summary"][0]["text"]
            emit("response.output_item.added", output_index=oi, item={**item, "summary": []})
            part = {"type": "summary_text", "text": ""}
            emit(
                "response.reasoning_summary_part.added", item_id=item["id"], output_index=oi, summary_index=0, part=part
            )
            for piece in split_text(text, reply.chunk_chars):
                emit(
                    "response.reasoning_summary_text.delta",
                    item_id=item["id"],
                    output_index=oi,
                    summary_index=0,
                    delta=piece,
                )
            emit(
                "response.reasoning_summary_text.done", item_id=item["id"], output_index=oi, summary_index=0, text=text
            )
            emit(
                "response.reasoning_summary_part.done",
                item_id=item["id"],
                output_index=oi,
                summary_index=0,
                part={**part, "text": text},
            )
        elif item["type"] == "message":
            part = item["content"][0]
            is_refusal = part["type"] == "refusal"
            emit("response.output_item.added", output_index=oi, item={**item, "status": "in_progress", "content": []})
            empty = (
                {"type": "refusal", "refusal": ""}
                if is_refusal
                else {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            )
            emit("response.content_part.added", item_id=item["id"], output_index=oi, content_index=0, part=empty)
            full = part["refusal"] if is_refusal else part["text"]
            for piece in split_text(full, reply.chunk_chars):
                if is_refusal:
                    emit("response.refusal.delta", item_id=item["id"], output_index=oi, content_index=0, delta=piece)
                else:
                    emit(
                        "response.output_text.delta",
                        item_id=item["id"],
                        output_index=oi,
                        content_index=0,
                        delta=piece,
                        logprobs=[],
                    )
            if is_refusal:
                emit("response.refusal.done", item_id=item["id"], output_index=oi, content_index=0, refusal=full)
            else:
                emit(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=oi,
                    content_index=0,
                    text=full,
                    logprobs=[],
                )
            emit("response.content_part.done", item_id=item["id"], output_index=oi, content_index=0, part=part)
        elif item["type"] == "custom_tool_call":
            emit("response.output_item.added", output_index=oi, item={**item, "status": "in_progress", "input": ""})
            for piece in split_text(item["input"], reply.chunk_chars):
                emit("response.custom_tool_call_input.delta", item_id=item["id"], output_index=oi, delta=piece)
            emit("response.custom_tool_call_input.done", item_id=item["id"], output_index=oi, input=item["input"])
        elif item["type"] == "tool_search_call":
            # Its arguments are an object, not a JSON string: no delta events, the item arrives whole.
            emit("response.output_item.added", output_index=oi, item={**item, "status": "in_progress"})
        else:
            emit("response.output_item.added", output_index=oi, item={**item, "status": "in_progress", "arguments": ""})
            for piece in split_text(item["arguments"], reply.chunk_chars):
                emit("response.function_call_arguments.delta", item_id=item["id"], output_index=oi, delta=piece)
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=oi,
                name=item["name"],
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=oi, item=item)
    status = _responses_status(reply)
    emit(
        "response.completed" if status == "completed" else "response.incomplete",
        response=_responses_object(reply, rid, created, status, output, _responses_usage(reply.usage)),
    )
    return ev


# ---------------------------------------------------------------- OpenAI chat completions

_CHAT_FINISH = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
    "stop_sequence": "stop",
}


def _chat_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input_tokens + u.cache_read_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u.output_tokens,
        "total_tokens": prompt + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
    }


def chat_json(reply: Reply) -> bytes:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if reply.refusal else (reply.text or None),
        "refusal": reply.text if reply.refusal else None,
    }
    if reply.thinking:
        # Not in OpenAI's API; the field OpenAI-compatible servers (vLLM, DeepSeek, OpenRouter) use.
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": tc.flat_name, "arguments": tc.arguments_json()}}
            for tc, cid in zip(reply.tool_calls, _tool_ids(reply, "call_"))
        ]
    return _j(
        {
            "id": new_id("chatcmpl-", 29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model,
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": _CHAT_FINISH[reply.effective_stop]}
            ],
            "usage": _chat_usage(reply.usage),
        }
    )


def chat_sse(reply: Reply, include_usage: bool = True) -> list[bytes]:
    """A chat-completions stream as OpenAI sends it. Usage only with stream_options.include_usage:
    then a last chunk with no choices carries it and every other chunk has `"usage": null`; without
    it no chunk has a usage field (the gateway asks for it on every stream: gateway/chat_usage.py)."""
    cid, created = new_id("chatcmpl-", 29), int(time.time())
    tail = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": reply.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **tail,
        }
        return b"data: " + _j(body) + b"\n\n"

    key = "refusal" if reply.refusal else "content"
    ev = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for piece in split_text(reply.thinking, reply.chunk_chars):
        ev.append(chunk({"reasoning_content": piece}))
    for piece in split_text(reply.text, reply.chunk_chars):
        ev.append(chunk({key: piece}))
    for i, (tc, tid) in enumerate(zip(reply.tool_calls, _tool_ids(reply, "call_"))):
        ev.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": i, "id": tid, "type": "function", "function": {"name": tc.flat_name, "arguments": ""}}
                    ]
                }
            )
        )
        for piece in split_text(tc.arguments_json(), reply.chunk_chars):
            ev.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    ev.append(chunk({}, _CHAT_FINISH[reply.effective_stop]))
    if include_usage:
        ev.append(
            b"data: "
            + _j(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": reply.model,
                    "system_fingerprint": None,
                    "choices": [],
                    "usage": _chat_usage(reply.usage),
                }
            )
            + b"\n\n"
        )
    ev.append(b"data: [DONE]\n\n")
    return ev


# ---------------------------------------------------------------- Gemini

_GEMINI_FINISH = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "max_tokens": "MAX_TOKENS",
    "refusal": "SAFETY",
    "stop_sequence": "STOP",
}


def _gemini_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input_tokens + u.cache_read_tokens
    # Gemini counts thoughts apart from candidates; neutral output_tokens include reasoning.
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": max(0, u.output_tokens - u.reasoning_tokens),
        "totalTokenCount": prompt + u.output_tokens,
    }
    if u.cache_read_tokens:
        out["cachedContentTokenCount"] = u.cache_read_tokens
    if u.reasoning_tokens:
        out["thoughtsTokenCount"] = u.reasoning_tokens
    return out


def _gemini_chunk(reply: Reply, rid: str, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    cand: dict[str, Any] = {"index": 0}
    if parts:
        cand["content"] = {"parts": parts, "role": "model"}
    if finish:
        cand["finishReason"] = finish
    if finish == "SAFETY":
        cand["safetyRatings"] = [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
        ]
    return {
        "candidates": [cand],
        "usageMetadata": _gemini_usage(reply.usage),
        "modelVersion": reply.model,
        "responseId": rid,
    }


def _gemini_parts(reply: Reply) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(thought + text parts, function-call parts). A safety block carries no content, as the API does."""
    if reply.refusal:
        return [], []
    calls = [
        {"functionCall": {"id": tid, "name": tc.flat_name, "args": tc.object_input}}
        for tc, tid in zip(reply.tool_calls, _tool_ids(reply, "call_"))
    ]
    thoughts = [{"text": p, "thought": True} for p in split_text(reply.thinking, reply.chunk_chars)]
    return thoughts + [{"text": p} for p in split_text(reply.text, reply.chunk_chars)], calls


def gemini_json(reply: Reply) -> bytes:
    texts, calls = _gemini_parts(reply)
    parts: list[dict[str, Any]] = []
    if texts and reply.thinking:
        parts.append({"text": reply.thinking, "thought": True})
    if texts and reply.text:
        parts.append({"text": reply.text})
    parts += calls
    return _j(_gemini_chunk(reply, new_id("", 22), parts, _GEMINI_FINISH[reply.effective_stop]))


def gemini_stream_chunks(reply: Reply) -> list[dict[str, Any]]:
    rid = new_id("", 22)
    texts, calls = _gemini_parts(reply)
    bodies = [_gemini_chunk(reply, rid, [t], None) for t in texts]
    # Gemini sends function calls whole, in the last chunk, together with the finish reason.
    bodies.append(_gemini_chunk(reply, rid, calls, _GEMINI_FINISH[reply.effective_stop]))
    return bodies


def gemini_sse(reply: Reply) -> list[bytes]:
    return [b"data: " + _j(b) + b"\r\n\r\n" for b in gemini_stream_chunks(reply)]


def gemini_json_array(reply: Reply) -> list[bytes]:
    """streamGenerateContent without alt=sse: one JSON array, written element by element."""
    bodies = gemini_stream_chunks(reply)
    return [(b"[" if i == 0 else b",\r\n") + _j(b) for i, b in enumerate(bodies)] + [b"]"]


# ---------------------------------------------------------------- dispatch and errors


def encode(
    wire_api: str, reply: Reply, *, stream: bool, include_usage: bool = True, gemini_alt_sse: bool = True
) -> tuple[str, list[bytes]]:
    """(content type, body pieces) for `reply` in `wire_api`; non-streaming is one piece."""
    if wire_api == "anthropic_messages":
        return ("text/event-stream", anthropic_sse(reply)) if stream else ("application/json", [anthropic_json(reply)])
    if wire_api == "openai_responses":
        return ("text/event-stream", responses_sse(reply)) if stream else ("application/json", [responses_json(reply)])
    if wire_api == "openai_chat":
        return (
            ("text/event-stream", chat_sse(reply, include_usage))
            if stream
            else ("application/json", [chat_json(reply)])
        )
    if wire_api == "gemini":
        if not stream:
            return "application/json", [gemini_json(reply)]
        return (
            ("text/event-stream", gemini_sse(reply))
            if gemini_alt_sse
            else ("application/json", gemini_json_array(reply))
        )
    raise ValueError(f"no reply encoder for wire API {wire_api!r}")


# The one place vendor error bytes are built: the gateway's own errors (gateway/exchange.py), the
# scripted upstream's and the fake upstream's all come from here, and tests/test_gateway_error_bytes.py
# feeds what the gateway sends to the official SDKs.
_ANTHROPIC_ERR = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_ERR = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_exceeded",
}
# google.rpc.Code names by HTTP status, as Google APIs put them in error.status. 413 and 415 have
# no canonical code: the request itself is unacceptable, which is INVALID_ARGUMENT; 502 and 529
# (overloaded) are a service that cannot answer now: UNAVAILABLE.
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}


def _anthropic_shaped(wire_api: str | None) -> bool:
    # None (and the fake upstream's "other"): nothing of the request says which vendor's client sent
    # it (a head that did not parse, an unknown path, too many connections). The Anthropic shape is
    # the one all three SDKs read a message from: each looks for error.message, and it is there.
    return wire_api is None or wire_api.startswith("anthropic") or wire_api in ("models_list", "other")


def error_body(wire_api: str | None, status: int, message: str, error_type: str | None = None) -> bytes:
    """The vendor's error JSON for an HTTP error `status`. error_type overrides the type the status
    implies (Anthropic/OpenAI `type`, Gemini `status`): only for a caller that means that vendor's word."""
    if _anthropic_shaped(wire_api):
        kind = error_type or _ANTHROPIC_ERR.get(status, "api_error")
        return _j({"type": "error", "error": {"type": kind, "message": message}, "request_id": new_id("req_011")})
    if wire_api == "gemini":
        return _j(
            {
                "error": {
                    "code": status,
                    "message": message,
                    "status": error_type or _GOOGLE_STATUS.get(status, "UNKNOWN"),
                }
            }
        )
    kind = error_type or _OPENAI_ERR.get(status, "server_error")
    return _j({"error": {"message": message, "type": kind, "param": None, "code": kind}})


def error_headers(retry_after: float | None) -> dict[str, str]:
    h = {"content-type": "application/json"}
    if retry_after is not None:
        h["retry-after"] = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
        h["retry-after-ms"] = str(int(float(retry_after) * 1000))
    return h


def stream_error_event(wire_api: str, message: str, status: int = 529) -> bytes:
    """The in-stream error event a vendor sends when a 200 stream fails midway (e.g. overload), with
    the line endings of that vendor's stream (Gemini's are CRLF, as in gemini_sse)."""
    if wire_api == "anthropic_messages":
        kind = _ANTHROPIC_ERR.get(status, "api_error")
        return _sse("error", {"type": "error", "error": {"type": kind, "message": message}})
    if wire_api == "openai_responses":
        return _sse(
            "error", {"type": "error", "code": "server_error", "message": message, "param": None, "sequence_number": 0}
        )
    if wire_api == "gemini":
        return (
            b"data: "
            + _j({"error": {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}})
            + b"\r\n\r\n"
        )
    return (
        b"data: "
        + _j({"error": {"message": message, "type": "server_error", "param": None, "code": "server_error"}})
        + b"\n\n"
    )
