"""Runs for the scan tests, in the on-disk shape `benchctl run` writes: meta.json and a transcript
written through the real TranscriptWriter, built from a few event helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchctl.jsonio import write_json_atomic
from benchctl.transcript import Redactor, TranscriptWriter

Event = tuple[str, str, dict[str, Any]]  # (type, source, fields)

TOOLS = [{"name": "bash", "description": "run a command", "input_schema": {"type": "object"}}]


def opening_call(prompt: str = "Investigate /data and write /work/report.md.") -> Event:
    """The first request of the agent's conversation (stored whole, with its tools)."""
    request = {
        "conv": "call-1",
        "base": None,
        "keep": 0,
        "set": {"model": "m", "system": "You are an investigator.", "tools": TOOLS, "max_tokens": 4096},
        "append": [{"role": "user", "content": prompt}],
    }
    return ("model_call", "gateway", {"call_id": "call-1", "wire_api": "anthropic_messages", "request": request})


def say(text: str, reasoning: list[dict[str, Any]] | None = None) -> Event:
    fields: dict[str, Any] = {"turn": 1, "text": text, "stop_reason": "end_turn"}
    if reasoning is not None:
        fields["reasoning"] = reasoning
    return ("assistant", "harness", fields)


def call(command: str, name: str = "bash", id: str = "t1") -> Event:
    return ("tool_call", "harness", {"id": id, "name": name, "input": {"command": command}})


def result(output: str, exit_code: int | None = 0, name: str = "bash", id: str = "t1", is_error: bool = False) -> Event:
    return (
        "tool_result",
        "harness",
        {"id": id, "name": name, "output": output, "exit_code": exit_code, "is_error": is_error, "truncated": False},
    )


def target(text: str, tool: str = "chat") -> Event:
    return ("target_call", "targets", {"role": "target", "tool": tool, "model": "scripted/target", "text": text})


def notice(text: str = "[benchctl] Time remaining: 1m of 2m.") -> Event:
    return ("notice", "policy", {"kind": "time", "text": text})


def make_run(
    results: Path,
    run_id: str,
    events: list[Event],
    *,
    status: str = "completed",
    model: str = "m",
    meta: bool = True,
) -> Path:
    """A run directory: run_start, `events`, run_end through the real writer, then meta.json (a run
    made again is written anew)."""
    run = results / "runs" / run_id
    run.mkdir(parents=True, exist_ok=True)
    (run / "transcript.jsonl").unlink(missing_ok=True)
    parts = run_id.split("__")
    spec = {"task": parts[0], "harness": parts[1], "model": model, "budget": parts[3], "seed": int(parts[-1][1:])}
    with TranscriptWriter(run / "transcript.jsonl", Redactor([])) as tr:
        tr.emit("run_start", "runner", run_id=run_id, spec=spec)
        for type_, source, fields in events:
            tr.emit(type_, source, **fields)
        tr.emit("run_end", "runner", status=status)
    if meta:
        write_json_atomic(
            run / "meta.json",
            {"schema": 1, "run_id": run_id, "status": status, "spec": spec, **spec, "budget_s": 120.0, "cost_usd": 0.0},
        )
    return run
