"""Anthropic Messages: POST /v1/messages (and /v1/messages/count_tokens).

Answers stream as message_start, content_block_start / ping / content_block_delta (text_delta,
input_json_delta, thinking_delta, signature_delta) / content_block_stop, message_delta
(stop_reason, usage), message_stop. Reasoning: a `thinking` block {thinking, signature} is a
reasoning block with its signature; a `redacted_thinking` block {data} one with no text, redacted,
its data as the signature (a redacted block streams whole, in its content_block_start).
Usage: `input_tokens` is uncached input, cache reads and writes are counted apart.
"""

from __future__ import annotations

from typing import Any

import orjson

from benchctl.gateway.wire.base import RequestInfo, Wire
from benchctl.gateway.wire.neutral import (
    MAX_CACHE_BREAKPOINTS,
    Message,
    Part,
    Reply,
    ResponseSummary,
    TextBlock,
    ToolDef,
    Turn,
    Usage,
    WireApi,
    cache_segments,
    joined,
    reasoning,
    reasoning_from_record,
    text_parts,
    tool_call,
)
from benchctl.gateway.wire.sse import (
    dumps,
    error_message,
    json_events,
    new_id,
    new_signature,
    parse_args,
    split_text,
    sse,
)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class AnthropicWire(Wire):
    names: tuple[WireApi, ...] = ("anthropic_messages", "anthropic_count_tokens")
    list_key = "messages"
    token_count_provider = "anthropic"
    cut_off_reasons = frozenset({"max_tokens"})
    tool_errors = True  # tool_result.is_error

    def classify(self, method: str, path: str) -> WireApi | None:
        if method == "POST" and path == "/v1/messages":
            return "anthropic_messages"
        if method == "POST" and path == "/v1/messages/count_tokens":
            return "anthropic_count_tokens"
        return None

    def request_info(self, path: str, body: dict[str, Any]) -> RequestInfo:
        info = super().request_info(path, body)
        return RequestInfo(info.model, info.stream, counts_tokens=path.endswith("/count_tokens"))

    def token_count_body(self, tokens: int) -> bytes:
        return dumps({"input_tokens": tokens})

    def build_request(
        self,
        model: str,
        messages: list[Turn],
        system: str | None,
        max_tokens: int,
        temperature: float | None,
        top_p: float | None = None,
    ) -> tuple[str, dict[str, Any]]:
        marks = sum(b.cache for _, blocks in messages for b in blocks)
        if marks > MAX_CACHE_BREAKPOINTS:
            raise ValueError(f"{marks} prompt-cache breakpoints; Anthropic allows {MAX_CACHE_BREAKPOINTS} per request")
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": [{"role": role, "content": _content(blocks)} for role, blocks in messages],
        }
        if system:
            body["system"] = system
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        return "/v1/messages", body

    def without_system(self, body: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k != "system"}

    # ------------------------------------------------------------------ reading requests

    def read_items(self, items: list[Any]) -> list[list[Message]]:
        return [_message(m) if isinstance(m, dict) else [Message("user", text_parts(m))] for m in items]

    def read_system(self, fields: dict[str, Any]) -> Message | None:
        parts = text_parts(fields.get("system"))
        return Message("system", parts) if parts else None

    def read_tools(self, fields: dict[str, Any]) -> list[ToolDef]:
        out: list[ToolDef] = []
        for t in fields.get("tools") or []:
            if isinstance(t, dict) and t.get("name"):
                schema = t.get("input_schema")
                out.append(
                    ToolDef(str(t["name"]), str(t.get("description") or ""), schema if isinstance(schema, dict) else {})
                )
        return out

    def rebuild_assistant(self, response: dict[str, Any]) -> Any:
        text, calls = response.get("text") or "", response.get("tool_calls") or []
        thoughts = [reasoning_from_record(r) for r in response.get("reasoning") or []]
        if any(p.signature is None for p in thoughts):
            return None  # a client cannot echo a thinking block without its signature
        blocks = [_reasoning_block(p) for p in thoughts]
        blocks += [{"type": "text", "text": text}] if text else []
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["input"]} for c in calls]
        return {"role": "assistant", "content": blocks}

    # ------------------------------------------------------------------ answers

    def summarize(self, stream: bool, body: bytes, s: ResponseSummary) -> None:
        if stream:
            _read_stream(body, s)
        else:
            obj = orjson.loads(body)
            if obj.get("type") == "error":
                s.error = error_message(obj)
            else:
                _read_message(obj, s)
        s.refusal = s.refusal or s.stop_reason == "refusal"

    def encode(self, reply: Reply, stream: bool, body: dict[str, Any], query: str) -> tuple[str, list[bytes]]:
        return ("text/event-stream", _sse(reply)) if stream else ("application/json", [_json(reply)])

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        kind = error_type or ERROR_TYPES.get(status, "api_error")
        return dumps({"type": "error", "error": {"type": kind, "message": message}, "request_id": new_id("req_011")})

    def stream_error_event(self, message: str, status: int) -> bytes:
        kind = ERROR_TYPES.get(status, "api_error")
        return sse("error", {"type": "error", "error": {"type": kind, "message": message}})


