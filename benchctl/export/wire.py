"""Requests as the model saw them, in one neutral shape shared by every export format.

The gateway records each request in the agent's own wire API (Anthropic Messages, OpenAI
Responses, chat completions, Gemini). This module turns those wire messages into `Message`s
(system / user / assistant / tool, with text, reasoning and tool calls) so that no export format
has to know a wire API. Nothing is made up: a block with no neutral equivalent (an image, an
encrypted reasoning item, a server tool result) is kept as recorded in a `data` part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(slots=True)
class Part:
    type: Literal["text", "reasoning", "data"]
    text: str = ""
    data: dict[str, Any] | None = None  # for "data": the block as recorded


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # the input as recorded when it is not a JSON object (free-form tools such as Codex's
    # apply_patch, or arguments that did not parse); `arguments` is then {"input": raw}
    raw: Any = None


@dataclass(slots=True)
class Message:
    role: Role
    parts: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # tool messages: the call answered
    tool_name: str | None = None
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if p.type == "text")


@dataclass(slots=True)
class ToolDef:
    name: str
    description: str
    parameters: dict[str, Any]


def tool_call(id: Any, name: Any, value: Any) -> ToolCall:
    """A tool call whose input may be an object, a JSON string, free text or missing."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value) if value.strip() else {}
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return ToolCall(str(id or ""), str(name or ""), parsed)
    if isinstance(value, dict):
        return ToolCall(str(id or ""), str(name or ""), value)
    if value is None:
        return ToolCall(str(id or ""), str(name or ""), {})
    return ToolCall(str(id or ""), str(name or ""), {"input": value}, raw=value)


def response_message(response: dict[str, Any] | None) -> Message | None:
    """The assistant message for a recorded response ({"text", "tool_calls"}); None when nothing came back."""
    if not response:
        return None
    text = response.get("text") or ""
    calls = [tool_call(c.get("id"), c.get("name"), c.get("input")) for c in response.get("tool_calls") or []]
    return Message("assistant", [Part("text", text)] if text else [], calls)


# ------------------------------------------------------------------------------- content blocks


