"""Scripted investigators for the limits tests, served by FakeUpstreamServer as a priced model
(`py:tests.limits_scripts:<name>`): each answers by how far its own run's conversation has got,
so many runs sharing one fake upstream each get the same three turns."""
from __future__ import annotations

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
    turns = [_tool("bash", command="grep -c ERROR /data/app.log"),
             _tool("create", path="report.md", file_text="# Report\nERROR disk full on db-1\n"),
             _tool("submit")]
    return {**turns[min(_turn(req), 2)], "usage": PRICED, "delay": 0.4}


def slow_look(req: ScriptRequest) -> dict[str, Any]:
    """sleep 2 s in a tool (time for a test to inject a fault), write the report, submit."""
    turns = [_tool("bash", command="sleep 2; echo looked"),
             _tool("create", path="report.md", file_text="# Report\n"),
             _tool("submit")]
    return {**turns[min(_turn(req), 2)], "usage": {"input_tokens": 100, "output_tokens": 10}}
