"""What every ReAct conversation shares: the neutral `Turn` a response becomes, tool results, the
`Conversation` protocol, and the options all wire APIs read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchctl.gateway.wire.neutral import Part, ToolCall
from harnesses.react.tools import TOOL_SPECS

REASONING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    refusal: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    reasoning: list[Part] = field(default_factory=list)  # the answer's reasoning blocks, in order


@dataclass
class ToolResult:
    call: ToolCall
    output: str
    is_error: bool = False


class Conversation(Protocol):
    def call(self, timeout: float) -> Turn: ...
    def add_tool_results(self, results: list[ToolResult]) -> None: ...
    def add_user(self, text: str) -> None: ...


def tool_specs(options: dict[str, Any]) -> list[dict[str, Any]]:
    """The sandbox tools plus any extra host-side tools (e.g. target tools) passed as option extra_tool_specs."""
    return TOOL_SPECS + list(options.get("extra_tool_specs") or [])


def clients() -> Any:
    from benchctl.gateway import clients  # imported late: only a real run needs the SDKs

    return clients


def arguments(raw: str | None) -> Any:
    """A function call's JSON arguments (OpenAI wires send them as a string); kept as
    {"_unparsed": raw} when they are not JSON."""
    try:
        return json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_unparsed": raw}


def dump(obj: Any) -> dict[str, Any]:
    return obj.model_dump(exclude_none=True, mode="json") if hasattr(obj, "model_dump") else dict(obj)
