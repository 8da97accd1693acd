"""OpenAI Responses: POST /v1/responses.

A conversation is a list of input items (messages, function_call / custom_tool_call /
tool_search_call items and their `*_output` items, reasoning items). Function calls may carry a
`namespace` (Codex offers each MCP server as one); a client-side tool search is a
`tool_search_call` item whose arguments are an object. A `reasoning` item {id, summary
[summary_text], content [reasoning_text]?, encrypted_content?} is a reasoning block (read_reasoning);
its encrypted content comes only when the request has include: ["reasoning.encrypted_content"].
Usage reports the whole prompt with the cached part broken out. Encoding answers: responses_encode.py.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from benchctl.gateway.wire import responses_encode
from benchctl.gateway.wire.base import Wire
from benchctl.gateway.wire.neutral import (
    Message,
    Part,
    Reply,
    Request,
    ResponseSummary,
    ToolCall,
    ToolDef,
    Turn,
    WireApi,
    joined,
    reasoning,
    text_parts,
    tool_call,
)
from benchctl.gateway.wire.sse import dumps, error_message, json_events, parse_args, sse

STREAM_UNFINISHED = "stream ended without response.completed"  # a Responses stream's end is explicit
TOOL_SEARCH = "tool_search"  # the name scripts call a client-side tool search by
ENCRYPTED_REASONING = "reasoning.encrypted_content"  # asked for in `include`
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_exceeded",
}


class ResponsesWire(Wire):
    names: tuple[WireApi, ...] = ("openai_responses",)
    list_key = "input"
    cut_off_reasons = frozenset({"max_output_tokens"})  # incomplete_details.reason

    def classify(self, method: str, path: str) -> WireApi | None:
        return "openai_responses" if method == "POST" and path == "/v1/responses" else None

    def build_request(
        self,
        model: str,
        messages: list[Turn],
        system: str | None,
        max_tokens: int,
        temperature: float | None,
        top_p: float | None = None,
    ) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": model,
            "max_output_tokens": max_tokens,
            "store": False,
            # the text contiguous: OpenAI caches a repeated prefix of 1,024 tokens or more itself
            "input": [{"role": role, "content": joined(blocks)} for role, blocks in messages],
        }
        if key := _cache_key(model, system, messages):
            body["prompt_cache_key"] = key
        if system:
            body["instructions"] = system
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        return "/v1/responses", body

    def without_system(self, body: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k != "instructions"}

    # ------------------------------------------------------------------ reading requests

    def read_items(self, items: list[Any]) -> list[list[Message]]:
        # an assistant turn spans several items: it is held by the item that starts it (so counts
        # of wire items, which request deltas use, still map onto neutral messages)
        return _merge_turns([_item(item) for item in items])

    def read_system(self, fields: dict[str, Any]) -> Message | None:
        parts = text_parts(fields.get("instructions"))
        return Message("system", parts) if parts else None

    def read_tools(self, fields: dict[str, Any]) -> list[ToolDef]:
        out: list[ToolDef] = []
        for t in fields.get("tools") or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":  # its members, named flat as the other APIs name them
                for m in t.get("tools") or []:
                    if isinstance(m, dict) and m.get("name"):
                        out.append(_tool_def(m, f"{t.get('name')}__{m['name']}"))
            elif t.get("type") == TOOL_SEARCH:
                out.append(ToolDef(TOOL_SEARCH, str(t.get("description") or ""), t.get("parameters") or {}))
            elif t.get("name"):
                out.append(_tool_def(t, str(t["name"])))
        return out

    def read_request(self, body: dict[str, Any]) -> Request:
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items
        per = self.read_items(items if isinstance(items, list) else [])
        return Request(self.read_system(body), [m for ms in per for m in ms], self.read_tools(_offered(body)))

    # ------------------------------------------------------------------ answers

    def summarize(self, stream: bool, body: bytes, s: ResponseSummary) -> None:
        if stream:
            _read_stream(body, s)
        else:
            _read_object(orjson.loads(body), s)

    def encode(self, reply: Reply, stream: bool, body: dict[str, Any], query: str) -> tuple[str, list[bytes]]:
        encrypted = ENCRYPTED_REASONING in (body.get("include") or [])
        if stream:
            return "text/event-stream", responses_encode.stream(reply, encrypted)
        return "application/json", [responses_encode.whole(reply, encrypted)]

    def place_calls(self, calls: list[ToolCall], body: dict[str, Any]) -> tuple[list[ToolCall], list[ToolCall]]:
        return place_calls(calls, body)

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        kind = error_type or ERROR_TYPES.get(status, "server_error")
        return dumps({"error": {"message": message, "type": kind, "param": None, "code": kind}})

    def stream_error_event(self, message: str, status: int) -> bytes:
        return sse(
            "error", {"type": "error", "code": "server_error", "message": message, "param": None, "sequence_number": 0}
        )


WIRE = ResponsesWire()


# ---------------------------------------------------------------- requests


def _tool_def(t: dict[str, Any], name: str) -> ToolDef:
    params = t.get("parameters")
    return ToolDef(name, str(t.get("description") or ""), params if isinstance(params, dict) else {})


def _offered(body: dict[str, Any]) -> dict[str, Any]:
    """The request's tools, plus those a client-side tool search loaded earlier in the conversation:
    Codex sends them back inside `tool_search_output` items, not in `tools`."""
    tools = list(body.get("tools") or [])
    items = body.get("input")
    for it in items if isinstance(items, list) else []:
        if isinstance(it, dict) and it.get("type") == "tool_search_output":
            tools += list(it.get("tools") or [])
    return {"tools": tools}


def _item(item: Any) -> list[Message]:
    """One input item. Assistant-side items (text, reasoning, calls) come back as one-message
    assistant lists; `_merge_turns` joins consecutive ones into one turn."""
    if not isinstance(item, dict):
        return [Message("user", text_parts(item))]
    kind, role = item.get("type"), item.get("role")
    if kind in ("function_call", "custom_tool_call"):
        value = item.get("arguments") if kind == "function_call" else item.get("input")
        call = tool_call(item.get("call_id"), item.get("name"), value, namespace=str(item.get("namespace") or ""))
        return [Message("assistant", tool_calls=[call])]
    if kind == "tool_search_call":
        call = tool_call(item.get("call_id"), TOOL_SEARCH, item.get("arguments"), kind="tool_search")
        return [Message("assistant", tool_calls=[call])]
    if kind == "reasoning":
        return [Message("assistant", [read_reasoning(item)])]
    if role == "assistant" and kind in (None, "message"):
        return [Message("assistant", text_parts(item.get("content")))]
    if kind == "tool_search_output":  # what the search loaded, as the model got it
        text = orjson.dumps(item.get("tools") or []).decode()
        return [Message("tool", [Part("text", text)], tool_call_id=_call_id(item))]
    if isinstance(kind, str) and kind.endswith("_output") and item.get("call_id"):
        return [Message("tool", text_parts(item.get("output")), tool_call_id=_call_id(item))]
    if role in ("user", "system", "developer") and kind in (None, "message"):
        return [
            Message(
                "user" if role == "user" else "system", text_parts(item.get("content")), developer=role == "developer"
            )
        ]
    # local shell calls, web search results, ...: kept as recorded
    return [Message("user" if role in (None, "user") else "system", [Part("data", data=item)])]


def _call_id(item: dict[str, Any]) -> str | None:
    return str(item["call_id"]) if item.get("call_id") else None


def _merge_turns(per_item: list[list[Message]]) -> list[list[Message]]:
    """Consecutive assistant-side items (text, reasoning, calls) form one assistant message, held by
    the first item of the run; the following items of the run then hold no message of their own."""
    out: list[list[Message]] = []
    open_turn: Message | None = None
    for msgs in per_item:
        if len(msgs) == 1 and msgs[0].role == "assistant":
            m = msgs[0]
            starts_new = open_turn is None or (open_turn.tool_calls and m.parts and not m.tool_calls)
            if not starts_new and open_turn is not None:
                open_turn.parts.extend(m.parts)
                open_turn.tool_calls.extend(m.tool_calls)
                out.append([])
                continue
            open_turn = m
            out.append([m])
        else:
            open_turn = None
            out.append(msgs)
    return out


def read_reasoning(item: dict[str, Any]) -> Part:
    """A reasoning item as a reasoning block: its reasoning_text content when it has some, else its
    summary (joined by blank lines; `summary` true); redacted when it carries only encrypted content."""
    content = [str(c.get("text") or "") for c in item.get("content") or [] if isinstance(c, dict)]
    summary = [str(s.get("text") or "") for s in item.get("summary") or [] if isinstance(s, dict)]
    sig = item.get("encrypted_content") or None
    ident = str(item["id"]) if item.get("id") else None
    if content:
        return reasoning("\n\n".join(content), signature=sig, id=ident)
    text = "\n\n".join(summary)
    return reasoning(text, summary=bool(summary), redacted=not text and sig is not None, signature=sig, id=ident)


def _search_query(flat_name: str) -> str:
    return " ".join(w for w in flat_name.split("_") if w)


def place_calls(calls: list[ToolCall], body: dict[str, Any]) -> tuple[list[ToolCall], list[ToolCall]]:
    """The calls shaped the way a Responses model calls this request's tools, and the tool searches
    to make first.

    A call names a tool flat (`mcp__target__chat`) or with its `namespace`. A member of a
    `namespace` tool is called as {"namespace", "name"} (Codex offers each MCP server that way
    to models it has no metadata for); `tool_search` is a `tool_search_call` when the request
    has a client-side tool search. A tool the request does not offer while it has a client-side
    tool search (Codex defers MCP tools behind one for the models it knows) is searched for
    first — once per query: after that the call goes out as it is, and the CLI rejects it."""
    offered: set[str] = set()
    members: dict[str, str] = {}  # flat name -> namespace
    can_search = False
    for t in _offered(body)["tools"]:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            members.update(
                {
                    f"{t.get('name')}__{m.get('name')}": str(t.get("name"))
                    for m in t.get("tools") or []
                    if isinstance(m, dict)
                }
            )
        elif t.get("type") == TOOL_SEARCH:
            can_search = can_search or t.get("execution", "client") == "client"
        elif t.get("name"):
            offered.add(str(t["name"]))
    searched = {
        str(it["arguments"].get("query"))
        for it in body.get("input") or []
        if isinstance(it, dict) and it.get("type") == "tool_search_call" and isinstance(it.get("arguments"), dict)
    }
    placed: list[ToolCall] = []
    searches: list[ToolCall] = []
    for tc in calls:
        flat = tc.flat_name
        if flat in offered:
            placed.append(ToolCall(tc.id, flat, tc.input, signature=tc.signature))
        elif flat in members:
            ns = members[flat]
            placed.append(ToolCall(tc.id, flat[len(ns) + 2 :], tc.input, ns, signature=tc.signature))
        elif flat == TOOL_SEARCH and can_search:
            placed.append(ToolCall(tc.id, flat, tc.arguments, kind="tool_search"))
        else:
            placed.append(tc)
            query = _search_query(flat)
            if can_search and query not in searched and query not in {s.arguments["query"] for s in searches}:
                searches.append(ToolCall("", TOOL_SEARCH, {"query": query}, kind="tool_search"))
    return placed, searches


# ---------------------------------------------------------------- reading answers


def _cache_key(model: str, system: str | None, messages: list[Turn]) -> str | None:
    """`prompt_cache_key` for a request with a prompt-cache breakpoint: a hash of its first cached
    prefix, so requests that share it are routed to the same cache (OpenAI routes by a hash of
    the prompt's start, which a long shared prefix already makes equal; the key keeps such requests
    together when other traffic shares that start). None without a breakpoint."""
    h = hashlib.sha256(f"{model}\0{system or ''}\0".encode())
    for role, blocks in messages:
        h.update(role.encode() + b"\0")
        for b in blocks:
            h.update(b.text.encode("utf-8", "replace"))
            if b.cache:
                return "benchctl-" + h.hexdigest()[:32]
    return None


def _usage(u: dict[str, Any], usage: dict[str, int]) -> None:
    cached = (u.get("input_tokens_details") or {}).get("cached_tokens") or 0
    usage["input_tokens"] = (u.get("input_tokens") or 0) - cached
    usage["cached_input_tokens"] = cached
    usage["output_tokens"] = u.get("output_tokens") or 0
    usage["reasoning_tokens"] = (u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0


def _output_call(item: dict[str, Any]) -> dict[str, Any] | None:
    """The tool call an output item makes, as recorded; None for other items."""
    kind = item.get("type")
    if kind == "function_call":
        call = {"id": item.get("call_id"), "name": item.get("name"), "input": parse_args(item.get("arguments", ""))}
        if item.get("namespace"):  # a member of a `namespace` tool (Codex's MCP servers)
            call["namespace"] = item["namespace"]
        return call
    if kind == "tool_search_call":
        return {"id": item.get("call_id"), "name": TOOL_SEARCH, "input": item.get("arguments")}
    if kind == "custom_tool_call":
        return {"id": item.get("call_id"), "name": item.get("name"), "input": item.get("input")}
    return None


def _read_object(resp: dict[str, Any], s: ResponseSummary) -> None:
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
        elif item.get("type") == "reasoning":
            s.reasoning.append(read_reasoning(item))
        elif (call := _output_call(item)) is not None:
            s.tool_calls.append(call)
    s.text = "".join(texts)
    if resp.get("error"):
        s.error = error_message(resp)
    if resp.get("usage"):
        _usage(resp["usage"], s.usage)
        s.usage_final = True


def _read_stream(body: bytes, s: ResponseSummary) -> None:
    final: dict[str, Any] | None = None
    deltas: list[str] = []
    items: dict[int, dict[str, Any]] = {}  # output items as they arrived, for a stream cut before its end
    events = json_events(body, s, names=False)
    if any(name is None and isinstance(ev, dict) and "type" not in ev for name, ev in events):
        events = json_events(body, s)  # an event said what it is only by its name: read the names
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
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            # a reasoning item's text as it streams, for a stream cut before the item is done
            item = items.setdefault(ev.get("output_index", len(items)), {"type": "reasoning"})
            summary = kind == "response.reasoning_summary_text.delta"
            key, index = ("summary", ev.get("summary_index")) if summary else ("content", ev.get("content_index"))
            parts = item.setdefault(key, [])
            while len(parts) <= (index if isinstance(index, int) else 0):
                parts.append({"type": "summary_text" if summary else "reasoning_text", "text": ""})
            part = parts[index if isinstance(index, int) else 0]
            part["text"] = str(part.get("text") or "") + (ev.get("delta") or "")
        elif kind in ("response.refusal.delta", "response.refusal.done"):
            s.refusal = True
        elif kind == "error":
            s.error = str(ev.get("message") or error_message(ev))
    if final is not None:
        refusal = s.refusal
        _read_object(final, s)
        s.refusal = s.refusal or refusal
        return
    s.text = "".join(deltas)
    for _i, item in sorted(items.items()):
        if item.get("type") in ("function_call", "custom_tool_call") and (call := _output_call(item)):
            s.tool_calls.append(call)
        elif item.get("type") == "reasoning":
            s.reasoning.append(read_reasoning(item))
    if s.error is None:
        s.error = STREAM_UNFINISHED
