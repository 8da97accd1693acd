"""Scripted models for the limits tests, served by FakeUpstreamServer as a priced model
(`py:tests.rigs.limits:<name>`): investigators that answer by how far their own run's
conversation has got (so many runs sharing one fake upstream each get the same three turns),
a priced answer for a standalone gateway, and a priced judge for `benchctl grade --max-cost`."""

from __future__ import annotations

import threading
from typing import Any

from benchctl.gateway.scripted import ScriptRequest

# $0.10 per call on anthropic/claude-haiku-4-5 ($1 per million input tokens): a run of three calls costs $0.30
PRICED = {"input_tokens": 100_000, "output_tokens": 0}


def _turn(req: ScriptRequest) -> int:
    return sum(1 for m in req.messages if m["role"] == "assistant")


def _tool(name: str, **inp: Any) -> dict[str, Any]:
    return {"text": "", "tool_calls": [{"name": name, "input": inp}]}


def three_calls(req: ScriptRequest) -> dict[str, Any]:
    """look (bash), write the report, submit; each call $0.10, answered after 0.4 s."""
    turns = [
        _tool("bash", command="grep -c ERROR /data/app.log"),
        _tool("create", path="report.md", file_text="# Report\nERROR disk full on db-1\n"),
        _tool("submit"),
    ]
    return {**turns[min(_turn(req), 2)], "usage": PRICED, "delay": 0.4}


def slow_look(req: ScriptRequest) -> dict[str, Any]:
    """sleep 2 s in a tool (time for a test to inject a fault), write the report, submit."""
    turns = [
        _tool("bash", command="sleep 2; echo looked"),
        _tool("create", path="report.md", file_text="# Report\n"),
        _tool("submit"),
    ]
    return {**turns[min(_turn(req), 2)], "usage": {"input_tokens": 100, "output_tokens": 10}}


def priced_ok(req: ScriptRequest) -> dict[str, Any]:
    """'ok', $0.10 a call: a standalone gateway's cost cap."""
    return {"text": "ok", "usage": PRICED}


# While a test holds an event here, a judge call about finding F6 (the demo rubric's second coverage
# batch) waits for it: grading is then interrupted with those calls in flight.
F6_GATE: list[threading.Event] = []


def priced_judge(req: ScriptRequest) -> dict[str, Any]:
    """The fake judge (benchctl.grading.fake_judge) at $0.10 a call."""
    from benchctl.grading.fake_judge import judge

    if F6_GATE and any("- id F6:" in str(m.get("text", "")) for m in req.messages if m.get("role") == "user"):
        F6_GATE[0].wait(60)
    return {**judge(req), "usage": PRICED}
