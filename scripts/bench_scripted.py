#!/usr/bin/env python3
"""Benchmark the scripted provider and the fake upstream server; prints a table.

  python scripts/bench_scripted.py [--calls N]

Rows:
  fake upstream, JSON / SSE   HTTP round trip to FakeUpstreamServer (keep-alive httpx2 client),
                              at 1 and 64 concurrent callers; SSE rows time the first byte (TTFB).
                              Client and server share one process (and GIL) here; at 64 callers
                              the latency is queueing: read calls/s. For an out-of-process server:
                              python -m benchctl.testing.fake_upstream SCRIPT [--latency S]
  complete() scripted         benchmark.models.complete on a scripted model (no HTTP), 1 and 64 callers
  complete() via fake 100ms   anthropic/... judge through FakeUpstreamServer with 100 ms fixed latency,
                              64 concurrent: wall time shows whether calls overlap (ideal: 100 ms per wave)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2
from _stats import percentile

from benchctl.testing import FakeUpstreamServer

BODY = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hello " * 50}]}
SCRIPT = {"turns": [{"text": "The answer is 42. " * 10}]}


async def http_latencies(url: str, n: int, conc: int, stream: bool) -> tuple[list[float], float]:
    body = {**BODY, "stream": stream}
    out: list[float] = []
    limits = httpx2.Limits(max_connections=conc, max_keepalive_connections=conc)
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=30) as client:

        async def one() -> None:
            t0 = time.perf_counter()
            if stream:
                async with client.stream("POST", "/v1/messages", json=body) as r:
                    chunks = r.aiter_raw()
                    await chunks.__anext__()
                    out.append(time.perf_counter() - t0)  # first byte
                    async for _ in chunks:
                        pass
            else:
                r = await client.post("/v1/messages", json=body)
                r.read()
                out.append(time.perf_counter() - t0)

        async def worker(k: int) -> None:
            for _ in range(k):
                await one()

        await asyncio.gather(*[one() for _ in range(min(conc, 8))])  # warm connections
        out.clear()
        t0 = time.perf_counter()
        await asyncio.gather(*[worker(n // conc) for _ in range(conc)])
        wall = time.perf_counter() - t0
    return out, wall


def complete_latencies(model: str, n: int, conc: int) -> tuple[list[float], float]:
    from benchctl.gateway.complete import acomplete

    async def run() -> tuple[list[float], float]:
        lat: list[float] = []
        sem = asyncio.Semaphore(conc)

        async def one(i: int) -> None:
            async with sem:
                c = await acomplete(model, [{"role": "user", "content": f"item {i}"}], max_tokens=50)
                lat.append(c.latency_s)

        await acomplete(model, [{"role": "user", "content": "item warm"}])
        t0 = time.perf_counter()
        await asyncio.gather(*[one(i) for i in range(n)])
        return lat, time.perf_counter() - t0

    return asyncio.run(run())


def row(name: str, conc: int, lat: list[float], wall: float | None = None) -> str:
    ms = [x * 1000 for x in lat]
    extra = f"{len(lat) / wall:9.0f}" if wall else " " * 9
    return f"{name:<30} {conc:>5} {len(ms):>6} {statistics.median(ms):>9.2f} {percentile(ms, 99):>9.2f} {extra}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=640)
    n = ap.parse_args().calls
    print(f"{'benchmark':<30} {'conc':>5} {'calls':>6} {'median ms':>9} {'p99 ms':>9} {'calls/s':>9}")
    with FakeUpstreamServer(SCRIPT) as up:
        for stream in (False, True):
            for conc in (1, 64):
                lat, wall = asyncio.run(http_latencies(up.url, n, conc, stream))
                print(row(f"fake upstream, {'SSE TTFB' if stream else 'JSON'}", conc, lat, wall))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "judge.json"
        p.write_text(json.dumps({"turns": [{"match": "item", "text": '{"score": 0.5}'}]}))
        for conc in (1, 64):
            lat, wall = complete_latencies(f"scripted/{p}", n, conc)
            print(row("complete() scripted", conc, lat, wall))
    with FakeUpstreamServer(SCRIPT, latency=0.1) as up:
        os.environ["ANTHROPIC_BASE_URL"] = up.url
        os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench-dummy")
        lat, wall = complete_latencies("anthropic/claude-sonnet-5-5", 256, 64)
        print(row("complete() via fake 100ms", 64, lat, wall) + f"   wall {wall:.2f}s for 256 (ideal 0.40s)")


if __name__ == "__main__":
    main()
