"""A long run in the on-disk shapes `benchctl run` writes (meta.json + transcript.jsonl through the
real TranscriptWriter), for the export streaming test and scripts/bench_export.py.

Each turn is what a ReAct run records: a `model_call` whose request is a gateway request delta
(benchctl.gateway.recording's format: the previous answer as {"$response": id} plus the new tool
result), then `assistant`, `tool_call`, `tool_result` and a time `notice` — 6 events per turn."""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import orjson

from benchctl.layout import make_run_id
from benchctl.transcript import Redactor, TranscriptWriter

SYSTEM = "You are an investigator in a sandbox. " * 20
TOOLS = [{"name": "bash", "description": "Run a bash command in the sandbox. " * 10,
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()
EVENTS_PER_TURN = 6


def write_long_run(results: Path, n_events: int, *, output_chars: int = 1500, seed: int = 0,
                   task: str = "long", model: str = "scripted/long.json") -> Path:
    """A completed run with about `n_events` transcript events; returns its run directory."""
    rng = random.Random(seed)
    run_id = make_run_id(task, "react", model, "2h", 0)
    run = results / "runs" / run_id
    run.mkdir(parents=True)
    t0 = time.time()
    usage_total = {"input_tokens": 0, "cached_input_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0,
                   "reasoning_tokens": 0}
    turns = max(1, (n_events - 2) // EVENTS_PER_TURN)
    with TranscriptWriter(run / "transcript.jsonl", Redactor([])) as tr:
        tr.emit("run_start", "runner", run_id=run_id, spec={"task": task, "model": model}, budget_s=7200.0)
        prev_output = ""
        for i in range(1, turns + 1):
            call, tool_id = f"call-{i}", f"toolu_{i:08d}"
            if i == 1:
                request: dict[str, Any] = {"conv": "call-1", "base": None, "keep": 0,
                                           "set": {"model": model, "system": SYSTEM, "tools": TOOLS, "max_tokens": 8192},
                                           "append": [{"role": "user", "content": "Investigate /data and write /work/report.md."}]}
            else:
                result = {"type": "tool_result", "tool_use_id": f"toolu_{i - 1:08d}",
                          "content": prev_output + "\n\n[benchctl] Time remaining: 1h 00m of 2h 00m."}
                request = {"conv": "call-1", "base": f"call-{i - 1}", "keep": 1 + 2 * (i - 2),
                           "append": [{"$response": f"call-{i - 1}"}, {"role": "user", "content": [result]}]}
            command = " ".join(rng.choice(WORDS) for _ in range(8))
            usage = {"input_tokens": 200 + 40 * i, "cached_input_tokens": 0, "cache_write_tokens": 0,
                     "output_tokens": 30, "reasoning_tokens": 0}
            for k, v in usage.items():
                usage_total[k] += v
            tr.emit("model_call", "gateway", call_id=call, wire_api="anthropic_messages", path="/v1/messages",
                    requested_model=model, served_model=model, stream=False, status=200, latency_ms=1.0, ttfb_ms=1.0,
                    usage=usage, cost_usd=0.0, stop_reason="tool_use", refusal=False, request=request,
                    response={"text": f"Step {i}.", "tool_calls": [{"id": tool_id, "name": "bash",
                                                                    "input": {"command": command}}]})
            tr.emit("assistant", "harness", turn=i, text=f"Step {i}.", stop_reason="tool_use", tool_calls=1)
            tr.emit("tool_call", "harness", id=tool_id, name="bash", input={"command": command})
            prev_output = " ".join(rng.choice(WORDS) for _ in range(output_chars // 6))[:output_chars]
            tr.emit("tool_result", "harness", id=tool_id, name="bash", output=prev_output, exit_code=0,
                    is_error=False, truncated=False, timed_out=False)
            tr.emit("notice", "policy", kind="time", text="[benchctl] Time remaining: 1h 00m of 2h 00m.", tool_id=tool_id)
        tr.emit("run_end", "runner", status="completed", error=None, usage=usage_total, cost_usd=0.0, turns=turns)
    (run / "artifacts").mkdir()
    (run / "artifacts" / "report.md").write_text("# Report\n\nNothing found.\n")
    meta = {"schema": 1, "run_id": run_id, "status": "completed", "task": task, "harness": "react", "model": model,
            "budget": "2h", "budget_s": 7200.0, "seed": 0, "variant": None, "spec": {"task": task, "seed": 0},
            "started_at": t0, "ended_at": time.time(), "elapsed_s": time.time() - t0, "usage": usage_total,
            "cost_usd": 0.0, "served_models": {model: turns}, "fallbacks": [], "turns": turns,
            "artifacts": ["report.md"], "benchctl_version": "0.1.0"}
    (run / "meta.json").write_bytes(orjson.dumps(meta))
    return run


# ------------------------------------------------------------------------------- hand-made runs

def write_run(results: Path, events: list[tuple[str, str, dict[str, Any]]], *, run_id: str | None = None,
              artifacts: dict[str, str | bytes] | None = None, **meta: Any) -> Path:
    """A run directory whose transcript holds `events` ((type, source, fields), written by the real
    TranscriptWriter with no secrets to scrub) and whose meta.json holds `meta` over defaults."""
    base = {"schema": 1, "status": "completed", "task": "t", "harness": "react", "model": "scripted/m.json",
            "budget": "1m", "budget_s": 60.0, "seed": 0, "variant": None, "started_at": 1_800_000_000.0,
            "ended_at": 1_800_000_060.0, "elapsed_s": 60.0, "usage": {"input_tokens": 0, "output_tokens": 0},
            "cost_usd": 0.0, "served_models": {}, "fallbacks": [], "benchctl_version": "0.1.0"}
    base.update(meta)
    run_id = run_id or make_run_id(base["task"], base["harness"], base["model"], base["budget"], base["seed"],
                                   base.get("variant"), base.get("tools"))
    base["run_id"] = run_id
    run = results / "runs" / run_id
    (run / "artifacts").mkdir(parents=True)
    with TranscriptWriter(run / "transcript.jsonl", Redactor([])) as tr:
        for kind, source, fields in events:
            tr.emit(kind, source, **fields)
    for name, content in (artifacts or {}).items():
        p = run / "artifacts" / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    base.setdefault("artifacts", sorted(artifacts or {}))
    (run / "meta.json").write_bytes(orjson.dumps(base))
    return run


def model_calls(requests: list[tuple[dict[str, Any], dict[str, Any]]], wire_api: str = "anthropic_messages",
                model: str = "scripted/m.json") -> list[tuple[str, str, dict[str, Any]]]:
    """`model_call` events for full (request body, response) pairs, their request deltas made by the
    gateway's own RequestRecorder."""
    from benchctl.gateway.recording import RequestRecorder

    rec = RequestRecorder()
    out = []
    for i, (body, response) in enumerate(requests, 1):
        call_id = f"call-{i}"
        delta = rec.delta(call_id, wire_api, body)
        rec.note_response(call_id, wire_api, response)
        out.append(("model_call", "gateway", {
            "call_id": call_id, "wire_api": wire_api, "requested_model": body.get("model", model), "served_model": model,
            "stream": False, "status": 200, "latency_ms": 500.0, "ttfb_ms": 100.0,
            "usage": {"input_tokens": 100 * i, "cached_input_tokens": 10, "cache_write_tokens": 5, "output_tokens": 20,
                      "reasoning_tokens": 0},
            "cost_usd": 0.001 * i, "stop_reason": "tool_use" if response.get("tool_calls") else "end_turn",
            "refusal": False, "request": delta, "response": response}))
    return out
