#!/usr/bin/env python3
"""Benchmark `benchctl run` with the scripted model: concurrency and the harness's own overhead.

    python scripts/bench_run.py [--levels 1,8,16,32] [--turns 10] [--overhead-turns 200]

1. Concurrency: N runs at once (concurrency N), each a 10-turn scripted investigation with a
   bash call per turn in its own sandbox. Prints wall time, runs/min, errors and per-run p50/max.
2. Overhead per turn: one run of many turns whose tool call is answered on the host (an unknown
   tool name: no sandbox exec), so a turn is a gateway round trip + the harness's own work. The
   harness overhead is the turn time minus the model-call latency the gateway measured. A bash
   turn (`true` in the sandbox) is measured too, for scale.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchctl.jsonio import read_json, read_jsonl
from benchctl.run import execute, resolve_config

TASK = """name = "{name}"
instructions = "Benchmark."
data = "data"
tool_timeout = 30
[early_exit]
enabled = false
"""


def make(tmp: Path, name: str, turns: list[dict]) -> tuple[Path, str]:
    task = tmp / name
    (task / "data").mkdir(parents=True)
    (task / "data" / "app.log").write_text("ok\nERROR disk full\n" * 200)
    (task / "task.toml").write_text(TASK.format(name=name))
    script = tmp / f"{name}.json"
    script.write_text(json.dumps({"turns": turns, "after_end": "stop"}))
    return task, f"scripted/{script}"


def sweep(task: Path, model: str, out: Path, seeds: int, concurrency: int, budget: str = "5m") -> float:
    r = resolve_config(
        task=task,
        models=[model],
        harnesses=[],
        budgets=[budget],
        seeds=seeds,
        out=out,
        concurrency=concurrency,
        fallback=None,
        variants=[],
        sweep=None,
    )
    t0 = time.perf_counter()
    execute(r, progress_mode="quiet")
    return time.perf_counter() - t0


def concurrency_rows(tmp: Path, levels: list[int], n_turns: int) -> list[tuple]:
    turns = [
        {"text": "look", "tool_calls": [{"name": "bash", "input": {"command": "grep -c ERROR /data/app.log"}}]}
        for _ in range(n_turns - 2)
    ]
    turns += [
        {"tool_calls": [{"name": "create", "input": {"path": "report.md", "file_text": "disk full\n"}}]},
        {"tool_calls": [{"name": "submit", "input": {}}]},
    ]
    rows = []
    for n in levels:
        task, model = make(tmp, f"conc{n}", turns)
        out = tmp / f"out{n}"
        wall = sweep(task, model, out, seeds=n, concurrency=n)
        metas = [read_json(p / "meta.json") for p in sorted((out / "runs").iterdir())]
        errors = sum(m["status"] != "completed" for m in metas)
        el = sorted(m["elapsed_s"] for m in metas)
        rows.append((n, len(metas), errors, wall, 60 * len(metas) / wall, statistics.median(el), el[-1]))
    return rows


def overhead_rows(tmp: Path, n: int) -> list[tuple]:
    rows = []
    for label, call in (
        ("host-answered tool", {"name": "noop_tool", "input": {}}),
        ("bash `true` in sandbox", {"name": "bash", "input": {"command": "true"}}),
    ):
        turns = [{"text": "t", "tool_calls": [call]} for _ in range(n)] + [
            {"tool_calls": [{"name": "submit", "input": {}}]}
        ]
        name = "ovh" + str(len(rows))
        task, model = make(tmp, name, turns)
        out = tmp / f"out-{name}"
        sweep(task, model, out, seeds=1, concurrency=1)
        run = next((out / "runs").iterdir())
        ev = read_jsonl(run / "transcript.jsonl")
        assistants = [e["t"] for e in ev if e["type"] == "assistant"]
        per_turn = [(b - a) * 1000 for a, b in zip(assistants, assistants[1:])]
        latency = [e.get("latency_ms") for e in ev if e["type"] == "model_call" and e.get("latency_ms") is not None]
        tool_ms = []
        calls = {e["id"]: e["t"] for e in ev if e["type"] == "tool_call"}
        for e in ev:
            if e["type"] == "tool_result" and e["id"] in calls:
                tool_ms.append((e["t"] - calls[e["id"]]) * 1000)
        med_turn, med_lat, med_tool = (
            statistics.median(per_turn),
            statistics.median(latency),
            statistics.median(tool_ms),
        )
        rows.append((label, len(per_turn), med_turn, med_lat, med_tool, med_turn - med_lat - med_tool))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="1,8,16,32")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--overhead-turns", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-run-") as d:
        tmp = Path(d)
        print(f"## Concurrent runs ({a.turns} scripted turns each, one bash exec per turn)\n")
        print("| concurrent | runs | errors | wall s | runs/min | run p50 s | run max s |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in concurrency_rows(tmp, [int(x) for x in a.levels.split(",")], a.turns):
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.2f} | {r[6]:.2f} |")
        print(f"\n## Per-turn cost, one run of {a.overhead_turns} turns (medians, ms)\n")
        print("| tool | turns | turn | model call (gateway) | tool | harness overhead |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in overhead_rows(tmp, a.overhead_turns):
            print(f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} |")


if __name__ == "__main__":
    main()
