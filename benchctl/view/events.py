"""Transcript events prepared for the timeline: a category (colour, minimap lane), the time since
the run started and the share of the budget used, and the fields a type's template does not show
itself, so that fields and event types this viewer does not know yet are still shown."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from benchctl.view.reasoning import Reasoning, is_opaque, mask_opaque, of_event

# Lanes of the minimap, in display order, and the category of each known event type.
LANES = ("assistant", "tool", "model", "target", "notice", "policy", "alert", "phase", "other")
CATEGORY = {
    "assistant": "assistant",
    "tool_call": "tool",
    "tool_result": "tool",
    "model_call": "model",
    "target_call": "target",
    "notice": "notice",
    "reprompt": "policy",
    "revision_request": "policy",
    "refusal": "alert",
    "fallback": "alert",
    "model_error": "alert",
    "error": "alert",
    "followup": "phase",
    "run_start": "phase",
    "run_end": "phase",
}
COMMON = frozenset({"v", "seq", "t", "type", "source"})
# Fields each type's template shows itself; anything else appears under "other fields".
SHOWN: dict[str, frozenset[str]] = {
    k: frozenset(v)
    for k, v in {
        "run_start": {"run_id", "spec", "budget_s"},
        "run_end": {"status", "error", "usage", "cost_usd", "turns", "elapsed_s"},
        "model_call": {
            "call_id",
            "requested_model",
            "served_model",
            "status",
            "latency_ms",
            "ttfb_ms",
            "usage",
            "cost_usd",
            "stop_reason",
            "refusal",
            "partial",
            "request",
            "response",
            "retries",
            "error",
        },
        "assistant": {"turn", "text", "stop_reason", "thinking", "reasoning"},
        "tool_call": {"id", "name", "input"},
        "tool_result": {"id", "name", "output", "exit_code", "is_error", "truncated", "timed_out"},
        "notice": {"kind", "text"},
        "reprompt": {"text", "reason"},
        "revision_request": {"text"},
        "refusal": {"model", "action", "text", "stop_reason"},
        "fallback": {"from", "to", "reason"},
        "model_error": {"model", "status", "error"},
        "followup": {"index", "prompt", "budget_s"},
        "target_call": {
            "role",
            "tool",
            "model",
            "served_model",
            "request",
            "text",
            "usage",
            "cost_usd",
            "latency_s",
            "refusal",
            "error",
        },
        "hook": {"event", "tool_name", "decision", "cli"},
        "error": {"message"},
        "stderr": {"text"},
    }.items()
}
REASONING_EVENT = frozenset({"kind", "text"})  # a harness_event of reasoning shows these as reasoning
CLIP_LINES = 24  # longer texts start collapsed
MAX_TEXT = 100_000  # characters of one field put in the page; the event's JSON link has it all
MAX_DETAIL = 20_000  # the same for collapsed details (request deltas, responses, specs)


@dataclass(slots=True)
class EventView:
    ev: dict[str, Any]
    seq: int
    line: int  # line number in transcript.jsonl (= seq in a well-formed one)
    type: str
    cat: str
    rel_s: float | None  # seconds since the run started
    frac: float | None  # share of the budget used at this event
    extra: list[tuple[str, str]]  # (field, pretty value) not shown by the type's template
    reasoning: list[Reasoning]  # shown inline (reasoning.of_event)
    reasoning_at: int | None = None  # the same reasoning is shown with this event (seq) instead: once_each


def category(type_: str) -> str:
    return CATEGORY.get(type_, "other")


def pretty(value: Any) -> str:
    """A field value as text: strings as they are, anything else as indented JSON."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def prepare(ev: dict[str, Any], line: int, t0: float | None, budget_s: float | None) -> EventView:
    type_ = str(ev.get("type", "unknown"))
    t = ev.get("t")
    rel = t - t0 if isinstance(t, (int, float)) and t0 is not None and not math.isnan(t0) else None
    frac = rel / budget_s if rel is not None and budget_s else None
    thought = of_event(ev)
    shown = SHOWN.get(type_, frozenset()) | (REASONING_EVENT if type_ == "harness_event" and thought else frozenset())
    extra = [(k, pretty(mask_opaque(v))) for k, v in ev.items() if k not in COMMON and k not in shown and v is not None]
    seq = ev.get("seq")
    return EventView(
        ev=ev,
        seq=seq if isinstance(seq, int) else line,
        line=line,
        type=type_,
        cat=category(type_),
        rel_s=rel,
        frac=frac,
        extra=extra,
        reasoning=thought,
    )


