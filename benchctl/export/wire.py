"""Requests as the model saw them, in one neutral shape shared by every export format.

The gateway records each request in the agent's own wire API (Anthropic Messages, OpenAI
Responses, chat completions, Gemini). The wire modules (benchctl.gateway.wire) read those wire
messages into `Message`s (system / user / assistant / tool, with text, reasoning and tool calls),
so that no export format has to know a wire API. Nothing is made up: a block with no neutral
equivalent (an image, a server tool result) is kept as recorded in a `data` part.
"""

from __future__ import annotations

from typing import Any

from benchctl.gateway.wire import find
from benchctl.gateway.wire.chat import WIRE as CHAT
from benchctl.gateway.wire.neutral import Message, Part, ToolCall, ToolDef, reasoning_from_record, tool_call

__all__ = [
    "Message",
    "Part",
    "ToolCall",
    "ToolDef",
    "generate_config",
    "messages",
    "response_message",
    "system_prompt",
    "tool_call",
    "tool_choice",
    "tool_defs",
]


def response_message(response: dict[str, Any] | None) -> Message | None:
    """The assistant message for a recorded response ({"text", "tool_calls", "reasoning"?}): its
    reasoning blocks first, then its text; None when nothing came back."""
    if not response:
        return None
    text = response.get("text") or ""
    parts = [reasoning_from_record(r) for r in response.get("reasoning") or [] if isinstance(r, dict)]
    parts += [Part("text", text)] if text else []
    calls = [
        tool_call(c.get("id"), c.get("name"), c.get("input"), signature=c.get("signature"))
        for c in response.get("tool_calls") or []
    ]
    return Message("assistant", parts, calls)


def messages(wire_api: str, items: list[Any]) -> list[list[Message]]:
    """One list of neutral messages per wire message (a wire message may hold several, e.g. an
    Anthropic user turn with two tool results and a text block becomes tool, tool, user). A wire
    API without a module (none recorded today) is read as chat completions."""
    return (find(wire_api) or CHAT).read_items(items)


def system_prompt(wire_api: str, fields: dict[str, Any]) -> Message | None:
    """The request's top-level system prompt (Anthropic `system`, Responses `instructions`, Gemini
    `systemInstruction`); chat completions keep theirs in the message list."""
    w = find(wire_api)
    return w.read_system(fields) if w is not None else None


def tool_defs(wire_api: str, fields: dict[str, Any]) -> list[ToolDef]:
    """The request's tool definitions."""
    w = find(wire_api)
    return w.read_tools(fields) if w is not None else []


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