def _text_parts(content: Any) -> list[Part]:
    """Text content in any wire API's spelling: a string, or a list of text-ish blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Part("text", content)]
    if isinstance(content, dict):
        content = [content]
    parts: list[Part] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(Part("text", block))
        elif (
            isinstance(block, dict)
            and block.get("type") in ("text", "input_text", "output_text")
            and isinstance(block.get("text"), str)
        ):
            parts.append(Part("text", block["text"]))
        elif isinstance(block, dict) and block.get("type") == "refusal" and isinstance(block.get("refusal"), str):
            parts.append(Part("text", block["refusal"]))
        elif isinstance(block, dict) and set(block) <= {"text", "thought"} and isinstance(block.get("text"), str):
            parts.append(Part("reasoning" if block.get("thought") else "text", block["text"]))
        else:
            parts.append(Part("data", data=block if isinstance(block, dict) else {"value": block}))
    return parts


# ------------------------------------------------------------------------------- Anthropic Messages


def _anthropic(msg: dict[str, Any]) -> list[Message]:
    role, content = msg.get("role"), msg.get("content")
    if role == "system":
        return [Message("system", _text_parts(content))]
    if role == "assistant":
        out = Message("assistant")
        for block in content if isinstance(content, list) else [content]:
            kind = block.get("type") if isinstance(block, dict) else None
            if not isinstance(block, dict):  # a bare string (or other non-block): text
                out.parts.extend(_text_parts(block))
            elif kind in ("tool_use", "server_tool_use"):
                out.tool_calls.append(tool_call(block.get("id"), block.get("name"), block.get("input")))
            elif kind == "thinking":
                out.parts.append(Part("reasoning", str(block.get("thinking") or "")))
            else:
                out.parts.extend(_text_parts(block))
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
                    _text_parts(block.get("content")),
                    tool_call_id=block.get("tool_use_id"),
                    is_error=bool(block.get("is_error")),
                )
            )
        else:
            user.parts.extend(_text_parts(block))
    if user.parts or not messages:
        messages.append(user)
    return messages


# ------------------------------------------------------------------------------- OpenAI Responses


def _responses_item(item: Any) -> list[Message]:
    """One input item. Assistant-side items (text, reasoning, calls) come back as one-message
    assistant lists; `_merge_responses_turns` joins consecutive ones into one turn."""
    if not isinstance(item, dict):
        return [Message("user", _text_parts(item))]
    kind, role = item.get("type"), item.get("role")
    if kind in ("function_call", "custom_tool_call"):
        value = item.get("arguments") if kind == "function_call" else item.get("input")
        return [Message("assistant", tool_calls=[tool_call(item.get("call_id"), item.get("name"), value)])]
    if kind == "reasoning":
        summary = "\n".join(s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict))
        return [Message("assistant", [Part("reasoning", summary) if summary else Part("data", data=item)])]
    if role == "assistant" and kind in (None, "message"):
        return [Message("assistant", _text_parts(item.get("content")))]
    if kind in ("function_call_output", "custom_tool_call_output"):
        return [Message("tool", _text_parts(item.get("output")), tool_call_id=item.get("call_id"))]
    if role in ("user", "system", "developer") and kind in (None, "message"):
        return [Message("user" if role == "user" else "system", _text_parts(item.get("content")))]
    # local shell calls, web search results, ...: kept as recorded
    return [Message("user" if role in (None, "user") else "system", [Part("data", data=item)])]


# ------------------------------------------------------------------------------- chat completions


def _chat(msg: dict[str, Any]) -> list[Message]:
    role = msg.get("role")
    if role == "tool":
        return [
            Message(
                "tool", _text_parts(msg.get("content")), tool_call_id=msg.get("tool_call_id"), tool_name=msg.get("name")
            )
        ]
    if role == "assistant":
        calls = [
            tool_call(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
            for c in msg.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        parts = _text_parts(msg.get("content"))
        if isinstance(msg.get("reasoning_content"), str):
            parts.insert(0, Part("reasoning", msg["reasoning_content"]))
        return [Message("assistant", parts, calls)]
    return [Message("system" if role in ("system", "developer") else "user", _text_parts(msg.get("content")))]


# ------------------------------------------------------------------------------- Gemini


def _gemini(content: dict[str, Any]) -> list[Message]:
    """A Gemini content. Function calls and responses carry an id only when the model gave one;
    an id-less response answers the preceding model turn's call of its name (in order), which
    `benchctl.export.events` resolves, so neither is given a made-up id here."""
    parts = content.get("parts") or []
    if content.get("role") == "model":
        out = Message("assistant")
        for p in parts:
            if isinstance(p, dict) and "functionCall" in p:
                fc = p["functionCall"] or {}
                out.tool_calls.append(tool_call(fc.get("id"), fc.get("name"), fc.get("args")))
            else:
                out.parts.extend(_text_parts(p))
        return [out]
    messages: list[Message] = []
    user = Message("user")
    for p in parts:
        if isinstance(p, dict) and "functionResponse" in p:
            fr = p["functionResponse"] or {}
            text, is_error = _gemini_response(fr.get("response"))
            messages.append(
                Message(
                    "tool",
                    [Part("text", text)],
                    tool_call_id=fr.get("id") or None,
                    tool_name=fr.get("name"),
                    is_error=is_error,
                )
            )
        else:
            user.parts.extend(_text_parts(p))
    if user.parts or not messages:
        messages.append(user)
    return messages


def _gemini_response(resp: Any) -> tuple[str, bool]:
    """A function response's text and whether it reports an error. Gemini documents `output` and
    `error` keys (the SDK also sends `result`, older clients `content`): the model is given the value
    under the key, as inspect-ai's own converter reads it; any other shape is kept whole as JSON."""
    if isinstance(resp, dict):
        key = next((k for k in ("output", "result", "content") if resp.get(k) is not None), None)
        error = resp.get("error")
        value = resp[key] if key is not None else error if error else resp
        return (value if isinstance(value, str) else orjson.dumps(value).decode()), bool(error)
    return (resp if isinstance(resp, str) else orjson.dumps(resp).decode()), False


