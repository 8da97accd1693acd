#!/usr/bin/env python3
"""Benchmark `benchctl run --ray` on a real Ray cluster on this machine (root: a private network
namespace, see benchctl/testing/ray_cluster.py).

    python scripts/bench_ray.py [--runs 16] [--slots 4] [--sequential 8] [--turns 10]

1. Throughput: `--runs` runs (each `--turns` scripted turns with one bash exec per turn in its
   own sandbox) locally with concurrency `--slots`, on a 1-node cluster with `--slots` slots,
   on a 2-node cluster with half the slots per node (the same total) and with `--slots` per node. runs/min is counted from
   the first run's start to the last run's end as the driver saw them (the driver's own start,
   connecting to Ray and the node checks are shown separately as "setup s").
2. Per-run overhead of Ray: `--sequential` runs one at a time, locally and on a 1-node
   cluster. For each run: the driver-observed time (run_started -> run_finished) and the run's
   own `elapsed_s` (sandbox start -> end, measured where it ran). Ray's overhead per run is the
   difference of the driver-observed medians.

All nodes of the cluster share this machine's 2 cores and one Docker Engine, so a second node
adds Ray capacity (slots, raylets) but no CPU: the 2-node figure shows what the executor costs
when spreading, not what a second machine would add.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchctl.jsonio import read_json
from benchctl.testing.ray_cluster import RayCluster

REPO = Path(__file__).resolve().parents[1]
BENCHCTL = [sys.executable, "-c", "from benchctl.cli import app; app()"]
TASK = """name = "{name}"
instructions = "Benchmark."
data = "data"
tool_timeout = 30
[early_exit]
enabled = false
"""


def make(tmp: Path, name: str, n_turns: int) -> tuple[Path, str]:
    turns = [
        {"text": "look", "tool_calls": [{"name": "bash", "input": {"command": "grep -c ERROR /data/app.log"}}]}
        for _ in range(n_turns - 2)
    ]
    turns += [
        {"tool_calls": [{"name": "create", "input": {"path": "report.md", "file_text": "disk full\n"}}]},
        {"tool_calls": [{"name": "submit", "input": {}}]},
    ]
    task = tmp / name
    (task / "data").mkdir(parents=True)
    (task / "data" / "app.log").write_text("ok\nERROR disk full\n" * 200)
    (task / "task.toml").write_text(TASK.format(name=name))
    script = tmp / f"{name}.json"
    script.write_text(json.dumps({"turns": turns, "after_end": "stop"}))
    return task, f"scripted/{script}"


def measure(stderr: str, out: Path, t_spawn: float) -> dict[str, float]:
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    starts = {e["run_id"]: e["t"] for e in events if e.get("event") == "run_started"}
    metas = [read_json(p / "meta.json") for p in sorted((out / "runs").iterdir())]
    ends = {m["run_id"]: m["ended_at"] for m in metas}  # set by the driver when the run is recorded
    first, last = min(starts.values()), max(ends.values())
    first_run = min(starts, key=lambda r: starts[r])
    return {
        "runs": len(metas),
        "errors": sum(m["status"] != "completed" for m in metas),
        "setup": first - t_spawn,
        "span": last - first,
        "per_min": 60 * len(metas) / (last - first),
        "observed_p50": statistics.median(ends[r] - starts[r] for r in ends),
        "first": ends[first_run] - starts[first_run],
        "elapsed_p50": statistics.median(m["elapsed_s"] for m in metas),
        "nodes": len({(m.get("node") or {}).get("id") for m in metas}),
    }


def run_local(task: Path, model: str, out: Path, seeds: int, concurrency: int, tmp: Path) -> dict[str, float]:
    import subprocess

    t0 = time.time()
    p = subprocess.run(
        [
            *BENCHCTL,
            "run",
            str(task),
            "--model",
            model,
            "--budget",
            "5m",
            "--seeds",
            str(seeds),
            "--concurrency",
            str(concurrency),
            "--out",
            str(out),
            "--progress",
            "json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if p.returncode != 0:
        raise SystemExit(f"local run failed: {p.stderr[-2000:]}")
    return measure(p.stderr, out, t0)


def run_ray(
    cluster: RayCluster, task: Path, model: str, out: Path, seeds: int, concurrency: int, tmp: Path
) -> dict[str, float]:
    err = tmp / f"{out.name}.err"
    t0 = time.time()
    pid = cluster.spawn(
        [
            *BENCHCTL,
            "run",
            str(task),
            "--model",
            model,
            "--budget",
            "5m",
            "--seeds",
            str(seeds),
            "--concurrency",
            str(concurrency),
            "--out",
            str(out),
            "--progress",
            "json",
            "--ray",
            cluster.address,
        ],
        cwd=str(REPO),
        stderr=err,
    )
    if cluster.wait(pid, 3600) != 0:
        raise SystemExit(f"ray run failed: {err.read_text()[-2000:]}")
    return measure(err.read_text(), out, t0)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--sequential", type=int, default=8)
    ap.add_argument("--turns", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as d:
        tmp = Path(d)
        rows = []
        seq: dict[str, dict[str, float]] = {}
        task, model = make(tmp, "rl", a.turns)
        rows.append((f"local, concurrency {a.slots}", run_local(task, model, tmp / "local", a.runs, a.slots, tmp)))
        seq["local"] = run_local(task, model, tmp / "local-seq", a.sequential, 1, tmp)
        for nodes, slots in ((1, a.slots), (2, max(1, a.slots // 2)), (2, a.slots)):
            tag = f"{nodes}x{slots}"
            with RayCluster(tmp / f"cluster{tag}", nodes=nodes, slots=slots) as cluster:
                task, model = make(tmp, f"r{tag}", a.turns)
                rows.append(
                    (
                        f"ray, {nodes} node(s) x {slots} slots",
                        run_ray(cluster, task, model, tmp / f"ray{tag}", a.runs, nodes * slots, tmp),
                    )
                )
                if nodes == 1:
                    seq["ray, 1 node"] = run_ray(cluster, task, model, tmp / "ray-seq", a.sequential, 1, tmp)
        print(f"## Throughput: {a.runs} runs of {a.turns} scripted turns (one bash exec per turn)\n")
        print("| where | runs | errors | nodes used | setup s | span s | runs/min | run p50 s (driver) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for label, m in rows:
            print(
                f"| {label} | {m['runs']:.0f} | {m['errors']:.0f} | {m['nodes'] if 'ray' in label else '-'} | "
                f"{m['setup']:.1f} | {m['span']:.1f} | {m['per_min']:.1f} | {m['observed_p50']:.2f} |"
            )
        print(f"\n## Per-run overhead: {a.sequential} runs one at a time (medians, s)\n")
        print(
            "| where | first run (cold process), driver s | run as the driver saw it | run where it ran "
            "(elapsed_s) | outside the run |"
        )
        print("|---|---:|---:|---:|---:|")
        for label, m in seq.items():
            print(
                f"| {label} | {m['first']:.2f} | {m['observed_p50']:.2f} | {m['elapsed_p50']:.2f} | "
                f"{m['observed_p50'] - m['elapsed_p50']:.2f} |"
            )
        added = seq["ray, 1 node"]["observed_p50"] - seq["local"]["observed_p50"]
        print(f"\nRay adds {added:.2f} s per run (driver-observed median, ray 1 node - local).")


if __name__ == "__main__":
    main()
