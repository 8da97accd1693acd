#!/usr/bin/env python3
"""Benchmark `benchctl report` on a large synthetic sweep (default 10,000 runs with grades) against
the floor: plain Python reading and parsing the same files.

Writes runs/<run_id>/meta.json and grades/{coverage,tldr,combined}/<run_id>.json (38 coverage
items each, with quotes and reasons of realistic length; 10 % of runs also get a follow-up
coverage grade; 2 % are error runs, 5 % fell back) into a temp dir, then, in fresh processes,
alternating round by round so that machine load hits every row alike:

- floor: `FLOOR` below run with `python -c` — interpreter start-up, `import orjson`, list
  runs/ and each grades/<grader>/ with os.scandir, `open(path, "rb").read()` + `orjson.loads`
  of every meta.json and grade file. No aggregation, no output.
- CLI: `benchctl report DIR --format json` (Python start-up, typer, imports, load, aggregate,
  render) cold — no cache file, so every file is parsed and the cache is written; with
  `--no-cache` — every file parsed, no cache read or written; warm — the cache from the run
  before. The same steps without the CLI framework (`build_report` + `to_json` from
  `python -c`) show what the CLI layer (benchctl.cli and typer) costs.

Prints median wall and CPU (user + sys of the child) seconds and the median of each round's ratio
to that round's floor. Goal (issue 19): cold <= 1.5x the floor, warm <= 1.2x, judged on the CPU
ratio: on a shared machine wall time is mostly waiting for a core (and, for the floor, which reads
134 MB where a warm report reads its 13 MB cache, for file pages evicted by other work), so the
wall ratio swings with the load. Also times the loader in process and the other output formats.

With `--against DIR` the CLI rows of another checkout (`against ...`) run in the same rounds.

    python scripts/bench_report.py [--runs 10000] [--repeat 5] [--keep DIR] [--against DIR [--against-path P]]
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
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.rigs.report import add_grade, add_run, coverage_items

CLUSTERS = {f"F{i}": ["operators", "timeline", "infrastructure", "incidents", "people"][i % 5] for i in range(1, 39)}
BUDGETS = [("10m", 600), ("30m", 1800), ("2h", 7200), ("4h", 14400), ("8h", 28800)]

# The floor: what any program must do to read these results (argv[1] = the results dir).
FLOOR = """
import os, sys, orjson
root = sys.argv[1]
runs = os.path.join(root, "runs")
with os.scandir(runs) as it:
    names = [e.name for e in it if e.is_dir()]
for name in names:
    try:
        with open(os.path.join(runs, name, "meta.json"), "rb") as f:
            orjson.loads(f.read())
    except FileNotFoundError:
        pass
with os.scandir(os.path.join(root, "grades")) as it:
    grader_dirs = [e.path for e in it if e.is_dir()]
for d in grader_dirs:
    with os.scandir(d) as it:
        for e in it:
            if e.name.endswith(".json"):
                with open(e.path, "rb") as f:
                    orjson.loads(f.read())
