"""OpenAI Responses answers as the API sends them (see responses.py for the rest of the wire).

Streams: response.created, response.in_progress, response.output_item.added,
response.content_part.added, response.output_text.delta | response.refusal.delta, ...done events,
response.function_call_arguments.delta/.done, response.output_item.done, response.completed (or
response.incomplete) with usage. A client-side tool search is a `tool_search_call` item (arguments
an object, no delta events). A reasoning item streams its summary as
response.reasoning_summary_part.added / response.reasoning_summary_text.delta / ...done, its
reasoning text as response.content_part.added / response.reasoning_text.delta / ...done; its
encrypted content (when the request asked for it) comes whole in response.output_item.done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchctl.gateway.wire.neutral import Part, Reply, Usage
from benchctl.gateway.wire.sse import dumps, new_id, new_signature, split_text, sse


def _usage(u: Usage) -> dict[str, Any]:
    total_in = u.input_tokens + u.cached_input_tokens
    return {
        "input_tokens": total_in,
        "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": total_in + u.output_tokens,
    }


def _reasoning_item(p: Part, encrypted: bool) -> dict[str, Any]:
    """A reasoning block as a reasoning item: its text as a summary (`summary` true, as OpenAI's
    models give it) or as reasoning_text content (as open-weight models served over Responses do);
    its signature as the encrypted content, made up when absent, only when the request asked."""
    item: dict[str, Any] = {
        "id": p.id or new_id("rs_", 32),
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": p.text}] if p.text and p.summary else [],
    }
    if p.text and not p.summary:
        item["content"] = [{"type": "reasoning_text", "text": p.text}]
    item["encrypted_content"] = (p.signature or new_signature()) if encrypted else None
    return item


def _output(reply: Reply, encrypted: bool) -> list[dict[str, Any]]:
    """The completed output items (ids fixed, so the stream and the final object agree)."""
    items = [_reasoning_item(p, encrypted) for p in reply.reasoning]
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
    for tc, cid in zip(reply.tool_calls, [tc.id or new_id("call_") for tc in reply.tool_calls]):
        if tc.kind == "tool_search":
            items.append(
                {
                    "id": new_id("tsc_", 32),
                    "type": "tool_search_call",
                    "status": "completed",
                    "call_id": cid,
                    "execution": "client",
                    "arguments": tc.arguments,
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


def _object(
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


def _status(reply: Reply) -> str:
    return "incomplete" if reply.effective_stop == "max_tokens" else "completed"


def whole(reply: Reply, encrypted: bool) -> bytes:
    """The response object; `encrypted`: the request asked for reasoning.encrypted_content."""
    return dumps(
        _object(
            reply,
            new_id("resp_", 32),
            int(time.time()),
            _status(reply),
            _output(reply, encrypted),
            _usage(reply.usage),
        )
    )


def _reasoning_events(emit: Callable[..., None], oi: int, item: dict[str, Any], chunk: int) -> None:
    added = {**item, "summary": [], "encrypted_content": None}
    if "content" in item:
        added["content"] = []
    emit("response.output_item.added", output_index=oi, item=added)
    ident = item["id"]
    for si, part in enumerate(item["summary"]):
        text, empty = part["text"], {**part, "text": ""}
        emit("response.reasoning_summary_part.added", item_id=ident, output_index=oi, summary_index=si, part=empty)
        for piece in split_text(text, chunk):
            kind = "response.reasoning_summary_text.delta"
            emit(kind, item_id=ident, output_index=oi, summary_index=si, delta=piece)
        emit("response.reasoning_summary_text.done", item_id=ident, output_index=oi, summary_index=si, text=text)
        emit("response.reasoning_summary_part.done", item_id=ident, output_index=oi, summary_index=si, part=part)
    for ci, part in enumerate(item.get("content") or []):
        text, empty = part["text"], {**part, "text": ""}
        emit("response.content_part.added", item_id=ident, output_index=oi, content_index=ci, part=empty)
        for piece in split_text(text, chunk):
            emit("response.reasoning_text.delta", item_id=ident, output_index=oi, content_index=ci, delta=piece)
        emit("response.reasoning_text.done", item_id=ident, output_index=oi, content_index=ci, text=text)
        emit("response.content_part.done", item_id=ident, output_index=oi, content_index=ci, part=part)


def stream(reply: Reply, encrypted: bool) -> list[bytes]:
    rid, created, output = new_id("resp_", 32), int(time.time()), _output(reply, encrypted)
    ev: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        ev.append(sse(kind, {"type": kind, "sequence_number": len(ev), **data}))

    emit("response.created", response=_object(reply, rid, created, "in_progress", [], None))
    emit("response.in_progress", response=_object(reply, rid, created, "in_progress", [], None))
    for oi, item in enumerate(output):
        if item["type"] == "reasoning":
            _reasoning_events(emit, oi, item, reply.chunk_chars)
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
    status = _status(reply)
    emit(
        "response.completed" if status == "completed" else "response.incomplete",
        response=_object(reply, rid, created, status, output, _usage(reply.usage)),
    )
    return ev
