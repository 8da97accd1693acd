#!/usr/bin/env python3
"""Added latency of the model gateway: calling the fake upstream directly vs through the gateway.

Three processes: the fake upstream (benchctl.testing.fake_upstream, TCP), the gateway
(`benchctl gateway`, unix socket, its Anthropic upstream pointed at the fake), and this
client: a lean asyncio HTTP/1.1 client on keep-alive connections, so the numbers are the
server side's, not an SDK's. For each concurrency (1 and 32 callers) it measures:

  plain   total time of a non-streaming /v1/messages call
  ttfb    time to the first body byte of a streaming call (the first SSE event)

and prints median and p99 for direct, via the gateway, and the difference.

    python scripts/bench_gateway.py [--calls 400] [--concurrency 1 32]
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

FAKE = """
import sys, time
from benchctl.testing.fake_upstream import FakeUpstreamServer
up = FakeUpstreamServer({"turns": [{"match": ".", "text": "ok, here is a short answer", "chunks": 3}]}).start()
print(up.url, flush=True)
sys.stdin.read()
"""
TOKEN = "benchctl-sandbox-token"


def request_bytes(stream: bool) -> bytes:
    body = json.dumps({"model": "claude-sonnet-5-5", "max_tokens": 64, "stream": stream,
                       "messages": [{"role": "user", "content": "hello " * 50}]}).encode()
    head = (f"POST /v1/messages HTTP/1.1\r\nhost: gateway\r\nx-api-key: {TOKEN}\r\nanthropic-version: 2023-06-01\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n")
    return head.encode() + body


async def one_call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> tuple[float, float]:
    """(time to first body byte, total time) of one request on a keep-alive connection."""
    t0 = time.perf_counter()
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"bad response: {head[:200]!r}")
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(b":") for line in head.split(b"\r\n")[1:] if line)}
    if headers.get(b"transfer-encoding") == b"chunked":
        ttfb = None
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            await reader.readexactly(size + 2)
            if ttfb is None:
                ttfb = time.perf_counter() - t0
    else:
        await reader.readexactly(int(headers[b"content-length"]))
        ttfb = time.perf_counter() - t0
    return ttfb, time.perf_counter() - t0


async def connect(target: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if target.startswith("unix:"):
        return await asyncio.open_unix_connection(target[5:])
    host, port = target.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    import socket
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return reader, writer


async def measure(target: str, stream: bool, calls: int, concurrency: int) -> list[float]:
    req = request_bytes(stream)
    per_worker = max(1, calls // concurrency)
    out: list[float] = []

    async def worker() -> None:
        reader, writer = await connect(target)
        for _ in range(3):  # warm-up: connections, upstream keep-alive
            await one_call(reader, writer, req)
        for _ in range(per_worker):
            ttfb, total = await one_call(reader, writer, req)
            out.append(ttfb if stream else total)
        writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), to report the gateway's CPU per call."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    return percentile(values, p) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    args = ap.parse_args()
    fake = subprocess.Popen([sys.executable, "-c", FAKE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tmp = tempfile.mkdtemp(prefix="bench-gw-")
    sock = Path(tmp) / "gw.sock"
    gw = None
    try:
        url = fake.stdout.readline().strip()  # type: ignore[union-attr]
        env = {**os.environ, "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-bench-not-a-real-key"}
        gw = subprocess.Popen([sys.executable, "-c", "from benchctl.cli import app; app()", "gateway", "--socket",
                               str(sock), "--model", "anthropic/claude-sonnet-5-5"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        gw.stdout.readline()  # type: ignore[union-attr]  # "listening on ..."
        print(f"fake upstream {url}; gateway unix:{sock}; {args.calls} calls per cell; {os.cpu_count()} cpus\n")
        print(f"{'metric':<8} {'callers':>7} | {'direct p50':>10} {'p99':>8} | {'gateway p50':>11} {'p99':>8} | "
              f"{'added p50':>9} {'p99':>8} | {'gw CPU/call':>11}   (ms)")
        for concurrency in args.concurrency:
            for stream in (False, True):
                direct = asyncio.run(measure(url, stream, args.calls, concurrency))
                cpu0 = cpu_seconds(gw.pid)
                via = asyncio.run(measure(f"unix:{sock}", stream, args.calls, concurrency))
                cpu = (cpu_seconds(gw.pid) - cpu0) / (len(via) + 3 * concurrency) * 1000
                d50, d99, v50, v99 = pct(direct, 50), pct(direct, 99), pct(via, 50), pct(via, 99)
                name = "ttfb" if stream else "plain"
                print(f"{name:<8} {concurrency:>7} | {d50:>10.3f} {d99:>8.3f} | {v50:>11.3f} {v99:>8.3f} | "
                      f"{v50 - d50:>9.3f} {v99 - d99:>8.3f} | {cpu:>11.3f}")
    finally:
        if gw is not None:
            gw.send_signal(2)
            gw.wait(10)
        fake.stdin.close()  # type: ignore[union-attr]
        fake.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
