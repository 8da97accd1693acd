#!/usr/bin/env python3
"""Benchmark `benchctl scan` with a grep scanner over a large synthetic sweep (default 10,000 runs).

Each run is a completed ReAct-shaped run: meta.json and a transcript of `--turns` turns (default 10,
about 55 events and 30 KB, the size of the demo run's), each turn a `model_call` (request delta with
the previous tool output, the response), `assistant`, `tool_call`, a time `notice` and `tool_result`;
3 % of runs try `curl`. Then, in fresh processes (Python start-up, imports and the CLI included),
round by round so machine load hits every row alike:

- floors: `python -c` reading every transcript's bytes (start-up, listing runs/, open + read), and
  `python -c` creating one file per run (temp file + rename, a result's size, in a fresh
  directory): what any scan that leaves a result per run must do at least;
- scan, new: `benchctl scan DIR --scanner network_attempts` with no results yet: read and hash
  every transcript, extract its tool calls and results, match, write 10,000 result files (one
  filesystem sync per 2,000);
- scan, rerun: the same command again: every transcript hashed and every result read and kept;
- scan --force: every transcript scanned again and every result rewritten;
- report: `benchctl report DIR --format json` before any scan and after (the scans table reads
  every result file).

Prints the median wall and CPU (user + sys of the child) seconds over `--repeat` rounds.

    python scripts/bench_scan.py [--runs 10000] [--turns 10] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_report import run_child  # noqa: E402  (scripts/ is on sys.path when run as a script)

FLOOR = """
import os, sys
runs = os.path.join(sys.argv[1], "runs")
n = 0
for name in os.listdir(runs):
    with open(os.path.join(runs, name, "transcript.jsonl"), "rb") as f:
        n += len(f.read())
"""
# What any tool that leaves one result file per run must do: create 10,000 files of a result's size
# (temp file + rename, as benchctl writes them), in a fresh directory.
WRITE_FLOOR = """
import os, sys
folder = os.path.join(sys.argv[1], "write-floor")
os.makedirs(folder)
data = b"x" * 900
for i in range(int(sys.argv[2])):
    tmp = os.path.join(folder, f".r{i}.json.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(folder, f"r{i}.json"))
"""
LINES = [
    f"2026-03-14T02:{m:02d}:{s:02d} GET /wiki/page-{m * 60 + s} 200 user=u{s % 7}" for m in range(60) for s in range(60)
]


def transcript(run_id: str, turns: int, rng: random.Random, curl: bool) -> bytes:
    t = 1.79e9
    out = []
    seq = 0

    def emit(type_: str, source: str, **fields: object) -> None:
        nonlocal seq, t
        t += 0.3
        out.append(orjson.dumps({"v": 1, "seq": seq, "t": t, "type": type_, "source": source, **fields}))
        seq += 1

    emit("run_start", "runner", run_id=run_id, spec={"task": "bench", "harness": "react", "model": "m", "budget": "2h"})
    previous = ""
    for i in range(1, turns + 1):
        command = "curl -s http://example.com/api" if curl and i == turns // 2 else f"grep -c u{i % 7} /data/access.log"
        output = "\n".join(rng.sample(LINES, 25))
        if i == 1:
            request = {
                "conv": "call-1",
                "base": None,
                "keep": 0,
                "set": {"model": "m", "system": "You are an investigator. " * 20, "tools": [{"name": "bash"}]},
                "append": [{"role": "user", "content": "Investigate /data and write /work/report.md."}],
            }
        else:
            request = {
                "conv": "call-1",
                "base": f"call-{i - 1}",
                "keep": 2 * i - 3,
                "append": [
                    {"$response": f"call-{i - 1}"},
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": f"t{i - 1}", "content": previous}],
                    },
                ],
            }
        emit(
            "model_call",
            "gateway",
            call_id=f"call-{i}",
            wire_api="anthropic_messages",
            requested_model="m",
            served_model="m",
            status=200,
            outcome="ok",
            usage={"input_tokens": 1000 * i, "output_tokens": 60},
            cost_usd=0.001,
            request=request,
            response={
                "text": f"Step {i}: looking at the access log.",
                "tool_calls": [{"name": "bash", "input": {"command": command}}],
            },
        )
        emit("assistant", "harness", turn=i, text=f"Step {i}: looking at the access log.", stop_reason="tool_use")
        emit("tool_call", "harness", id=f"t{i}", name="bash", input={"command": command})
        emit("notice", "policy", kind="time", text="[benchctl] Time remaining: 1h 50m of 2h 00m.", tool_id=f"t{i}")
        emit(
            "tool_result",
            "harness",
            id=f"t{i}",
            name="bash",
            output=output,
            exit_code=0,
            is_error=False,
            truncated=False,
        )
        previous = output
    emit("run_end", "runner", status="completed")
    return b"\n".join(out) + b"\n"


def generate(root: Path, n_runs: int, turns: int, seed: int = 0) -> int:
    """The sweep; returns how many runs try curl."""
    rng = random.Random(seed)
    curls = 0
    for i in range(n_runs):
        run_id = f"bench__react__m__2h__s{i}"
        run = root / "runs" / run_id
        run.mkdir(parents=True)
        curl = rng.random() < 0.03
        curls += curl
        (run / "transcript.jsonl").write_bytes(transcript(run_id, turns, rng, curl))
        meta = {"schema": 1, "run_id": run_id, "status": "completed", "task": "bench", "harness": "react", "model": "m"}
        (run / "meta.json").write_bytes(orjson.dumps(meta | {"budget": "2h", "budget_s": 7200.0, "seed": i}))
    return curls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="generate into this directory and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-scan-"))
    root.mkdir(parents=True, exist_ok=True)
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=repo)
    try:
        if not (root / "runs").is_dir():
            curls = generate(root, args.runs, args.turns)
            print(f"generated {args.runs:,} runs ({curls} try curl) in {root}")
        size = sum(f.stat().st_size for f in (root / "runs").glob("*/transcript.jsonl"))
        print(f"transcripts: {size / 1e6:.0f} MB, {size / args.runs / 1e3:.0f} KB each")
        scan = [sys.executable, "-m", "benchctl", "scan", str(root), "--scanner", "network_attempts"]
        report = [sys.executable, "-m", "benchctl", "report", str(root), "--format", "json", "--no-cache"]
        rows: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.repeat):
            shutil.rmtree(root / "scans", ignore_errors=True)
            shutil.rmtree(root / "write-floor", ignore_errors=True)
            steps = [
                ("floor: read every transcript", [sys.executable, "-c", FLOOR, str(root)]),
                ("floor: create a file per run", [sys.executable, "-c", WRITE_FLOOR, str(root), str(args.runs)]),
                ("report, no scans", report),
                ("scan, new (a result per run written)", scan),
                ("scan, rerun (all kept)", scan),
                ("scan --force (all rescanned)", [*scan, "--force"]),
                ("report, with the scans table", report),
            ]
            for name, cmd in steps:
                rows.setdefault(name, []).append(run_child(cmd, env))
        print(f"\nmedian of {args.repeat} rounds, {args.runs:,} runs, load {os.getloadavg()[0]:.1f}:\n")
        print(f"| {'step':<38} | wall s | CPU s |")
        print(f"|{'-' * 40}|--------|-------|")
        for name, values in rows.items():
            wall = statistics.median(w for w, _ in values)
            cpu = statistics.median(c for _, c in values)
            print(f"| {name:<38} | {wall:6.2f} | {cpu:5.2f} |")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
