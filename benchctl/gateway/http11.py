"""A minimal HTTP/1.1 server side on asyncio streams: just what the gateway needs, fast.

Requests: request line + headers, body by Content-Length or chunked. Responses: whole
(Content-Length, one write) or streamed (chunked, one write per upstream chunk, so each SSE
event leaves as soon as it arrives). Keep-alive unless the client says close.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

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
