"""Conversation mode of the run page: a window of events read as a conversation.

The timeline shows every event as its own card (a ReAct turn is five: model call, assistant, tool
call, notice, tool result). Here they are grouped as a reader follows them:

- a **turn**: the assistant's text with its reasoning; the model call that produced it (served
  model, latency, tokens, cost) as the turn's header line when it comes right before it. The
  harness records the turn's reasoning in the assistant event and the gateway in the model call:
  it is shown once, from the assistant event, else from the model call.
- a **tool** block: the tool call, its result (matched by id) and the notices the policies sent
  with it. A notice is shown once: ReAct appends notices to the tool output the model received,
  so their text is taken off the end of the output shown here (the timeline keeps it whole).
- every other event as on the timeline.

Blocks are built per window of lines; a result whose call is in another window (or arrives later
on a live page) is an orphan block that run.js moves into its call's block.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from benchctl.view.events import EventView
from benchctl.view.reasoning import Reasoning


@dataclass(slots=True)
class Turn:
    call: EventView | None  # the model_call
    assistant: EventView | None
    reasoning: list[Reasoning]
    rsig: str  # a digest of the reasoning texts: run.js hides a repeat across windows
    kind: str = "turn"


@dataclass(slots=True)
class ToolBlock:
    tool_id: str
    call: EventView | None  # None: an orphan result (its call is elsewhere)
    result: EventView | None = None
    notices: list[EventView] = field(default_factory=list)
    output: Any = None  # the result's output without the notices' text
    kind: str = "tool"


@dataclass(slots=True)
class Single:
    view: EventView
    kind: str = "event"


Block = Turn | ToolBlock | Single


def rsig(reasoning: list[Reasoning]) -> str:
    if not reasoning:
        return ""
    joined = "\x00".join(f"{r.redacted}:{r.opaque_chars}:{r.text}" for r in reasoning)
    return f"{zlib.crc32(joined.encode('utf-8', 'replace')):08x}"


def _tool_id(v: EventView) -> str | None:
    tid = v.ev.get("id")
    return str(tid) if tid is not None else None


def _strip_notices(output: Any, notices: list[EventView]) -> Any:
    """`output` without the notices' texts appended to it (each after a blank line, in order)."""
    if not isinstance(output, str) or not notices:
        return output
    tail = "".join("\n\n" + str(n.ev.get("text")) for n in notices)
    return output[: -len(tail)] if output.endswith(tail) else output


def blocks(views: list[EventView]) -> list[Block]:
    out: list[Block] = []
    tools: dict[str, ToolBlock] = {}  # tool id -> its block in this window
    notices_for: dict[str, list[EventView]] = {}  # notices before their tool block's result

    for i, v in enumerate(views):
        if v.type == "model_call":
            nxt = views[i + 1] if i + 1 < len(views) else None
            if nxt is not None and nxt.type == "assistant":
                continue  # the header of the next turn
            out.append(Turn(v, None, v.reasoning, rsig(v.reasoning)))
        elif v.type == "assistant":
            prev = views[i - 1] if i > 0 else None
            call = prev if prev is not None and prev.type == "model_call" else None
            thought = v.reasoning or (call.reasoning if call is not None else [])
            out.append(Turn(call, v, thought, rsig(thought)))
        elif v.type == "tool_call" and (tid := _tool_id(v)) is not None:
            tools[tid] = ToolBlock(tid, v)
            out.append(tools[tid])
        elif v.type == "tool_result" and (tid := _tool_id(v)) is not None:
            if tid not in tools or tools[tid].result is not None:  # its call is in another window
                tools[tid] = ToolBlock(tid, None)
                out.append(tools[tid])
            tools[tid].result = v
            tools[tid].notices += notices_for.pop(tid, [])
        elif v.type == "notice" and (tid := str(v.ev.get("tool_id") or "")):
            if tid in tools and tools[tid].result is not None:
                tools[tid].notices.append(v)  # after its result
            else:
                notices_for.setdefault(tid, []).append(v)  # before it (ReAct): joins the result
        else:
            out.append(Single(v))
    for tid, early in notices_for.items():  # notices whose result is not in this window
        if tid in tools:
            tools[tid].notices += early
        else:
            tools[tid] = ToolBlock(tid, None, notices=early)
            out.append(tools[tid])
    for block in out:
        if isinstance(block, ToolBlock) and block.result is not None:
            block.output = _strip_notices(block.result.ev.get("output"), block.notices)
    return out
