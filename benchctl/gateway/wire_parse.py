"""Summarize a model response, in any of the four wire APIs, from its raw bytes.

The gateway passes bytes through untouched while they stream; once a response is complete
it calls `summarize` on the accumulated bytes to record what was said (text, tool calls),
what it cost (usage), how it ended (stop reason, refusal) and which model served it. Judges
(`benchctl.gateway.complete.complete`) use the same function to read a reply.

Usage is normalized so costs are comparable across vendors:
  input_tokens        input NOT read from cache (Anthropic `input_tokens`; OpenAI input minus cached)
  cached_input_tokens input read from the prompt cache
  cache_write_tokens  input written to the cache (Anthropic `cache_creation_input_tokens`)
  output_tokens       all output, reasoning included (as every vendor bills it)
  reasoning_tokens    the reasoning part of output_tokens (informational, not billed twice)

`usage_final` says whether the response carried its final usage (Anthropic message_delta or the
whole message, the Responses terminal event, a chat usage chunk, Gemini's last chunk); an
answer cut off before that has only part of its usage, so its cost is unknown. An error
status counts as final: nothing was generated. A cut-off stream is summarized as far as it got:
text so far, and tool calls with their arguments as received (a string when not yet valid JSON).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

STREAM_UNFINISHED = "stream ended without response.completed"  # a Responses stream's end is explicit
USAGE_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")

# Gemini finish reasons / block reasons that mean "the model (or its filter) refused".
GEMINI_REFUSAL_REASONS = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "OTHER"}


@dataclass
class ResponseSummary:
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "input"} (input parsed when JSON)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    refusal: bool = False
    served_model: str | None = None
    error: str | None = None
    usage_final: bool = False  # the usage is the response's final count (see the module doc)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def empty_usage() -> dict[str, int]:
    return {k: 0 for k in USAGE_KEYS}


def iter_sse(body: bytes) -> Iterator[tuple[str | None, str]]:
    """(event name, data) for each server-sent event; comments and empty events are skipped."""
    text = body.decode("utf-8", errors="replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        event: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        if data:
            yield event, "\n".join(data)


# A `data:` line that ends its event: a blank line follows (not consumed: it may precede the next one).
_LAST_DATA_LINE = re.compile(rb"\ndata: ?(.*)\n(?=\n)")


def _event_data(body: bytes) -> list[bytes] | None:
    """The data of every event, in one regex pass (an eighth of iter_sse's time: the gateway reads
    each streamed answer), when each event has at most one `data:` line, as the vendors send them,
    and no CR; else None. Event names are not read."""
    if b"\r" in body:
        return None
    lines = b"\n" + body  # every line now starts after a newline
    found = _LAST_DATA_LINE.findall(lines)
    # As many data lines ending their events as data lines at all: no event has two.
    return found if len(found) == lines.count(b"\ndata:") else None


def _loads_json_events(body: bytes, summary: ResponseSummary, names: bool = True) -> list[tuple[str | None, Any]]:
    """Parse every SSE data payload as JSON; a bad payload marks the summary as malformed.
    names=False: the caller ignores event names (they may be None), which allows the fast path."""
    if not names and (payloads := _event_data(body)) is not None:
        try:
            return [(None, orjson.loads(d)) for d in payloads if d.strip() != b"[DONE]"]
        except orjson.JSONDecodeError:
            pass  # a bad payload (or bytes that are not UTF-8): read again below, which names it
    out: list[tuple[str | None, Any]] = []
    for event, data in iter_sse(body):
        if data.strip() == "[DONE]":
            continue
        try:
            out.append((event, orjson.loads(data)))
        except orjson.JSONDecodeError:
            summary.error = f"malformed SSE: data is not JSON: {data[:120]!r}"
    return out


def _parse_args(text: str) -> Any:
    try:
        return orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return text


def _error_message(obj: Any) -> str:
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err if err is not None else obj)[:500]


# ---------------------------------------------------------------- Anthropic Messages


def _anthropic_usage(u: dict[str, Any], usage: dict[str, int]) -> None:
    # message_start carries input counts; message_delta carries (cumulative) output and sometimes inputs again.
    for src, dst in (
        ("input_tokens", "input_tokens"),
        ("cache_read_input_tokens", "cached_input_tokens"),
        ("cache_creation_input_tokens", "cache_write_tokens"),
        ("output_tokens", "output_tokens"),
    ):
        if isinstance(u.get(src), int):
            usage[dst] = u[src]


def _anthropic_message(msg: dict[str, Any], s: ResponseSummary) -> None:
    s.served_model = msg.get("model") or s.served_model
    s.stop_reason = msg.get("stop_reason") or s.stop_reason
    texts = []
    for block in msg.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") in ("tool_use", "server_tool_use"):
            s.tool_calls.append({"id": block.get("id"), "name": block.get("name"), "input": block.get("input")})
    s.text = "".join(texts)
    _anthropic_usage(msg.get("usage") or {}, s.usage)
    s.usage_final = "usage" in msg


def _anthropic_stream(body: bytes, s: ResponseSummary) -> None:
    blocks: dict[int, dict[str, Any]] = {}
    for _event, ev in _loads_json_events(body, s, names=False):
        kind = ev.get("type")
        if kind == "message_start":
            msg = ev.get("message") or {}
            s.served_model = msg.get("model")
            _anthropic_usage(msg.get("usage") or {}, s.usage)
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
        elif kind == "message_delta":
            s.stop_reason = (ev.get("delta") or {}).get("stop_reason") or s.stop_reason
            _anthropic_usage(ev.get("usage") or {}, s.usage)
            s.usage_final = s.usage_final or "usage" in ev
        elif kind == "error":
            s.error = _error_message(ev)
    texts = []
    for _i, block in sorted(blocks.items()):
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") in ("tool_use", "server_tool_use"):
            args = _parse_args(block["_json"]) if block["_json"] else block.get("input", {})
            s.tool_calls.append({"id": block.get("id"), "name": block.get("name"), "input": args})
    s.text = "".join(texts)


# ---------------------------------------------------------------- OpenAI Responses


def _responses_usage(u: dict[str, Any], usage: dict[str, int]) -> None:
    cached = (u.get("input_tokens_details") or {}).get("cached_tokens") or 0
    usage["input_tokens"] = (u.get("input_tokens") or 0) - cached
    usage["cached_input_tokens"] = cached
    usage["output_tokens"] = u.get("output_tokens") or 0
    usage["reasoning_tokens"] = (u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0


def _responses_object(resp: dict[str, Any], s: ResponseSummary) -> None:
    s.served_model = resp.get("model") or s.served_model
    status = resp.get("status")
    reason = (resp.get("incomplete_details") or {}).get("reason")
    s.stop_reason = reason or status
    if reason == "content_filter":
        s.refusal = True
    texts = []
    for item in resp.get("output") or []:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part.get("text", ""))
                elif part.get("type") == "refusal":
                    s.refusal = True
                    texts.append(part.get("refusal", ""))
        elif item.get("type") == "function_call":
            call = {
                "id": item.get("call_id"),
                "name": item.get("name"),
                "input": _parse_args(item.get("arguments", "")),
            }
            if item.get("namespace"):  # a member of a `namespace` tool (Codex's MCP servers)
                call["namespace"] = item["namespace"]
            s.tool_calls.append(call)
        elif item.get("type") == "tool_search_call":
            s.tool_calls.append({"id": item.get("call_id"), "name": "tool_search", "input": item.get("arguments")})
        elif item.get("type") == "custom_tool_call":
            s.tool_calls.append({"id": item.get("call_id"), "name": item.get("name"), "input": item.get("input")})
    s.text = "".join(texts)
    if resp.get("error"):
        s.error = _error_message(resp)
    if resp.get("usage"):
        _responses_usage(resp["usage"], s.usage)
        s.usage_final = True


def _responses_stream(body: bytes, s: ResponseSummary) -> None:
    final: dict[str, Any] | None = None
    deltas: list[str] = []
    items: dict[int, dict[str, Any]] = {}  # output items as they arrived, for a stream cut before its end
    events = _loads_json_events(body, s, names=False)
    if any(name is None and isinstance(ev, dict) and "type" not in ev for name, ev in events):
        events = _loads_json_events(body, s)  # an event said what it is only by its name: read the names
    for _event, ev in events:
        kind = ev.get("type", _event)
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            final = ev.get("response") or {}
        elif kind == "response.created":
            s.served_model = (ev.get("response") or {}).get("model")
        elif kind == "response.output_text.delta":
            deltas.append(ev.get("delta", ""))
        elif kind in ("response.output_item.added", "response.output_item.done"):
            items[ev.get("output_index", len(items))] = dict(ev.get("item") or {})
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            item = items.setdefault(ev.get("output_index", len(items)), {})
            key = "arguments" if kind.startswith("response.function") else "input"
            item[key] = item.get(key, "") + (ev.get("delta") or "")
        elif kind in ("response.refusal.delta", "response.refusal.done"):
            s.refusal = True
        elif kind == "error":
            s.error = str(ev.get("message") or _error_message(ev))
    if final is not None:
        refusal = s.refusal
        _responses_object(final, s)
        s.refusal = s.refusal or refusal
    else:
        s.text = "".join(deltas)
        for _i, item in sorted(items.items()):
            if item.get("type") == "function_call":
                s.tool_calls.append(
                    {
                        "id": item.get("call_id"),
                        "name": item.get("name"),
                        "input": _parse_args(item.get("arguments", "")),
                    }
                )
            elif item.get("type") == "custom_tool_call":
                s.tool_calls.append({"id": item.get("call_id"), "name": item.get("name"), "input": item.get("input")})
        if s.error is None:
            s.error = STREAM_UNFINISHED


# ---------------------------------------------------------------- OpenAI chat completions


def _chat_usage(u: dict[str, Any], usage: dict[str, int]) -> None:
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    usage["input_tokens"] = (u.get("prompt_tokens") or 0) - cached
    usage["cached_input_tokens"] = cached
    usage["output_tokens"] = u.get("completion_tokens") or 0
    usage["reasoning_tokens"] = (u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0


def _chat_object(obj: dict[str, Any], s: ResponseSummary) -> None:
    s.served_model = obj.get("model") or s.served_model
    choice = (obj.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    s.text = msg.get("content") or ""
    if msg.get("refusal"):
        s.refusal, s.text = True, s.text or msg["refusal"]
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function") or {}
        s.tool_calls.append({"id": tc.get("id"), "name": fn.get("name"), "input": _parse_args(fn.get("arguments", ""))})
    s.stop_reason = choice.get("finish_reason")
    if s.stop_reason == "content_filter":
        s.refusal = True
    if obj.get("usage"):
        _chat_usage(obj["usage"], s.usage)
        s.usage_final = True


def _chat_stream(body: bytes, s: ResponseSummary) -> None:
    texts: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for _event, ev in _loads_json_events(body, s, names=False):
        if "error" in ev and not ev.get("choices"):
            s.error = _error_message(ev)
            continue
        s.served_model = ev.get("model") or s.served_model
        for choice in ev.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                texts.append(delta["content"])
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
            _chat_usage(ev["usage"], s.usage)
            s.usage_final = True
    s.text = "".join(texts)
    s.tool_calls = [
        {"id": c["id"], "name": c["name"], "input": _parse_args(c["args"])} for _i, c in sorted(calls.items())
    ]
    if s.stop_reason == "content_filter":
        s.refusal = True


# ---------------------------------------------------------------- Gemini


def _gemini_chunk(obj: dict[str, Any], s: ResponseSummary, texts: list[str]) -> None:
    s.served_model = obj.get("modelVersion") or s.served_model
    block = (obj.get("promptFeedback") or {}).get("blockReason")
    if block:
        s.refusal, s.stop_reason = True, block
    for cand in (obj.get("candidates") or [])[:1]:
        for part in (cand.get("content") or {}).get("parts") or []:
            if "text" in part and not part.get("thought"):
                texts.append(part["text"])
            if "functionCall" in part:
                fc = part["functionCall"]
                s.tool_calls.append({"id": fc.get("id"), "name": fc.get("name"), "input": fc.get("args", {})})
        if cand.get("finishReason"):
            s.stop_reason = cand["finishReason"]
            if cand["finishReason"] in GEMINI_REFUSAL_REASONS:
                s.refusal = True
    u = obj.get("usageMetadata")
    if u:
        cached = u.get("cachedContentTokenCount") or 0
        s.usage["input_tokens"] = (u.get("promptTokenCount") or 0) - cached
        s.usage["cached_input_tokens"] = cached
        thoughts = u.get("thoughtsTokenCount") or 0
        s.usage["output_tokens"] = (u.get("candidatesTokenCount") or 0) + thoughts
        s.usage["reasoning_tokens"] = thoughts
        # Streamed chunks carry running counts: the one with the finish reason has the final count.
        s.usage_final = any(c.get("finishReason") for c in obj.get("candidates") or []) or bool(block)
    if "error" in obj:
        s.error = _error_message(obj)


def _gemini(body: bytes, stream: bool, s: ResponseSummary) -> None:
    texts: list[str] = []
    if stream:
        for _event, ev in _loads_json_events(body, s, names=False):
            _gemini_chunk(ev, s, texts)
    else:
        obj = orjson.loads(body)
        for chunk in obj if isinstance(obj, list) else [obj]:
            _gemini_chunk(chunk, s, texts)
    s.text = "".join(texts)


# ---------------------------------------------------------------- entry point


def summarize(wire_api: str, stream: bool, body: bytes, status: int = 200) -> ResponseSummary:
    """What a response said. Never raises: unparseable input becomes `error`."""
    s = ResponseSummary(usage=empty_usage())
    try:
        if status >= 400:
            s.usage_final = True  # an error answer: nothing was generated
            try:
                s.error = f"HTTP {status}: {_error_message(orjson.loads(body))}"
            except orjson.JSONDecodeError:
                s.error = f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}"
            return s
        if wire_api == "anthropic_messages":
            if stream:
                _anthropic_stream(body, s)
            else:
                obj = orjson.loads(body)
                if obj.get("type") == "error":
                    s.error = _error_message(obj)
                else:
                    _anthropic_message(obj, s)
            s.refusal = s.refusal or s.stop_reason == "refusal"
        elif wire_api == "openai_responses":
            if stream:
                _responses_stream(body, s)
            else:
                _responses_object(orjson.loads(body), s)
        elif wire_api == "openai_chat":
            if stream:
                _chat_stream(body, s)
            else:
                obj = orjson.loads(body)
                if "error" in obj and "choices" not in obj:
                    s.error = _error_message(obj)
                else:
                    _chat_object(obj, s)
        elif wire_api == "gemini":
            _gemini(body, stream, s)
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as e:
        s.error = f"unparseable {wire_api} response: {type(e).__name__}: {str(e)[:200]}"
    return s
