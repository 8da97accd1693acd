#!/usr/bin/env python3
"""What the limiter costs, and whether it keeps a connection limit busy.

1. micro: one `LocalLimiter` acquire + release on one event loop (no wait), per kind of key;
2. gateway: a gateway (its own process, as in bench_gateway.py) in front of the fake upstream,
   one caller on a keep-alive connection; median time of a non-streaming call and time to the
   first byte of a streaming one, and the gateway's CPU per call, for a run with no configured
   limit (every call still asks the limiter), with `max_connections` (the call's body is followed
   to its end to free the slot) and with `tokens_per_minute` (its usage is also read at the end);
3. busy: 32 callers through one gateway with `max_connections = 8` against an upstream that
   takes 50 ms per answer: the most requests the upstream saw at once, and the throughput
   against the ideal 8 / 50 ms = 160 calls/s.

    python scripts/bench_limits.py [--calls 400] [--micro 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _stats import percentile
from bench_gateway import cpu_seconds, measure

FAKE = """
import sys, time, threading
from benchctl.testing.fake_upstream import FakeUpstreamServer
up = FakeUpstreamServer({"turns": [{"match": ".", "text": "ok, here is a short answer", "chunks": 3,
                                    "usage": {"input_tokens": 300, "output_tokens": 8}}]},
                        latency=float(sys.argv[1]), record=False).start()
print(up.url, flush=True)
for line in sys.stdin:
    print(up.max_in_flight, flush=True)
"""
GATEWAY = """
import json, sys, threading
from benchctl.gateway import Gateway, GatewayConfig
from benchctl.limits.config import parse_sweep_limits
from benchctl.limits.local import LocalLimiter
from benchctl.limits.run import LimitsPlan, RunLimits
from benchctl.transcript import TranscriptWriter
config = parse_sweep_limits(json.loads(sys.argv[2]), "bench")
transcript = TranscriptWriter(None)
limits = RunLimits(LimitsPlan(LocalLimiter(config), config), transcript)
gw = Gateway(GatewayConfig(model="anthropic/claude-sonnet-5-5", socket_path=sys.argv[1], limits=limits), transcript)
gw.start()
print("listening", flush=True)
sys.stdin.read()
gw.close()
"""
CONFIGS = {
    "no limit": {},
    "max_connections": {"max_connections": 8},
    "tokens_per_minute": {"providers": {"anthropic": {"tokens_per_minute": 10**9}}},
}


def micro(n: int) -> None:
    from benchctl.limits.config import parse_sweep_limits
    from benchctl.limits.local import LocalLimiter

    print(f"micro: LocalLimiter acquire + release, {n} calls, one loop")
    for name, table in CONFIGS.items():
        limiter = LocalLimiter(parse_sweep_limits(table, "bench"))

        async def run() -> float:
            t0 = time.perf_counter()
            for _ in range(n):
                g = await limiter.acquire(("anthropic", "anthropic/m"), "bench")
                limiter.release(g.permit, 10)
            return time.perf_counter() - t0

        print(f"  {name:<18} {asyncio.run(run()) / n * 1e6:7.1f} us/call")


def start(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )


def gateway(url: str, sock: Path, table: dict) -> subprocess.Popen[str]:
    env = {**os.environ, "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-bench-not-a-real-key"}
    gw = start([GATEWAY, str(sock), json.dumps(table)], env)
    gw.stdout.readline()  # type: ignore[union-attr]
    return gw


def stop(p: subprocess.Popen[str]) -> None:
    p.stdin.close()  # type: ignore[union-attr]
    p.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--micro", type=int, default=20000)
    args = ap.parse_args()
    micro(args.micro)
    tmp = Path(tempfile.mkdtemp(prefix="bench-lim-"))
    fake = start([FAKE, "0"])
    url = fake.stdout.readline().strip()  # type: ignore[union-attr]
    print(f"\ngateway: {args.calls} calls per cell, 1 caller; {os.cpu_count()} cpus (ms)")
    print(f"  {'limits':<18} | {'plain p50':>9} {'p99':>7} | {'ttfb p50':>8} {'p99':>7} | {'gw CPU/call':>11}")
    try:
        for i, (name, table) in enumerate(CONFIGS.items()):
            sock = tmp / f"gw{i}.sock"
            gw = gateway(url, sock, table)
            try:
                cpu0 = cpu_seconds(gw.pid)
                plain = asyncio.run(measure(f"unix:{sock}", False, args.calls, 1))
                ttfb = asyncio.run(measure(f"unix:{sock}", True, args.calls, 1))
                cpu = (cpu_seconds(gw.pid) - cpu0) / (len(plain) + len(ttfb) + 6) * 1000
            finally:
                stop(gw)
            print(
                f"  {name:<18} | {percentile(plain, 50) * 1000:>9.3f} {percentile(plain, 99) * 1000:>7.3f} | "
                f"{percentile(ttfb, 50) * 1000:>8.3f} {percentile(ttfb, 99) * 1000:>7.3f} | {cpu:>11.3f}"
            )
    finally:
        stop(fake)
    slow = start([FAKE, "0.05"])
    url = slow.stdout.readline().strip()  # type: ignore[union-attr]
    sock = tmp / "busy.sock"
    gw = gateway(url, sock, {"max_connections": 8})
    try:
        t0 = time.perf_counter()
        done = asyncio.run(measure(f"unix:{sock}", False, 32 * 20, 32))
        wall = time.perf_counter() - t0
        slow.stdin.write("?\n")  # type: ignore[union-attr]
        slow.stdin.flush()  # type: ignore[union-attr]
        most = int(slow.stdout.readline())  # type: ignore[union-attr]
    finally:
        stop(gw)
        stop(slow)
    n = len(done) + 32 * 3
    print(
        f"\nbusy: 32 callers, max_connections 8, upstream 50 ms per answer: {n} calls in {wall:.2f} s = "
        f"{n / wall:.0f} calls/s (ideal 160: {n / wall / 160:.0%}); most in flight at the upstream: {most}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