WIRE = AnthropicWire()


# ---------------------------------------------------------------- requests


def _message(msg: dict[str, Any]) -> list[Message]:
    role, content = msg.get("role"), msg.get("content")
    if role == "system":
        return [Message("system", text_parts(content))]
    if role == "assistant":
        out = Message("assistant")
        for block in content if isinstance(content, list) else [content]:
            kind = block.get("type") if isinstance(block, dict) else None
            if not isinstance(block, dict):  # a bare string (or other non-block): text
                out.parts.extend(text_parts(block))
            elif kind in ("tool_use", "server_tool_use"):
                out.tool_calls.append(tool_call(block.get("id"), block.get("name"), block.get("input")))
            elif (thought := read_reasoning(block)) is not None:
                out.parts.append(thought)
            else:
                out.parts.extend(text_parts(block))
        return [out]
    # a user turn: tool results become tool messages, the rest stays one user message (in order)
    messages: list[Message] = []
    user = Message("user")
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            if user.parts:
                messages.append(user)
                user = Message("user")
            messages.append(
                Message(
                    "tool",
                    text_parts(block.get("content")),
                    tool_call_id=str(block["tool_use_id"]) if block.get("tool_use_id") else None,
                    is_error=bool(block.get("is_error")),
                )
            )
        else:
            user.parts.extend(text_parts(block))
    if user.parts or not messages:
        messages.append(user)
    return messages


def read_reasoning(block: dict[str, Any]) -> Part | None:
    """A thinking or redacted_thinking block as a reasoning block; None for any other block."""
    if block.get("type") == "thinking":
        return reasoning(str(block.get("thinking") or ""), signature=block.get("signature") or None)
    if block.get("type") == "redacted_thinking":
        return reasoning("", redacted=True, signature=block.get("data") or None)
    return None


def _reasoning_block(p: Part) -> dict[str, Any]:
    """A reasoning block as Anthropic writes it; a missing signature is made up (scripted models)."""
    if p.redacted:
        return {"type": "redacted_thinking", "data": p.signature or new_signature()}
    return {"type": "thinking", "thinking": p.text, "signature": p.signature or new_signature()}


# ---------------------------------------------------------------- reading answers


def _content(blocks: list[TextBlock]) -> str | list[dict[str, Any]]:
    """A message's content: one string, or with prompt-cache breakpoints one text block per cached
    prefix, each marked `cache_control` (ephemeral: the default 5-minute cache), and one for the rest."""
    if not any(b.cache for b in blocks):
        return joined(blocks)
    return [
        {"type": "text", "text": b.text, **({"cache_control": {"type": "ephemeral"}} if b.cache else {})}
        for b in cache_segments(blocks)
    ]


def _usage(u: dict[str, Any], usage: dict[str, int]) -> None:
    # message_start carries input counts; message_delta carries (cumulative) output and sometimes inputs again.
    for src, dst in (
        ("input_tokens", "input_tokens"),
        ("cache_read_input_tokens", "cached_input_tokens"),
        ("cache_creation_input_tokens", "cache_write_tokens"),
        ("output_tokens", "output_tokens"),
    ):
        if isinstance(u.get(src), int):
            usage[dst] = u[src]


def _read_message(msg: dict[str, Any], s: ResponseSummary) -> None:
    s.served_model = msg.get("model") or s.served_model
    s.stop_reason = msg.get("stop_reason") or s.stop_reason
    texts = []
    for block in msg.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") in ("tool_use", "server_tool_use"):
            s.tool_calls.append({"id": block.get("id"), "name": block.get("name"), "input": block.get("input")})
        elif (thought := read_reasoning(block)) is not None:
            s.reasoning.append(thought)
    s.text = "".join(texts)
    _usage(msg.get("usage") or {}, s.usage)
    s.usage_final = "usage" in msg


