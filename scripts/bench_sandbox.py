#!/usr/bin/env python3
"""Benchmark: DockerSandbox lifecycle on a warm image.

    create->ready   DockerSandbox.start() (inspect image, create, start) until `exec true` returns
    start()         create + start only
    first exec      the first `exec true` after start()
    exec            a later `exec true` (steady-state per-command overhead)
    collect         collect() of /work with 20 small files
    stop            stop() (force remove)
    docker_client() opening a Docker client (benchctl.sandbox.docker_client), which a DockerSandbox
                    made without one pays once, on its first call; the phases above share one client

Usage: python scripts/bench_sandbox.py [--runs 20] [--image benchctl-sandbox:latest]
Prints median and p90 (ms) per phase. Goal: create->ready median < 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _stats import percentile

from benchctl.sandbox.base import SandboxSpec
from benchctl.sandbox.docker_client import SANDBOX_TIMEOUT, docker_client
from benchctl.sandbox.docker_sandbox import DockerSandbox


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--image", default="benchctl-sandbox:latest")
    args = ap.parse_args()
    client = docker_client(SANDBOX_TIMEOUT)
    phases: dict[str, list[float]] = {
        k: [] for k in ("create->ready", "start()", "first exec", "exec", "collect", "stop", "docker_client()")
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        (data / "x.log").write_text("x\n")
        gw = Path(tmp) / "gw"
        gw.mkdir()
        # one warm-up run, not counted
        with DockerSandbox(SandboxSpec(image=args.image, run_id="bench-warmup"), client=client) as box:
            box.exec("true")
        for i in range(args.runs):
            box = DockerSandbox(
                SandboxSpec(image=args.image, run_id="bench-sandbox", data_dir=data, gateway_dir=gw), client=client
            )
            t0 = time.perf_counter()
            box.start()
            t1 = time.perf_counter()
            box.exec("true")
            t2 = time.perf_counter()
            box.exec("true")
            t3 = time.perf_counter()
            box.exec("for i in $(seq 1 20); do echo $i > /work/f$i; done")
            t4 = time.perf_counter()
            box.collect(["/work"], Path(tmp) / f"out{i}")
            t5 = time.perf_counter()
            box.stop()
            t6 = time.perf_counter()
            docker_client(SANDBOX_TIMEOUT).close()
            t7 = time.perf_counter()
            for k, v in (
                ("create->ready", t2 - t0),
                ("start()", t1 - t0),
                ("first exec", t2 - t1),
                ("exec", t3 - t2),
                ("collect", t5 - t4),
                ("stop", t6 - t5),
                ("docker_client()", t7 - t6),
            ):
                phases[k].append(v * 1000)
    client.close()
    print(f"DockerSandbox lifecycle, {args.runs} runs, image {args.image}")
    print(f"{'phase':<17}{'median ms':>11}{'p90 ms':>9}{'min ms':>9}{'max ms':>9}")
    for k, xs in phases.items():
        print(f"{k:<17}{statistics.median(xs):>11.0f}{percentile(xs, 90):>9.0f}{min(xs):>9.0f}{max(xs):>9.0f}")


if __name__ == "__main__":
    main()
