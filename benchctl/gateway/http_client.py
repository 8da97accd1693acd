"""A lean asyncio HTTP/1.1 client with keep-alive pools: the gateway's upstream hot path.

Why not httpx2 here: through httpx2/httpcore2/anyio a proxied call costs ~1 ms of CPU on
this kind of machine, which at 32 concurrent callers queues into tens of milliseconds of
added latency (see scripts/bench_gateway.py). This client does only what the gateway needs:
one request per connection at a time, Content-Length request bodies, chunked or
Content-Length or until-close response bodies yielded as they arrive, TLS via `ssl`, and
idle connections reused per origin. The vendor SDKs on the client side still use httpx2.
Set BENCHCTL_GATEWAY_HTTP_CLIENT=httpx2 to use httpx2 for upstream calls instead.
"""
from __future__ import annotations

import asyncio
import socket
import ssl
from collections import defaultdict
from typing import AsyncIterator
from urllib.parse import urlsplit

CONNECT_TIMEOUT = 15.0
READ_TIMEOUT = 600.0      # between bytes: reasoning models can think for minutes before the first token
MAX_IDLE_PER_ORIGIN = 64
READ_SIZE = 1 << 16


class UpstreamConnectionError(ConnectionError):
    """The upstream connection failed or closed mid-response (retried like any connection error)."""


Origin = tuple[str, str, int]


class _Conn:
    __slots__ = ("reader", "writer", "origin")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: Origin) -> None:
        self.reader, self.writer, self.origin = reader, writer, origin

    def usable(self) -> bool:
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


class RawResponse:
    def __init__(self, pool: "ConnectionPool", conn: _Conn, status: int, headers: dict[str, str], method: str) -> None:
        self.status = status
        self.headers = headers
        self._pool, self._conn, self._method = pool, conn, method
        self._done = False

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body, de-chunked, in pieces as they arrive; the connection goes back to the pool at the end."""
        conn, reader = self._conn, self._conn.reader
        reusable = self.headers.get("connection", "").lower() != "close"
        try:
            if self._method == "HEAD" or self.status in (204, 304):
                pass
            elif self.headers.get("transfer-encoding", "").lower().endswith("chunked"):
                while True:
                    line = await _read(reader.readuntil(b"\r\n"))
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while (await _read(reader.readuntil(b"\r\n"))) != b"\r\n":
                            pass  # trailers
                        break
                    data = await _read(reader.readexactly(size + 2))
                    yield data[:-2]
            elif "content-length" in self.headers:
                left = int(self.headers["content-length"])
                while left > 0:
                    data = await _read(reader.read(min(left, READ_SIZE)))
                    if not data:
                        raise UpstreamConnectionError(f"upstream closed with {left} body bytes missing")
                    left -= len(data)
                    yield data
            else:  # body runs until the server closes
                reusable = False
                while data := await _read(reader.read(READ_SIZE)):
                    yield data
            self._done = True
        finally:
            if self._done and reusable:
                self._pool.release(conn)
            else:
                conn.close()

    async def aclose(self) -> None:
        if not self._done:
            self._conn.close()
            self._done = True


async def _read(awaitable):  # type: ignore[no-untyped-def]
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            return await awaitable
    except asyncio.IncompleteReadError as e:
        raise UpstreamConnectionError(f"upstream closed the connection mid-response ({len(e.partial)} bytes read)") from None
    except asyncio.LimitOverrunError as e:
        raise UpstreamConnectionError(f"upstream sent an over-long line: {e}") from None
    except TimeoutError:
        raise UpstreamConnectionError(f"upstream sent nothing for {READ_TIMEOUT:.0f} s") from None


class ConnectionPool:
    def __init__(self) -> None:
        self._idle: dict[Origin, list[_Conn]] = defaultdict(list)
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    def release(self, conn: _Conn) -> None:
        idle = self._idle[conn.origin]
        if self._closed or len(idle) >= MAX_IDLE_PER_ORIGIN or not conn.usable():
            conn.close()
        else:
            idle.append(conn)

    async def _connect(self, origin: Origin) -> _Conn:
        scheme, host, port = origin
        if scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl if scheme == "https" else None, limit=1 << 20)
        except TimeoutError:
            raise UpstreamConnectionError(f"connecting to {host}:{port} timed out after {CONNECT_TIMEOUT:.0f} s") from None
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # SSE events must not wait for ACKs
        return _Conn(reader, writer, origin)

    async def request(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> RawResponse:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream URL {url!r} must be http(s)://host[:port]/path")
        origin: Origin = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rsplit("@", 1)[-1]
        lines = [f"{method} {target} HTTP/1.1", f"host: {host}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None:
            lines.append(f"content-length: {len(body)}")
        payload = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        idle = self._idle.get(origin)
        while idle:  # a reused connection the server already closed fails at once: then try the next / a new one
            conn = idle.pop()
            if not conn.usable():
                conn.close()
                continue
            try:
                return await self._exchange(conn, payload, method)
            except UpstreamConnectionError:
                conn.close()
        return await self._exchange(await self._connect(origin), payload, method)

    async def _exchange(self, conn: _Conn, payload: bytes, method: str) -> RawResponse:
        try:
            conn.writer.write(payload)
            head = await _read(conn.reader.readuntil(b"\r\n\r\n"))
        except OSError as e:
            conn.close()
            raise UpstreamConnectionError(f"{type(e).__name__}: {e}") from None
        except UpstreamConnectionError:
            conn.close()
            raise
        lines = head[:-4].decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            conn.close()
            raise UpstreamConnectionError(f"bad status line from upstream: {lines[0][:100]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return RawResponse(self, conn, status, headers, method)

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
