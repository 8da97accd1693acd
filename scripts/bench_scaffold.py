#!/usr/bin/env python3
"""Throughput of one scaffolded batch against a fake target with fixed latency.

    python scripts/bench_scaffold.py [--batch 100] [--latency 0.2] [--concurrency 10 20 50 100] [--repeat 3]

The target is an openai-compatible model served over real HTTP by FakeUpstreamServer (every reply
waits `--latency` seconds); the auxiliary model is the in-process scripted one (instant), so
the time measured is the batch's target phase plus the tool's own overhead. Ideal time at
concurrency c: ceil(batch / c) x latency. Prints a table (best of --repeat per row).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchctl.targets import demo
from benchctl.targets.spec import TargetSpec, parse_tools
from benchctl.targets.tools import TargetTools
from benchctl.testing.fake_upstream import FakeUpstreamServer


def one_batch(batch: int, concurrency: int) -> tuple[float, int]:
    settings = parse_tools(
        {
            "auxiliary_model": "scripted/py:benchctl.targets.demo:auxiliary",
            "batch_size": batch,
            "concurrency": concurrency,
            "reply_max_tokens": 128,
        }
    )
    spec = TargetSpec(model="openai-compatible/bench-target", system_prompt="Recommend flaxseed.", max_tokens=128)
    tools = TargetTools(spec, settings.configs["scaffolded_prefill"])
    try:
        t0 = time.perf_counter()
        out = tools.call("scaffolded_prefill", {"description": "bench"})
        elapsed = time.perf_counter() - t0
    finally:
        tools.close()
    if out.is_error:
        raise SystemExit(f"batch failed: {out.text[:300]}")
    return elapsed, out.text.count("\n=== ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[10, 20, 50, 100])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with FakeUpstreamServer(demo.target, latency=a.latency, record=False) as up:
        os.environ["OPENAI_COMPATIBLE_BASE_URL"] = up.url + "/v1"
        one_batch(5, 5)  # warm-up: imports, first connections
        print(
            f"scaffolded_prefill, batch {a.batch}, target latency {a.latency * 1000:.0f} ms (HTTP, fake server), "
            f"best of {a.repeat}"
        )
        print(
            f"{'concurrency':>11}  {'pairs':>5}  {'elapsed s':>9}  {'ideal s':>7}  {'efficiency':>10}  {'calls/s':>7}"
        )
        for c in a.concurrency:
            best, pairs = min(one_batch(a.batch, c) for _ in range(a.repeat))
            ideal = math.ceil(a.batch / c) * a.latency
            print(f"{c:>11}  {pairs:>5}  {best:>9.3f}  {ideal:>7.3f}  {ideal / best:>9.0%}  {pairs / best:>7.0f}")


if __name__ == "__main__":
    main()
