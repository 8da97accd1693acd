#!/usr/bin/env python3
"""Added latency of the model gateway: calling the fake upstream directly vs through the gateway.

Three processes: the fake upstream (benchctl.testing.fake_upstream, TCP), the gateway
(`benchctl gateway`, unix socket, its Anthropic upstream pointed at the fake, writing a
transcript as a run's gateway does), and this client: a lean asyncio HTTP/1.1 client on
keep-alive connections, so the numbers are the server side's, not an SDK's. For each
concurrency (1 and 32 callers) it measures:

  plain   total time of a non-streaming /v1/messages call
  ttfb    time to the first body byte of a streaming call (the first SSE event)

and prints median and p99 for direct, via the gateway, and the difference, the gateway
process's CPU time per call (user + system, from /proc: the figure least moved by other load
on the machine), and the cores the calls got (CPU time of the fake upstream, the gateway and
this client per second of the turns: at 32 callers the calls are CPU-bound, so the added
latency is about callers × gateway CPU per call / cores). Direct and gateway calls take turns
of --turn calls per caller on connections kept open, so both see the same load, which on a
shared machine moves from second to second; the percentiles are over all calls of a kind.
With --against DIR a second gateway runs from another checkout (e.g. `git archive main | tar
-x -C /tmp/base`) and takes its turn in every round too, so old and new code are compared
under the same load. With --pipe a byte pipe (no HTTP parsing, no recording: see PIPE) takes
its turn the same way: the floor of any proxy on this machine.

    python scripts/bench_gateway.py [--calls 400] [--concurrency 1 32] [--turn 25]
                                    [--no-transcript] [--against DIR] [--pipe] [--api messages|chat]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
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
# --pipe: a stand-in "gateway" that only copies bytes between each client connection and its own
# upstream connection (no HTTP parsing, token check or recording): the floor of any proxy here.
PIPE = """
import asyncio, socket, sys, uvloop
class Pipe(asyncio.Protocol):
    peer = None
    def __init__(self): self.pending = []
    def connection_made(self, t): self.t = t
    def data_received(self, d):
        self.peer.t.write(d) if self.peer is not None else self.pending.append(d)
    def connection_lost(self, exc):
        if self.peer is not None: self.peer.t.close()
sock, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
loop = uvloop.new_event_loop()
async def link(down):
    t, up = await loop.create_connection(Pipe, host, port)
    t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    up.peer, down.peer = down, up
    for d in down.pending: t.write(d)
def factory():
    down = Pipe(); loop.create_task(link(down)); return down
