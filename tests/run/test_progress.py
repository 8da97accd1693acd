"""Live progress: JSON lines when not a TTY, and the rich table renders from transcript events."""

from __future__ import annotations

import io
import json

import pytest

from benchctl.run.progress import JsonLinesProgress, RichProgress, make_progress
from benchctl.run.sweep import RunSpec


def spec(i: int) -> RunSpec:
    return RunSpec(f"t__react__m__1m__s{i}", "t", "/t", "react", "anthropic/m", "1m", 60.0, i, None, None)


def test_json_lines_progress() -> None:
    buf = io.StringIO()
    with JsonLinesProgress(buf) as p:
        p.started(spec(0))
        p.event(spec(0), {"type": "model_call", "usage": {"input_tokens": 10, "output_tokens": 5}, "cost_usd": 0.01})
        p.finished(spec(0), {"status": "completed", "elapsed_s": 1.0, "turns": 3, "cost_usd": 0.01})
        p.skipped(spec(1), {"status": "timeout"})
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert [x["event"] for x in lines] == ["run_started", "run_finished", "run_skipped", "summary"]
    assert lines[-1]["by_status"] == {"completed": 1} and lines[-1]["skipped"] == 1
    assert lines[-1]["cost_usd"] == 0.01


def test_rich_progress_tracks_turns_tokens_cost_and_status() -> None:
    from rich.console import Console

    out = io.StringIO()
    p = RichProgress(2, console=Console(file=out, width=200, force_terminal=False))
    p.started(spec(0))
    for ev in (
        {"type": "run_start", "t": 0},
        {"type": "assistant", "turn": 1},
        {"type": "model_call", "usage": {"input_tokens": 1000, "output_tokens": 200}, "cost_usd": 0.5},
        {"type": "model_call", "usage": {"input_tokens": 10}, "cost_usd": None},
        {"type": "tool_call", "name": "bash"},
    ):
        p.event(spec(0), ev)
    line = p.lines[spec(0).run_id]
    assert (line.turns, line.tokens, line.cost, line.cost_unknown, line.status) == (1, 1210, 0.5, True, "tool: bash")
    Console(file=out, width=200).print(p._table())
    assert "1,210" in out.getvalue() and "$0.5000+?" in out.getvalue()
    with p:
        p.finished(spec(0), {"status": "timeout", "elapsed_s": 60, "turns": 1, "cost_usd": None})
    assert "timeout" in out.getvalue() and "Summary:" in out.getvalue()


def test_make_progress_is_json_when_not_a_tty() -> None:
    assert isinstance(make_progress(1, "auto"), JsonLinesProgress)  # pytest's stderr is not a TTY
    assert type(make_progress(1, "quiet")).__name__ == "Progress"
    with pytest.raises(ValueError, match="use one of auto, rich, json, quiet"):
        make_progress(1, "jsno")  # a typo is an error, not a silent rich table


def test_a_reasoning_only_assistant_event_is_not_a_turn() -> None:
    """Claude Code and Codex write their thinking before a tool call as an assistant event with no
    text: the turn it belongs to is counted once."""
    p = RichProgress(1)
    p.started(spec(0))
    p.event(spec(0), {"type": "assistant", "text": "", "reasoning": [{"type": "reasoning", "text": "hmm"}]})
    p.event(spec(0), {"type": "assistant", "text": "done", "reasoning": [{"type": "reasoning", "text": "so"}]})
    p.event(spec(0), {"type": "assistant", "text": "again"})
    assert p.lines[spec(0).run_id].turns == 2
