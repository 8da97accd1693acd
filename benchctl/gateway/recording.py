"""Request deltas: store only what is new in each request of a conversation.

Agents resend their whole history every turn, so storing each request whole makes a
transcript grow quadratically. `RequestRecorder.delta` instead finds the conversation the
request continues (the earlier request whose message list is the longest prefix of this
one) and records:

  {"conv": "c3",              conversation id (first call's id)
   "base": "call-17" | null,  the request this one extends (null: stored whole)
   "keep": 12,                messages kept from the base request
   "append": [...],           the messages after those (the list is `messages`, `input` or
                              `contents` by wire API, see list_key; absent when not a list)
   "set": {...},              top-level fields that are new or changed vs the base (absent: none)
   "unset": [...],            top-level fields the base had and this one has not (absent: none)
   "cache_control": [[i, j, v], ...]}   where cache_control markers sit in this request

`cache_control` markers are stored apart from messages because clients move them to the
latest message each turn; keeping them inside would make every old message look changed.
i is the message index, j the content block index (or -1 for the message itself).

An appended assistant message that equals the previous call's response (as rebuilt from
its recorded text and tool calls) is stored as {"$response": "<call id>"} instead of again.

`reconstruct(events)` rebuilds every request exactly (as a JSON value) from the events.
Messages are compared with Python `==` on the parsed JSON, which conflates 1, 1.0 and true;
a resent message that differs from the earlier one only in that way is stored as the earlier.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from benchctl.gateway.wire import find, generation


def list_key(wire_api: str) -> str | None:
    """The request field that holds the conversation (`messages`, `input`, `contents`), by wire API."""
    w = find(wire_api)
    return w.list_key if w is not None else None


def strip_cache_control(messages: list[Any]) -> tuple[list[Any], list[list[Any]]]:
    """Messages without cache_control keys, and where the keys were."""
    marks: list[list[Any]] = []
    out: list[Any] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            out.append(msg)
            continue
        if "cache_control" in msg:
            marks.append([i, -1, msg["cache_control"]])
            msg = {k: v for k, v in msg.items() if k != "cache_control"}
        content = msg.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and "cache_control" in b for b in content):
            blocks = []
            for j, block in enumerate(content):
                if isinstance(block, dict) and "cache_control" in block:
                    marks.append([i, j, block["cache_control"]])
                    block = {k: v for k, v in block.items() if k != "cache_control"}
                blocks.append(block)
            msg = {**msg, "content": blocks}
        out.append(msg)
    return out, marks


def apply_cache_control(messages: list[Any], marks: list[list[Any]]) -> list[Any]:
    out = [dict(m) if isinstance(m, dict) else m for m in messages]
    for i, j, value in marks:
        if j == -1:
            out[i]["cache_control"] = value
        else:
            content = list(out[i]["content"])
            content[j] = {**content[j], "cache_control": value}
            out[i]["content"] = content
    return out


def rebuild_assistant(wire_api: str, response: dict[str, Any] | None) -> Any:
    """The assistant message a client would echo back for a recorded response, when derivable."""
    w = generation(wire_api)
    return w.rebuild_assistant(response) if response and w is not None else None


class _Conversation:
    __slots__ = ("conv_id", "last_call", "fields", "messages", "response", "size")

    def __init__(self, conv_id: str) -> None:
        self.conv_id = conv_id
        self.size = 0  # bytes of the last request's body, as sent
        self.last_call = ""
        self.fields: dict[str, Any] = {}
        self.messages: list[Any] = []  # the last request's messages, cache_control stripped
        self.response: Any = None  # the last response, rebuilt as the message a client echoes


class RequestRecorder:
    """Used from the gateway's event loop only. Compares parsed JSON with `==` (C speed, no
    re-serialization): for a 1.3 MB, 400-message request a delta costs ~0.5 ms."""

    def __init__(self, max_conversations: int = 64, max_bytes: int = 256 << 20) -> None:
        self._convs: OrderedDict[str, _Conversation] = OrderedDict()
        self._by_last: dict[str, _Conversation] = {}
        self._max = max_conversations
        # What the recorder keeps is bounded in bytes too (the sizes of the kept requests' bodies):
        # otherwise 64 conversations of big requests from an agent would stay in the host's memory.
        self._max_bytes = max_bytes
        self._bytes = 0

    def delta(self, call_id: str, wire_api: str, body: dict[str, Any] | None, size: int = 0) -> dict[str, Any] | None:
        """The delta of `body` (whose size as sent was `size` bytes) against its conversation."""
        if body is None:
            return None
        key = list_key(wire_api)
        messages = body.get(key) if key else None
        if not isinstance(messages, list):
            messages = None
        stripped, marks = strip_cache_control(messages) if messages is not None else ([], [])
        fields = {k: v for k, v in body.items() if k != key or messages is None}

        conv, keep = self._match(stripped)
        if conv is None:
            conv = _Conversation(call_id)
            self._convs[call_id] = conv
            if len(self._convs) > self._max:
                old = self._convs.popitem(last=False)[1]
                self._by_last.pop(old.last_call, None)
                self._bytes -= old.size
            out: dict[str, Any] = {"conv": conv.conv_id, "base": None, "keep": 0, "set": fields}
        else:
            self._by_last.pop(conv.last_call, None)
            self._convs.move_to_end(conv.conv_id)
            out = {"conv": conv.conv_id, "base": conv.last_call, "keep": keep}
            changed = {k: v for k, v in fields.items() if k not in conv.fields or conv.fields[k] != v}
            removed = [k for k in conv.fields if k not in fields]
            if changed:
                out["set"] = changed
            if removed:
                out["unset"] = removed
        if messages is not None:
            response = conv.response if out["base"] else None
            out["append"] = [
                {"$response": out["base"]} if response is not None and m == response else m for m in stripped[keep:]
            ]
            if marks:
                out["cache_control"] = marks
        conv.last_call, conv.fields, conv.messages, conv.response = call_id, fields, stripped, None
        self._by_last[call_id] = conv
        self._bytes += size - conv.size
        conv.size = size
        while self._bytes > self._max_bytes and len(self._convs) > 1:  # forget the least recent ones
            old = self._convs.popitem(last=False)[1]
            self._by_last.pop(old.last_call, None)
            self._bytes -= old.size
        return out

    def note_response(self, call_id: str, wire_api: str, response: dict[str, Any] | None) -> None:
        """Remember the rebuilt assistant message so the next turn can refer to it."""
        conv = self._by_last.get(call_id)
        if conv is not None:
            conv.response = rebuild_assistant(wire_api, response)

    def _match(self, messages: list[Any]) -> tuple[_Conversation | None, int]:
        """The conversation whose last request shares the longest message prefix with this one."""
        if not messages:
            return None, 0
        best, best_keep = None, 0
        for conv in reversed(self._convs.values()):  # most recent first
            prev = conv.messages
            if not prev or prev[0] != messages[0]:
                continue
            n = min(len(prev), len(messages))
            keep = 1
            while keep < n and prev[keep] == messages[keep]:
                keep += 1
            if keep > best_keep:
                best, best_keep = conv, keep
                if keep == len(prev):
                    break  # a full extension of the most recent such conversation: take it
        return best, best_keep


def reconstruct(events: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """call id → the exact request body, rebuilt from `model_call` events' `request` deltas."""
    bodies: dict[str, dict[str, Any]] = {}
    stripped: dict[str, list[Any]] = {}
    responses: dict[str, Any] = {}
    for ev in events:
        if ev.get("type") != "model_call" or not ev.get("request"):
            continue
        d, call_id = ev["request"], ev["call_id"]
        key = list_key(ev.get("wire_api", "")) or ""
        base = bodies.get(d["base"]) if d["base"] else None
        unset = d.get("unset", ())
        fields = {k: v for k, v in (base or {}).items() if not ("append" in d and k == key) and k not in unset}
        fields.update(d.get("set", {}))
        if "append" in d:
            prev = stripped[d["base"]][: d["keep"]] if d["base"] else []
            msgs = prev + [
                responses[m["$response"]] if isinstance(m, dict) and "$response" in m else m for m in d["append"]
            ]
            stripped[call_id] = msgs
            body = dict(fields)
            body[key] = apply_cache_control(msgs, d.get("cache_control", []))
            # keep the list field where the client put it relative to other fields is not needed: JSON
            # objects are unordered; equality is what "exact" means here.
        else:
            body = fields
        bodies[call_id] = body
        rebuilt = rebuild_assistant(ev.get("wire_api", ""), ev.get("response"))
        if rebuilt is not None:
            responses[call_id] = rebuilt
    return bodies
