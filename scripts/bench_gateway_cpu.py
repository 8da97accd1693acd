#!/usr/bin/env python3
"""The gateway's own Python work per call, with the sockets taken out, and where it goes.

bench_gateway.py measures the whole gateway process under load, on a noisy shared machine; this
measures, in one process and one thread, what is left when the kernel, the event loop's I/O and
the upstream's HTTP client are not in the way: a request head and body fed from memory into
`http11.read_head` and `Exchange.run` (token check, body caps, JSON parse, model rewrite, the
retry and limits layers, the upstream request built by HttpUpstream, the answer written, the
call summarized, priced, delta-recorded and written to a transcript file), with the upstream's
connection pool replaced by one that answers at once (a non-streaming Anthropic message, or the
seven SSE events of a short streamed one). It prints the CPU time per call (best of five rounds)
and each part's share of it, from cProfile's cumulative times (cProfile adds its own cost per
Python call, so the shares are approximate; the total is measured without it).

    python scripts/bench_gateway_cpu.py [--calls 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
from bench_gateway import request_bytes

os.environ["ANTHROPIC_API_KEY"] = "sk-bench-not-a-real-key"
os.environ["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"  # never reached: the pool below answers
MODEL = "anthropic/claude-sonnet-5-5"
MESSAGE = orjson.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [{"type": "text", "text": "ok, here is a short answer"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 75, "output_tokens": 7},
    }
)
SSE = b"".join(
    b"event: %s\ndata: %s\n\n" % (d["type"].encode(), orjson.dumps(d))
    for d in [
        {
            "type": "message_start",
            "message": {"id": "m", "model": "claude-sonnet-5-5", "usage": {"input_tokens": 75, "output_tokens": 1}},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok, here is "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a short answer"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]
)

# part -> (functions whose cumulative time it is, as folder/file.py:name; the parts inside it)
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "request head + body (http11)": ("gateway/http11.py:read_head|gateway/http11.py:read_body", ()),
    "limits layer (acquire, observe)": ("limits/upstream.py:send", ("gateway/http_upstreams.py:send",)),
    "retry layer": ("gateway/retry.py:send", ("limits/upstream.py:send",)),
    "upstream request built": ("gateway/http_upstreams.py:send", ()),
    "record: summarize": ("gateway/wire/__init__.py:summarize", ()),
    "record: request delta": ("gateway/recording.py:delta|gateway/recording.py:note_response", ()),
    "record: transcript line": ("benchctl/transcript.py:emit", ()),
    "record: the rest (outcome, price, account)": (
        "gateway/exchange.py:record",
        (
            "gateway/wire/__init__.py:summarize|gateway/recording.py:delta|"
            "gateway/recording.py:note_response|benchctl/transcript.py:emit",
        ),
    ),
}


class AnswerAtOnce:
    """Stands in for http_client.ConnectionPool: the answer, without a socket."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream

    async def request(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, head_timeout: float | None = None
    ) -> Answer:
        return Answer(self.stream)

    async def aclose(self) -> None:
        pass


class Answer:
    def __init__(self, stream: bool) -> None:
        self.status = 200
        self.headers = {"content-type": "text/event-stream" if stream else "application/json", "request-id": "r1"}
        self.data = SSE if stream else MESSAGE

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        yield self.data


class Transport:
    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def get_protocol(self) -> None:
        return None


class Writer:
    """The client's side of the connection: what the gateway writes goes nowhere."""

    def __init__(self) -> None:
        self.transport = Transport()

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


def gateway(stream: bool, tmp: Path) -> Any:
    from benchctl.commands.limit_options import cli_limits
    from benchctl.gateway import Gateway, GatewayConfig
    from benchctl.gateway.pricing import PriceTable
    from benchctl.limits.local import LocalLimiter
    from benchctl.limits.run import LimitsPlan, RunLimits
    from benchctl.transcript import TranscriptWriter

    # As `benchctl gateway` builds it (commands/gateway.py): its own limiter, a transcript file.
    writer = TranscriptWriter(tmp / f"{'stream' if stream else 'plain'}.jsonl")
    cfg = cli_limits(max_cost=None, max_connections=None, allow_unpriced=False, models=[MODEL], prices=PriceTable(None))
    limits = RunLimits(LimitsPlan(LocalLimiter(cfg, 0.0), cfg, scope="gateway"), writer, holder="gateway")
    writer.listeners.append(limits.on_event)
    gw = Gateway(GatewayConfig(model=MODEL, limits=limits), writer)
    inner = gw.upstream_for(gw.router.current)
    while hasattr(inner, "inner"):  # RetryingUpstream -> LimitedUpstream -> the HTTP upstream
        inner = inner.inner
    inner._pool = AnswerAtOnce(stream)
    return gw


async def calls(gw: Any, request: bytes, n: int) -> None:
    from benchctl.gateway import http11
    from benchctl.gateway.exchange import Exchange

    writer, task = Writer(), asyncio.current_task()
    for _ in range(n):
        reader = asyncio.StreamReader()
        reader.feed_data(request)
        req = await http11.read_head(reader)
        assert req is not None
        await Exchange(gw, req, reader, writer, task).run()  # type: ignore[arg-type]
        gw.body_budget.give(req.reserved)


def shares(prof: cProfile.Profile) -> dict[str, float]:
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    cum: dict[str, float] = {}
    total = 0.0
    for (file, _line, name), (_cc, _nc, _tt, ct, _callers) in stats.items():
        key = f"{Path(file).parent.name}/{Path(file).name}:{name}"
        cum[key] = cum.get(key, 0.0) + ct
        if key == "scripts/bench_gateway_cpu.py:calls":
            total = ct

    def of(names: str) -> float:
        return sum(cum.get(n, 0.0) for n in names.split("|"))

    out = {part: (of(fn) - sum(of(x) for x in inside)) / total for part, (fn, inside) in PARTS.items()}
    out["the rest (exchange flow, JSON parse, answer)"] = 1.0 - sum(out.values())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=5000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gw-cpu-"))
    results = {}
    for stream in (False, True):
        gw = gateway(stream, tmp)
        loop = asyncio.new_event_loop()
        request = request_bytes(stream)
        loop.run_until_complete(calls(gw, request, 200))  # warm: the recorder's conversation, imports
        best = float("inf")
        for _ in range(5):
            t0 = time.process_time()
            loop.run_until_complete(calls(gw, request, args.calls))
            best = min(best, (time.process_time() - t0) / args.calls * 1e6)
        prof = cProfile.Profile()
        prof.enable()
        loop.run_until_complete(calls(gw, request, args.calls))
        prof.disable()
        results["streaming" if stream else "non-streaming"] = (best, shares(prof))
        loop.close()
    print(f"gateway CPU per call without sockets, µs (best of 5 × {args.calls} calls; load {os.getloadavg()[0]:.1f})")
    for kind, (us, _) in results.items():
        print(f"  {kind:<14} {us:6.1f}")
    print("\nshare of it (cProfile cumulative times, approximate)")
    print(f"  {'part':<46} " + " ".join(f"{k:>14}" for k in results))
    for part in next(iter(results.values()))[1]:
        print(f"  {part:<46} " + " ".join(f"{s[part] * 100:13.0f}%" for _, s in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