def _read_stream(body: bytes, s: ResponseSummary) -> None:
    blocks: dict[int, dict[str, Any]] = {}
    for _event, ev in json_events(body, s, names=False):
        kind = ev.get("type")
        if kind == "message_start":
            msg = ev.get("message") or {}
            s.served_model = msg.get("model")
            _usage(msg.get("usage") or {}, s.usage)
        elif kind == "content_block_start":
            block = dict(ev.get("content_block") or {})
            block["_json"] = ""
            blocks[ev.get("index", len(blocks))] = block
        elif kind == "content_block_delta":
            block = blocks.setdefault(ev.get("index", 0), {"type": "text", "text": "", "_json": ""})
            delta = ev.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                block["_json"] += delta.get("partial_json", "")
            elif delta.get("type") in ("thinking_delta", "signature_delta"):
                key = delta["type"][: -len("_delta")]
                block[key] = (block.get(key) or "") + (delta.get(key) or "")
        elif kind == "message_delta":
            s.stop_reason = (ev.get("delta") or {}).get("stop_reason") or s.stop_reason
            _usage(ev.get("usage") or {}, s.usage)
            s.usage_final = s.usage_final or "usage" in ev
        elif kind == "error":
            s.error = error_message(ev)
    texts = []
    for _i, block in sorted(blocks.items()):
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") in ("tool_use", "server_tool_use"):
            args = parse_args(block["_json"]) if block["_json"] else block.get("input", {})
            s.tool_calls.append({"id": block.get("id"), "name": block.get("name"), "input": args})
        elif (thought := read_reasoning(block)) is not None:  # a cut-off one: its text so far, maybe no signature
            s.reasoning.append(thought)
    s.text = "".join(texts)


# ---------------------------------------------------------------- encoding answers


def _wire_usage(u: Usage) -> dict[str, Any]:
    return {
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cached_input_tokens,
        "output_tokens": u.output_tokens,
        "service_tier": "standard",
    }


def _tool_ids(reply: Reply) -> list[str]:
    return [tc.id or new_id("toolu_01") for tc in reply.tool_calls]


def _json(reply: Reply) -> bytes:
    content = [_reasoning_block(p) for p in reply.reasoning]
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for tc, tid in zip(reply.tool_calls, _tool_ids(reply)):
        content.append({"type": "tool_use", "id": tid, "name": tc.flat_name, "input": tc.arguments})
    return dumps(
        {
            "id": new_id("msg_01"),
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": content,
            "stop_reason": reply.effective_stop,
            "stop_sequence": None,
            "usage": _wire_usage(reply.usage),
        }
    )


def _block_events(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> list[bytes]:
    ev = [sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})]
    if start["type"] == "text":
        ev.append(sse("ping", {"type": "ping"}))
    for delta in deltas:
        ev.append(sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
    ev.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    return ev


def _sse(reply: Reply) -> list[bytes]:
    u = reply.usage
    start_usage = _wire_usage(Usage(u.input_tokens, u.cached_input_tokens, u.cache_write_tokens, 1))
    message: dict[str, Any] = {
        "id": new_id("msg_01"),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    ev = [sse("message_start", {"type": "message_start", "message": message})]
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for block in map(_reasoning_block, reply.reasoning):
        if block["type"] == "redacted_thinking":
            blocks.append((block, []))
            continue
        pieces = [{"type": "thinking_delta", "thinking": p} for p in split_text(block["thinking"], reply.chunk_chars)]
        pieces.append({"type": "signature_delta", "signature": block["signature"]})
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, pieces))
    if reply.text:
        pieces = [{"type": "text_delta", "text": p} for p in split_text(reply.text, reply.chunk_chars)]
        blocks.append(({"type": "text", "text": ""}, pieces))
    for tc, tid in zip(reply.tool_calls, _tool_ids(reply)):
        # The API opens every tool input with an empty partial_json, then the JSON in pieces.
        json_pieces = [""] + split_text(tc.arguments_json(), reply.chunk_chars)
        start = {"type": "tool_use", "id": tid, "name": tc.flat_name, "input": {}}
        blocks.append((start, [{"type": "input_json_delta", "partial_json": p} for p in json_pieces]))
    for index, (start, deltas) in enumerate(blocks):
        ev += _block_events(index, start, deltas)
    end_usage = {k: v for k, v in _wire_usage(u).items() if k != "service_tier"}
    ev.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.effective_stop, "stop_sequence": None},
                "usage": end_usage,
            },
        )
    )
    ev.append(sse("message_stop", {"type": "message_stop"}))
    return ev