# ------------------------------------------------------------------------------- requests


def messages(wire_api: str, items: list[Any]) -> list[list[Message]]:
    """One list of neutral messages per wire message (a wire message may hold several, e.g. an
    Anthropic user turn with two tool results and a text block becomes tool, tool, user)."""
    if wire_api == "openai_responses":
        # an assistant turn spans several items: it is held by the item that starts it (so counts
        # of wire items, which request deltas use, still map onto neutral messages)
        return _merge_responses_turns([_responses_item(item) for item in items])
    conv = {
        "anthropic_messages": _anthropic,
        "anthropic_count_tokens": _anthropic,
        "openai_chat": _chat,
        "gemini": _gemini,
    }.get(wire_api, _chat)
    return [conv(m) if isinstance(m, dict) else [Message("user", _text_parts(m))] for m in items]


def _merge_responses_turns(per_item: list[list[Message]]) -> list[list[Message]]:
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


def system_prompt(wire_api: str, fields: dict[str, Any]) -> Message | None:
    """The request's top-level system prompt (Anthropic `system`, Responses `instructions`, Gemini
    `systemInstruction`); chat completions keep theirs in the message list."""
    if wire_api in ("anthropic_messages", "anthropic_count_tokens"):
        value = fields.get("system")
    elif wire_api == "openai_responses":
        value = fields.get("instructions")
    elif wire_api == "gemini":
        value = fields.get("systemInstruction") or fields.get("system_instruction") or {}
        value = value.get("parts") if isinstance(value, dict) else value
    else:
        return None
    parts = _text_parts(value)
    return Message("system", parts) if parts else None


def tool_defs(fields: dict[str, Any]) -> list[ToolDef]:
    """The request's tool definitions in any wire API's spelling."""
    out: list[ToolDef] = []
    for t in fields.get("tools") or []:
        if not isinstance(t, dict):
            continue
        for decl in t.get("functionDeclarations") or t.get("function_declarations") or []:  # Gemini
            out.append(
                ToolDef(str(decl.get("name", "")), str(decl.get("description") or ""), decl.get("parameters") or {})
            )
        fn = f if isinstance(f := t.get("function"), dict) else t  # chat | others
        if "name" in fn:
            params = fn.get("input_schema") or fn.get("parameters") or {}
            out.append(
                ToolDef(str(fn["name"]), str(fn.get("description") or ""), params if isinstance(params, dict) else {})
            )
    return out


GENERATE_FIELDS = (
    "max_tokens",
    "max_output_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "reasoning",
    "reasoning_effort",
    "thinking",
    "generationConfig",
    "tool_choice",
)


def generate_config(fields: dict[str, Any]) -> dict[str, Any]:
    """The sampling settings (and tool choice) the request carried, as recorded, unconverted."""
    return {k: fields[k] for k in GENERATE_FIELDS if k in fields}


def tool_choice(value: Any) -> tuple[str, str | None]:
    """A recorded tool choice in any wire API's spelling as ("auto" | "any" | "none" | "tool", tool
    name); ("auto", None) when none was sent, which is what every wire API then does."""
    kind = value.get("type") if isinstance(value, dict) else value
    if kind in ("none",):
        return "none", None
    if kind in ("any", "required"):
        return "any", None
    if kind in ("tool", "function") and isinstance(value, dict):
        name = value.get("name") or (value.get("function") or {}).get("name")
        return ("tool", str(name)) if name else ("auto", None)
    return "auto", None
