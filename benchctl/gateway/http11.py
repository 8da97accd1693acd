"""A minimal HTTP/1.1 server side on asyncio streams: just what the gateway needs, fast.

Requests: request line + headers, body by Content-Length or chunked. Responses: whole
(Content-Length, one write) or streamed (chunked, one write per upstream chunk, so each SSE
event leaves as soon as it arrives). Keep-alive unless the client says close. `serve_tcp` /
`serve_unix` start a server whose connections tell the request in flight when its client goes
away (see ClientProtocol).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 413: "Payload Too Large", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
           529: "Overloaded"}
MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = 256 << 20


class BadRequest(Exception):
    pass


@dataclass
class Request:
    method: str
    target: str
    path: str
    query: str
    headers: dict[str, str]    # lower-cased names
    body: bytes
    keep_alive: bool


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None = None) -> Request | None:
    """The next request on the connection, or None when the client closed it cleanly."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise BadRequest("connection closed mid-request") from None
        return None
    except asyncio.LimitOverrunError:
        raise BadRequest("request headers too large") from None
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
    if writer is not None and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits a second for this before big bodies
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            raise BadRequest(f"request body of {length} bytes is over the {MAX_BODY_BYTES} limit")
        body = await reader.readexactly(length) if length else b""
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    path, _, query = target.partition("?")
    return Request(method.upper(), target, path, query, headers, body, keep_alive)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        total += size
        if size < 0 or total > MAX_BODY_BYTES:  # the same cap as Content-Length bodies, checked before reading
            raise BadRequest(f"chunked request body is over the {MAX_BODY_BYTES}-byte limit")
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


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