def once_each(views: list[EventView]) -> list[EventView]:
    """A turn's reasoning shown once in the timeline: a harness that records the turn's reasoning in
    its `assistant` event (ReAct) records it again in the model call just before (the gateway's
    copy); that call then points to the turn instead of repeating it."""
    for call, turn in zip(views, views[1:]):
        if (
            call.type == "model_call"
            and turn.type == "assistant"
            and call.reasoning
            and call.reasoning == turn.reasoning
        ):
            call.reasoning, call.reasoning_at = [], turn.seq
    return views


ENVELOPE = frozenset({"v", "seq", "t"})  # format version, number, epoch time: shown only as #N and time since start


def texts(ev: dict[str, Any]) -> list[str]:
    """The text a reader sees of an event, which search matches: every string and number inside
    it (numbers as JSON writes them), not its keys, JSON punctuation, true/false/null, the
    envelope's numbers (every event has them: searching "17" would find every event) or opaque
    data (signatures, redacted or encrypted reasoning: `reasoning.is_opaque`)."""
    out: list[str] = []
    stack: list[Any] = [v for k, v in ev.items() if k not in ENVELOPE]
    stack.reverse()
    while stack:  # depth first, in the event's order
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed([x for k, x in v.items() if not is_opaque(k, v)]))
        elif isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, float):
            out.append(orjson.dumps(v).decode())  # as the transcript writer wrote it
        elif isinstance(v, int) and not isinstance(v, bool):
            out.append(str(v))
    return out


def matches(ev: dict[str, Any], folded_query: str) -> bool:
    """Whether one of the event's texts contains the query, both Unicode case-folded
    (`str.casefold`: "ÄRGER" finds "ärger", "STRASSE" finds "Straße")."""
    return any(folded_query in s.casefold() for s in texts(ev))


def is_long(text: Any) -> bool:
    return isinstance(text, str) and (text.count("\n") >= CLIP_LINES or len(text) > 3000)


def cap(text: Any, limit: int = MAX_TEXT) -> str:
    s = text if isinstance(text, str) else pretty(text)
    return s if len(s) <= limit else s[:limit] + f"\n… [{len(s) - limit:,} more characters: open the event's JSON]"


def minimap(
    times: Any,
    types: list[str],
    t0: float | None,
    span_s: float,
    buckets: int = 120,
    since: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Counts of events per lane and time bucket over [t0, t0 + span_s], plus the first line
    number in each lane's bucket (its mark links there). With `since`, an earlier result for the
    same t0, span and buckets, only the lines after those it counted are counted (a live run's
    transcript grows at its end), so a growing minimap costs the new lines, not the whole run."""
    n = min(len(times), len(types))  # a refresh may be extending the arrays
    if since is not None and since["lines"] <= n:
        counts = {lane: c[:] for lane, c in since["counts"].items()}
        first = {lane: f[:] for lane, f in since["first"].items()}
        start = since["lines"]
    else:
        counts = {lane: [0] * buckets for lane in LANES}
        first = {lane: [None] * buckets for lane in LANES}
        start = 0
    if t0 is None or not span_s or span_s <= 0:
        return {"buckets": buckets, "counts": counts, "first": first, "max": 0, "lines": n}
    scale = buckets / span_s
    for i in range(start, n):
        t = times[i]
        if t != t:  # NaN: a line without a time
            continue
        b = int((t - t0) * scale)
        b = 0 if b < 0 else buckets - 1 if b >= buckets else b
        lane = CATEGORY.get(types[i], "other")
        counts[lane][b] += 1
        if first[lane][b] is None:
            first[lane][b] = i
    peak = max((max(c) for c in counts.values()), default=0)
    return {"buckets": buckets, "counts": counts, "first": first, "max": peak, "lines": n}
