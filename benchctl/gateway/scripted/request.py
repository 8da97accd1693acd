"""What a scripted model sees of a request: `ScriptRequest`, read through the wire modules' one
request reader (benchctl.gateway.wire), whatever wire API the caller spoke."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from benchctl.gateway.upstream import UpstreamCall
from benchctl.gateway.wire import Message, Request, find


@dataclass
class ScriptRequest:
    """A wire-neutral view of one request, for match rules and Python-callable scripts."""

    wire_api: str
    model: str
    system: str  # the system prompt: the top-level one and any system messages, joined by newlines
    # [{"role": "user"|"assistant"|"tool", "text": ...}], one per neutral message: tool results are
    # "tool", developer messages (Codex's hook context) "user", an assistant's text and its calls'
    # inputs (as JSON) one "assistant" message per turn
    messages: list[dict[str, str]]
    tool_names: list[str]  # by the name a script calls them (namespace members flat, `tool_search`)
    last_user_text: str  # the last user-side messages (user text and/or tool results), joined
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def full_text(self) -> str:
        return "\n".join(t for t in [self.system] + [m["text"] for m in self.messages] if t)


def _text(m: Message) -> str:
    if m.role != "assistant":
        return m.text
    inputs = [c.input if isinstance(c.input, str) else orjson.dumps(c.input).decode() for c in m.tool_calls]
    return "\n".join(t for t in [m.text, *inputs] if t)


def script_request(call: UpstreamCall) -> ScriptRequest:
    body = call.body or {}
    spoken = find(call.wire_api)
    req = spoken.read_request(body) if spoken is not None else Request(None, [], [])
    system = [req.system.text] if req.system is not None else []
    msgs: list[dict[str, str]] = []
    for m in req.messages:
        if m.role == "system" and not m.developer:
            system.append(m.text)
        else:
            msgs.append({"role": "user" if m.developer else m.role, "text": _text(m)})
    last_user = ""
    for entry in reversed(msgs):
        if entry["role"] in ("user", "tool"):
            # Consecutive user-side messages (tool results plus notices) count as one.
            last_user = entry["text"] + ("\n" + last_user if last_user else "")
        elif last_user:
            break
    model = body.get("model") or call.model.name
    tools = [t.name for t in req.tools]
    return ScriptRequest(call.wire_api, str(model), "\n".join(t for t in system if t), msgs, tools, last_user, body)