loop.run_until_complete(loop.create_unix_server(factory, sock))
print("listening", flush=True)
loop.run_forever()
"""
TOKEN = "benchctl-sandbox-token"
REPO = Path(__file__).resolve().parent.parent
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


# Per wire API: the gateway's model, the upstream variables pointing it at the fake, and the request.
# `chat` streams ask for no usage, as many agents' do: the gateway asks for it and hides it (chat_usage.py).
APIS = {
    "messages": (
        "anthropic/claude-sonnet-5-5",
        {"ANTHROPIC_BASE_URL": "", "ANTHROPIC_API_KEY": "sk-bench-not-a-real-key"},
        "/v1/messages",
        f"x-api-key: {TOKEN}\r\nanthropic-version: 2023-06-01",
    ),
    "chat": (
        "openai/gpt-5",
        {"OPENAI_BASE_URL": "/v1", "OPENAI_API_KEY": "sk-bench-not-a-real-key"},
        "/v1/chat/completions",
        f"authorization: Bearer {TOKEN}",
    ),
}


def request_bytes(stream: bool, api: str = "messages") -> bytes:
    model, _env, path, auth = APIS[api]
    body = json.dumps(
        {
            "model": model.split("/")[1],
            "max_tokens": 64,
            "stream": stream,
            "messages": [{"role": "user", "content": "hello " * 50}],
        }
    ).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nhost: gateway\r\n{auth}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def one_call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> tuple[float, float]:
    """(time to first body byte, total time) of one request on a keep-alive connection."""
    t0 = time.perf_counter()
    writer.write(req)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"bad response: {head[:200]!r}")
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:] if line)
    }
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


async def connect(target: str) -> Conn:
    if target.startswith("unix:"):
        return await asyncio.open_unix_connection(target[5:])
    host, port = target.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return reader, writer


async def calls(conns: list[Conn], req: bytes, per_conn: int, stream: bool) -> list[float]:
    """`per_conn` calls on each connection at once: the latencies (first byte or total)."""
    out: list[float] = []

    async def caller(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(per_conn):
            ttfb, total = await one_call(reader, writer, req)
            out.append(ttfb if stream else total)

    await asyncio.gather(*(caller(r, w) for r, w in conns))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), to report the gateway's CPU per call."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(values: list[float], p: float) -> float:
    return percentile(values, p) * 1000


class GatewayProcess:
    """`benchctl gateway` from the checkout `tree`, on a unix socket, in front of the fake upstream."""

    def __init__(
        self, tree: Path | None, upstream: str, tmp: Path, label: str, transcript: bool, api: str = "messages"
    ) -> None:
        """tree None: the byte pipe (PIPE) instead of a gateway."""
        self.label, self.target = label, f"unix:{tmp / f'{label}.sock'}"
        model, upstream_env, _path, _auth = APIS[api]
        if tree is None:
            host, port = upstream.removeprefix("http://").rsplit(":", 1)
            argv = [sys.executable, "-c", PIPE, self.target[5:], host, port]
            env, tree = dict(os.environ), REPO
        else:
            env = {
                **os.environ,
                "PYTHONPATH": str(tree),
                **{k: upstream + v if k.endswith("_BASE_URL") else v for k, v in upstream_env.items()},
            }
            extra = ["--transcript", str(tmp / f"{label}.jsonl")] if transcript else []
            argv = [
                sys.executable,
                "-c",
                "from benchctl.cli import app; app()",
                "gateway",
                "--socket",
                self.target[5:],
                "--model",
                model,
                *extra,
            ]
        self.proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]  # "listening on ..."
        if "listening" not in line:
            raise RuntimeError(f"gateway from {tree} did not start: {line}{self.proc.stderr.read()}")  # type: ignore[union-attr]

    def stop(self) -> None:
        self.proc.send_signal(2)
        self.proc.wait(10)


async def cell(
    direct: str,
    gateways: list[GatewayProcess],
    fake_pid: int,
    stream: bool,
    n_calls: int,
    concurrency: int,
    per_conn: int,
    api: str = "messages",
) -> dict[str, tuple[list[float], float, float]]:
    """label -> (latencies, gateway CPU ms per call, cores used) for direct and each gateway, measured
    in turns. Cores used: CPU seconds of the fake upstream, the gateway and this client over the wall
    time of that target's turns, i.e. the share of the machine the calls got."""
    req = request_bytes(stream, api)
    targets = {"direct": direct, **{g.label: g.target for g in gateways}}
    pids = {g.label: g.proc.pid for g in gateways}
    me = os.getpid()
    conns = {label: [await connect(t) for _ in range(concurrency)] for label, t in targets.items()}
    for label in targets:  # warm-up: connections, the gateway's upstream keep-alive pool
        await calls(conns[label], req, 3, stream)
    samples: dict[str, list[float]] = {label: [] for label in targets}
    cpu = {label: 0.0 for label in targets}
    used = {label: 0.0 for label in targets}
    wall = {label: 0.0 for label in targets}
    order = list(targets)
    for turn in range(max(1, n_calls // (per_conn * concurrency))):
        for label in order[turn % len(order) :] + order[: turn % len(order)]:  # each goes first in turn
            procs = [fake_pid, me] + ([pids[label]] if label in pids else [])
            cpu0, used0, t0 = cpu_seconds(pids.get(label, me)), sum(map(cpu_seconds, procs)), time.perf_counter()
            samples[label] += await calls(conns[label], req, per_conn, stream)
            wall[label] += time.perf_counter() - t0
            used[label] += sum(map(cpu_seconds, procs)) - used0
            cpu[label] += cpu_seconds(pids.get(label, me)) - cpu0
    for label in targets:
        for _reader, writer in conns[label]:
            writer.close()
    return {
        label: (samples[label], cpu[label] / len(samples[label]) * 1000, used[label] / wall[label]) for label in targets
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=400, help="calls per cell, per target")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--turn", type=int, default=25, help="calls per caller to one target before the next's turn")
    ap.add_argument("--no-transcript", action="store_true", help="the gateway writes no transcript")
    ap.add_argument("--against", type=Path, help="also measure a gateway from this other checkout, in turn")
    ap.add_argument(
        "--pipe",
        action="store_true",
        help="also measure a byte pipe in place of a gateway, in turn (the floor of any proxy here)",
    )
    ap.add_argument(
        "--api",
        choices=list(APIS),
        default="messages",
        help="wire API of the calls: Anthropic messages, or chat completions (streams without include_usage)",
    )
    args = ap.parse_args()
    fake = subprocess.Popen(
        [sys.executable, "-c", FAKE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-gw-"))
    gateways: list[GatewayProcess] = []
    try:
        url = fake.stdout.readline().strip()  # type: ignore[union-attr]
        gateways.append(GatewayProcess(REPO, url, tmp, "this", not args.no_transcript, args.api))
        if args.against is not None:
            gateways.append(
                GatewayProcess(args.against.resolve(), url, tmp, "against", not args.no_transcript, args.api)
            )
        if args.pipe:
            gateways.append(GatewayProcess(None, url, tmp, "pipe", False, args.api))
        print(
            f"fake upstream {url}; api {args.api}; gateways {', '.join(f'{g.label}: {g.target}' for g in gateways)}; "
            f"transcript {'off' if args.no_transcript else 'on'}; {args.calls} calls per cell and target, in turns "
            f"of {args.turn} per caller; {os.cpu_count()} cpus; load {os.getloadavg()[0]:.1f}\n"
        )
        print(
            f"{'metric':<6} {'callers':>7} {'gateway':>8} | {'direct p50':>10} {'p99':>8} | {'gateway p50':>11} "
            f"{'p99':>8} | {'added p50':>9} {'p99':>8} | {'gw CPU/call':>11} | cores: direct gateway   (ms)"
        )
        for concurrency in args.concurrency:
            for stream in (False, True):
                got = asyncio.run(cell(url, gateways, fake.pid, stream, args.calls, concurrency, args.turn, args.api))
                direct, _, direct_cores = got.pop("direct")
                d50, d99 = ms(direct, 50), ms(direct, 99)
                for label, (via, cpu, cores) in got.items():
                    v50, v99 = ms(via, 50), ms(via, 99)
                    print(
                        f"{'ttfb' if stream else 'plain':<6} {concurrency:>7} {label:>8} | {d50:>10.3f} {d99:>8.3f} | "
                        f"{v50:>11.3f} {v99:>8.3f} | {v50 - d50:>9.3f} {v99 - d99:>8.3f} | {cpu:>11.3f} | "
                        f"{direct_cores:>5.2f} {cores:>5.2f}",
                        flush=True,
                    )
        print(f"\nload {os.getloadavg()[0]:.1f} at the end")
    finally:
        for g in gateways:
            g.stop()
        fake.stdin.close()  # type: ignore[union-attr]
        try:
            fake.wait(10)
        except subprocess.TimeoutExpired:  # its threads may take longer under load: the results are printed
            fake.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
