"""A minimal HTTP/1.1 server side on asyncio streams: just what the gateway needs, fast.

Requests: `read_head` reads the request line and headers only, so the caller can check the
token and its memory caps (body_limits.py) before `read_body` reads a byte of the body (by
Content-Length or chunked, into one buffer, counted against a BodyBudget as it grows). A request
refused before its body is read gets its answer, then `discard_body` reads and drops what the
client still sends (so it sees the answer rather than a broken pipe). Responses: whole
(Content-Length, one write) or streamed (chunked, one write per upstream chunk, so each SSE
event leaves as soon as it arrives). Keep-alive unless the client says close. `serve_tcp` /
`serve_unix` start a server whose connections tell the request in flight when its client goes
away (see ClientProtocol).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl.gateway.body_limits import BodyBudget

REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}
# One request head; an agent CLI's is a few KB. With MAX_CONNECTIONS this bounds what heads can hold.
MAX_HEADER_BYTES = 64 << 10
MAX_CONNECTIONS = 256  # at once, per gateway; more are answered 503 and closed
READ_SIZE = 1 << 16
DISCARD_BYTES = 64 << 20  # read and dropped after an early answer, at most...
DISCARD_SECONDS = 10.0  # ...and for at most this long, then the connection is closed


class BadRequest(Exception):
    pass


class BodyRefused(Exception):
    """The body does not fit: `status` 413 (over the per-request cap) or 429 (the gateway holds too
    much at once). Nothing more of it is read."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str
    target: str
    path: str
    query: str
    headers: dict[str, str]  # lower-cased names
    keep_alive: bool
    length: int | None  # the body's Content-Length; None when chunked
    body: bytes | bytearray = b""  # filled by read_body
    body_complete: bool = False  # read_body read the whole body
    reserved: int = 0  # bytes of the BodyBudget this request holds


async def read_head(reader: asyncio.StreamReader) -> Request | None:
    """The next request's line and headers, or None when the client closed the connection cleanly."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise BadRequest("connection closed mid-request") from None
        return None
    except asyncio.LimitOverrunError:
        raise BadRequest(f"request headers over the {MAX_HEADER_BYTES}-byte limit") from None
    lines = head[:-4].decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest(f"bad request line {lines[0][:100]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(f"bad header line {line[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    length: int | None = None
    if headers.get("transfer-encoding", "").lower() != "chunked":
        try:
            length = int(headers.get("content-length") or 0)
        except ValueError:
            raise BadRequest(f"bad content-length {headers['content-length'][:40]!r}") from None
        if length < 0:
            raise BadRequest(f"bad content-length {length}")
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    path, _, query = target.partition("?")
    return Request(method.upper(), target, path, query, headers, keep_alive, length)


async def read_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: Request, max_body: int, budget: BodyBudget
) -> None:
    """Read the body into `req.body`, reserving its bytes in `budget` as they come (`req.reserved`
    says how many: the caller gives them back when the exchange ends, also when this raises).
    Raises BodyRefused (413 / 429) before reading what does not fit, BadRequest when malformed."""
    if req.length is not None and req.length > max_body:
        raise BodyRefused(413, f"request body of {req.length} bytes is over the {max_body}-byte limit")
    if req.length is not None and not budget.take(req.length):
        raise BodyRefused(429, BUSY)
    req.reserved = req.length or 0
    if req.headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits a second for this before big bodies
    if req.length is not None:
        # A small body in one call; a big one into one buffer of its size (no second copy).
        small = req.length <= READ_SIZE
        req.body = await (reader.readexactly(req.length) if small else _read_exactly(reader, req.length))
        req.body_complete = True
        return
    body = bytearray()
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            raise BadRequest(f"bad chunk size line {line[:40]!r}") from None
        if size < 0:
            raise BadRequest("negative chunk size")
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            req.body = body
            req.body_complete = True
            return
        # Checked before the chunk is read: the same caps as a Content-Length body.
        if len(body) + size > max_body:
            raise BodyRefused(413, f"chunked request body is over the {max_body}-byte limit")
        if not budget.take(size):
            raise BodyRefused(429, BUSY)
        req.reserved += size
        body += await _read_exactly(reader, size)
        await reader.readexactly(2)


BUSY = "the gateway is holding too many request bytes at once; retry shortly"


async def _read_exactly(reader: asyncio.StreamReader, n: int) -> bytearray:
    """n bytes into one buffer of that size, read in pieces: no second copy of a big body."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        piece = await reader.read(min(n - got, READ_SIZE))
        if not piece:
            raise asyncio.IncompleteReadError(bytes(buf[:got]), n)
        view[got : got + len(piece)] = piece
        got += len(piece)
    return buf


async def discard_body(reader: asyncio.StreamReader, req: Request) -> None:
    """After an answer to a request whose body was not read whole: read and drop what the client
    still sends, until it closes (it was told `connection: close`), for at most DISCARD_BYTES and
    DISCARD_SECONDS. A client that writes its whole body before reading then sees the answer
    instead of a broken pipe. Holds no more than one piece at a time."""
    if req.body_complete or req.length == 0:
        return
    left, end = DISCARD_BYTES, time.monotonic() + DISCARD_SECONDS
    try:
        while left > 0:
            piece = await asyncio.wait_for(reader.read(READ_SIZE), max(0.0, end - time.monotonic()))
            if not piece:
                return
            left -= len(piece)
    except (TimeoutError, ConnectionError):
        return


def _head(status: int, headers: dict[str, str], extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def whole_response(status: int, headers: dict[str, str], body: bytes, keep_alive: bool = True) -> bytes:
    extra = f"content-length: {len(body)}" + ("" if keep_alive else "\r\nconnection: close")
    return _head(status, headers, extra) + body


def stream_head(status: int, headers: dict[str, str], keep_alive: bool = True) -> bytes:
    return _head(status, headers, "transfer-encoding: chunked" + ("" if keep_alive else "\r\nconnection: close"))


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class ClientProtocol(asyncio.StreamReaderProtocol):
    """asyncio's stream protocol, plus `on_client_gone`: called once when the client closes or resets
    the connection while it is set (by the request in flight, which then stops its upstream call).

    HTTP/1.1 clients do not half-close while they wait for an answer (the SDKs, the agent CLIs and
    the sandbox's forwarder, which passes a client's close on as EOF), so EOF means it left."""

    on_client_gone: Callable[[], None] | None = None

    def eof_received(self) -> bool | None:
        keep_open = super().eof_received()
        self._gone()
        return keep_open

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._gone()

    def _gone(self) -> None:
        callback, self.on_client_gone = self.on_client_gone, None
        if callback is not None:
            callback()


def _factory(handler: Handler, limit: int) -> Callable[[], ClientProtocol]:
    loop = asyncio.get_running_loop()
    return lambda: ClientProtocol(asyncio.StreamReader(limit=limit, loop=loop), handler, loop=loop)


async def serve_tcp(handler: Handler, host: str, port: int, limit: int = MAX_HEADER_BYTES) -> asyncio.Server:
    """Like asyncio.start_server, with ClientProtocol connections."""
    return await asyncio.get_running_loop().create_server(_factory(handler, limit), host, port)


async def serve_unix(handler: Handler, path: str | Path, limit: int = MAX_HEADER_BYTES, **kw: Any) -> asyncio.Server:
    """Like asyncio.start_unix_server, with ClientProtocol connections."""
    return await asyncio.get_running_loop().create_unix_server(_factory(handler, limit), str(path), **kw)
