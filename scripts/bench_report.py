#!/usr/bin/env python3
"""Benchmark `benchctl report` on a large synthetic sweep (default 10,000 runs with grades).

Writes runs/<run_id>/meta.json and grades/{coverage,tldr,combined}/<run_id>.json (38 coverage
items each, with quotes and reasons of realistic length; 10 % of runs also get a follow-up
coverage grade) into a temp dir, then times: the load step alone, load + aggregation, and the
full CLI in a fresh process (`benchctl report DIR --format ...`, Python start-up and imports
included), both cold (`--no-cache`: every file parsed) and with the parse cache warm (the
normal case from the second report on). Goal: < 2 s for the CLI on 10,000 runs. Prints a table.

    python scripts/bench_report.py [--runs 10000] [--repeat 3] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.report_fixtures import add_grade, add_run, coverage_items  # noqa: E402

CLUSTERS = {f"F{i}": ["operators", "timeline", "infrastructure", "incidents", "people"][i % 5] for i in range(1, 39)}
BUDGETS = [("10m", 600), ("30m", 1800), ("2h", 7200), ("4h", 14400), ("8h", 28800)]


def generate(root: Path, n_runs: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    models = [f"prov/model-{i}" for i in range(10)]
    harnesses = ["react", "claude_code"]
    per_cfg = max(1, n_runs // (len(models) * len(harnesses) * len(BUDGETS)))
    n = 0
    for m in models:
        for h in harnesses:
            for b, bs in BUDGETS:
                for s in range(per_cfg):
                    if n >= n_runs:
                        return
                    n += 1
                    fb = [{"t": 10.0, "from": m, "to": "prov/model-old", "reason": "refusal"}] if rng.random() < 0.05 else []
                    status = "error" if rng.random() < 0.02 else "completed"
                    rid = add_run(root, model=m, harness=h, budget=b, budget_s=bs, seed=s, status=status,
                                  cost_usd=round(rng.uniform(0.1, 5), 3), elapsed_s=bs * rng.uniform(0.7, 1.0),
                                  fallbacks=fb)
                    if status == "error":
                        continue
                    strict = {f: (rng.choice([0.0, 0.0, 0.2, 0.6, 1.0]) if rng.random() > 0.01 else None) for f in CLUSTERS}
                    cov = sum(v for v in strict.values() if v is not None) / len(strict)
                    by_cluster = {c: rng.random() for c in set(CLUSTERS.values())}
                    add_grade(root, "coverage", rid, cov, by_cluster=by_cluster, items=coverage_items(strict, CLUSTERS))
                    tl = rng.random()
                    add_grade(root, "tldr", rid, tl)
                    add_grade(root, "combined", rid, 0.7 * cov + 0.3 * tl if rng.random() > 0.01 else None)
                    if rng.random() < 0.1:
                        add_grade(root, "coverage", rid, min(1.0, cov + 0.1), tag="followup-1",
                                  by_cluster=by_cluster, items=coverage_items(strict, CLUSTERS))


def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="generate into this dir and keep it")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_report_"))
    try:
        t0 = time.perf_counter()
        if not (root / "runs").is_dir():
            generate(root, args.runs)
            # Real sweeps are graded minutes or days before they are reported; files modified in
            # the last few seconds are deliberately not cached (see report/load.py), so age them.
            old = time.time() - 3600
            for p in root.rglob("*.json"):
                os.utime(p, (old, old))
        gen_s = time.perf_counter() - t0
        files = sum(1 for _ in root.rglob("*.json"))
        size_mb = sum(p.stat().st_size for p in root.rglob("*.json")) / 1e6

        from benchctl.report.build import build_report
        from benchctl.report.load import load_results
        res = load_results(root, cache=False)
        rows: list[tuple[str, float]] = [
            ("load, no cache (in process)", timed(lambda: load_results(root, cache=False), args.repeat)),
            ("load, cache warm (in process)", timed(lambda: load_results(root), args.repeat)),
            ("load + aggregate, cache warm (in process)", timed(lambda: build_report(root), args.repeat)),
        ]
        exe = shutil.which("benchctl")
        base = [exe] if exe else [sys.executable, "-c", "from benchctl.cli import app; app()"]
        cmd = base + ["report", str(root), "--format", "json", "--no-cache"]
        rows.append(("CLI `--format json --no-cache` (cold)",
                     timed(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), args.repeat)))
        for fmt in ("json", "csv", "markdown", "table"):
            cmd = base + ["report", str(root), "--format", fmt]
            rows.append((f"CLI `benchctl report --format {fmt}`",
                         timed(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), args.repeat)))
        cmd = base + ["report", str(root), "--format", "json", "--html", str(root / "r.html"), "--plots", str(root / "plots")]
        rows.append(("CLI with --html and --plots", timed(lambda: subprocess.run(
            cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), 1)))

        print(f"results: {res.stats['runs']} runs, {res.stats['grades']} grade files "
              f"({files} JSON files, {size_mb:.0f} MB); generated in {gen_s:.1f} s")
        print(f"{'step':<44} {'median s':>9}  goal")
        print("-" * 66)
        for name, s in rows:
            goal = "< 2 s " + ("ok" if s < 2 else "MISSED") if name.startswith("CLI `") else ""
            print(f"{name:<44} {s:>9.3f}  {goal}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