"""
# The report's own work without the CLI framework (argv[1] = dir, argv[2] = "cache" or not).
NO_CLI = """
import sys
from benchctl.report.build import build_report
from benchctl.report.render_text import to_json
sys.stdout.write(to_json(build_report(sys.argv[1], cache=sys.argv[2] == "cache")))
"""


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
                    fb = (
                        [{"t": 10.0, "from": m, "to": "prov/model-old", "reason": "refusal"}]
                        if rng.random() < 0.05
                        else []
                    )
                    status = "error" if rng.random() < 0.02 else "completed"
                    rid = add_run(
                        root,
                        model=m,
                        harness=h,
                        budget=b,
                        budget_s=bs,
                        seed=s,
                        status=status,
                        cost_usd=round(rng.uniform(0.1, 5), 3),
                        elapsed_s=bs * rng.uniform(0.7, 1.0),
                        fallbacks=fb,
                    )
                    if status == "error":
                        continue
                    strict = {
                        f: (rng.choice([0.0, 0.0, 0.2, 0.6, 1.0]) if rng.random() > 0.01 else None) for f in CLUSTERS
                    }
                    cov = sum(v for v in strict.values() if v is not None) / len(strict)
                    by_cluster = {c: rng.random() for c in set(CLUSTERS.values())}
                    add_grade(root, "coverage", rid, cov, by_cluster=by_cluster, items=coverage_items(strict, CLUSTERS))
                    tl = rng.random()
                    add_grade(root, "tldr", rid, tl)
                    add_grade(root, "combined", rid, 0.7 * cov + 0.3 * tl if rng.random() > 0.01 else None)
                    if rng.random() < 0.1:
                        add_grade(
                            root,
                            "coverage",
                            rid,
                            min(1.0, cov + 0.1),
                            tag="followup-1",
                            by_cluster=by_cluster,
                            items=coverage_items(strict, CLUSTERS),
                        )


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall s, CPU s = user + sys) of one child process, output discarded. With `env`, the child
    runs with it from / (so that `python -c` does not import benchctl from the current directory)."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd="/" if env is not None else None
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5, help="rounds of the floor/CLI comparison")
    ap.add_argument("--keep", type=Path, help="generate into this dir (or reuse it) and keep it")
    ap.add_argument(
        "--against",
        type=Path,
        help="another checkout (e.g. `git archive <rev> | tar -x -C DIR`): its "
        "CLI rows run in the same rounds, with PYTHONPATH=DIR[:--against-path]",
    )
    ap.add_argument(
        "--against-path",
        default="",
        help="more PYTHONPATH for --against (e.g. a dir holding the "
        "dependency versions that code ran with: pip install --target DIR typer==0.29.2)",
    )
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_report_"))
    try:
        t0 = time.perf_counter()
        if not (root / "runs").is_dir():
            generate(root, args.runs)
            # Real sweeps are graded minutes or days before they are reported; files modified in
            # the last few seconds are deliberately not cached (see report/cache.py), so age them.
            old = time.time() - 3600
            for p in root.rglob("*.json"):
                os.utime(p, (old, old))
        gen_s = time.perf_counter() - t0
        files = sum(1 for _ in root.rglob("*.json"))
        size_mb = sum(p.stat().st_size for p in root.rglob("*.json")) / 1e6
        cache_file = root / ".benchctl-report-cache"

        exe = shutil.which("benchctl")
        cli = [exe] if exe else [sys.executable, "-c", "from benchctl.cli import app; app()"]
        report = cli + ["report", str(root), "--format", "json"]
        rows: dict[str, Callable[[], list[str]]] = {
            "floor: list + read + orjson.loads": lambda: [sys.executable, "-c", FLOOR, str(root)],
            "CLI --format json, cold (no cache file)": lambda: (cache_file.unlink(missing_ok=True), report)[1],
            "CLI --format json --no-cache": lambda: report + ["--no-cache"],
            "CLI --format json, warm (cache written)": lambda: report,
            "  same without typer (python -c), --no-cache": lambda: [sys.executable, "-c", NO_CLI, str(root), "no"],
            "  same without typer (python -c), warm": lambda: [sys.executable, "-c", NO_CLI, str(root), "cache"],
        }
        envs: dict[str, dict[str, str] | None] = dict.fromkeys(rows)
        if args.against:
            # The other checkout's cold, --no-cache and warm rows, in that order (its warm row reads
            # the cache its cold row wrote), in every round.
            env = {
                **os.environ,
                "PYTHONPATH": ":".join(p for p in (str(args.against.resolve()), args.against_path) if p),
            }
            for name in [n for n in rows if n.startswith("CLI")]:
                against = f"{name.replace('CLI', 'against', 1)}"
                rows[against] = rows[name]
                envs[against] = env
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
        for _ in range(args.repeat):
            for name, cmd in rows.items():
                results[name].append(run_child(cmd(), envs[name]))
        floor = results["floor: list + read + orjson.loads"]

        from benchctl.report.build import build_report
        from benchctl.report.load import load_results

        res = load_results(root, cache=False)
        inproc = [
            ("load, no cache", timed(lambda: load_results(root, cache=False), args.repeat)),
            ("load, cache warm", timed(lambda: load_results(root), args.repeat)),
            ("load + aggregate, cache warm", timed(lambda: build_report(root), args.repeat)),
        ]
        others = []
        for fmt in ("csv", "markdown", "table"):
            cmd = cli + ["report", str(root), "--format", fmt]
            others.append((f"CLI --format {fmt}, warm", timed(lambda: run_child(cmd), args.repeat)))
        cmd = cli + [
            "report",
            str(root),
            "--format",
            "json",
            "--html",
            str(root / "r.html"),
            "--plots",
            str(root / "plots"),
        ]
        others.append(("CLI with --html and --plots, warm", timed(lambda: run_child(cmd), 1)))

        print(
            f"results: {res.stats['runs']} runs, {res.stats['grades']} grade files ({files} JSON files, "
            f"{size_mb:.0f} MB); generated in {gen_s:.1f} s; cache file {cache_file.stat().st_size / 1e6:.1f} MB; "
            f"{args.repeat} rounds; load average {os.getloadavg()[0]:.1f}"
        )
        print(f"{'in fresh processes (medians)':<46} {'wall s':>7} {'CPU s':>6} {'wall ×':>7} {'CPU ×':>6}  goal")
        print("-" * 88)
        for name, samples in results.items():
            wall = statistics.median(w for w, _ in samples)
            cpu = statistics.median(c for _, c in samples)
            rw = statistics.median(w / f[0] for (w, _), f in zip(samples, floor))
            rc = statistics.median(c / f[1] for (_, c), f in zip(samples, floor))
            limit = (
                1.5
                if ("cold" in name or "--no-cache" in name) and name.startswith(("CLI", "against"))
                else 1.2
                if name.startswith(("CLI", "against"))
                else None
            )
            goal = "" if limit is None else f"CPU ≤ {limit}× " + ("ok" if rc <= limit else "MISSED")
            print(f"{name:<46} {wall:>7.3f} {cpu:>6.3f} {rw:>6.2f}× {rc:>5.2f}×  {goal}")
        print(f"\n{'in process / other formats (median wall s)':<46} {'s':>7}")
        print("-" * 56)
        for name, s in inproc + others:
            print(f"{name:<46} {s:>7.3f}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
