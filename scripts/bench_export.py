#!/usr/bin/env python3
"""Benchmark `benchctl export` on long transcripts: wall time and peak memory.

Writes one run with N transcript events (tests/rigs/export.py: ReAct-shaped turns with gateway
request deltas and ~1.5 KB tool outputs) for each N, then runs `benchctl export --to inspect` and
`--to atif` in a fresh process each and reads that process's peak resident memory (ru_maxrss).
"baseline" is a process that only imports the exporter, so "peak − baseline" is what exporting
itself costs. Streaming means that cost stays roughly flat as the transcript grows. Prints a table.

    python scripts/bench_export.py [--events 10000 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.rigs.export import write_long_run  # noqa: E402

CHILD = """
import json, resource, sys, time
from pathlib import Path
to, results, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
import benchctl.export.{module}
t = time.perf_counter()
if to != "none":
    from benchctl.export import export
    export(results, to, out)
print(json.dumps({{"wall_s": time.perf_counter() - t, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def child(to: str, module: str, results: Path, out: Path) -> dict[str, float]:
    r = subprocess.run(
        [sys.executable, "-c", CHILD.format(module=module), to, str(results), str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--keep", type=Path, help="keep the generated results and exports here")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-export-"))
    rows = []
    try:
        for n in args.events:
            results = base / f"r{n}"
            run = write_long_run(results, n)
            size = (run / "transcript.jsonl").stat().st_size / 2**20
            for to in ("inspect", "atif"):
                baseline = child("none", to, results, base / "none")
                out = base / f"{to}{n}"
                t = time.perf_counter()
                m = child(to, to, results, out)
                files = sum(p.stat().st_size for p in out.iterdir()) / 2**20
                rows.append(
                    (n, size, to, m["wall_s"], time.perf_counter() - t, baseline["peak_mb"], m["peak_mb"], files)
                )
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    head = (
        "events",
        "transcript MB",
        "to",
        "export s",
        "process s",
        "baseline MB",
        "peak MB",
        "peak−base MB",
        "output MB",
    )
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for n, size, to, wall, proc, b, p, files in rows:
        print(f"{n:,} | {size:.1f} | {to} | {wall:.1f} | {proc:.1f} | {b:.0f} | {p:.0f} | {p - b:.0f} | {files:.1f}")


if __name__ == "__main__":
    main()
