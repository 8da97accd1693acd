"""A lean asyncio HTTP/1.1 client with keep-alive pools: the gateway's upstream hot path.

Why not httpx2 here: through httpx2/httpcore2/anyio a proxied call costs ~1 ms of CPU on
this kind of machine, which at 32 concurrent callers queues into tens of milliseconds of
added latency (see scripts/bench_gateway.py). This client does only what the gateway needs:
one request per connection at a time, Content-Length request bodies, chunked or
Content-Length or until-close response bodies yielded as they arrive, TLS via `ssl`, and
idle connections reused per origin. The vendor SDKs on the client side still use httpx2.
Set BENCHCTL_GATEWAY_HTTP_CLIENT=httpx2 to use httpx2 for upstream calls instead (also the way
to reach vendors through an HTTP proxy: httpx2 honours HTTPS_PROXY, this client does not).

A connection in use that receives nothing for its limit is closed and the pending read raises
`UpstreamIdleTimeout` (a connection error, so the retry layer retries it like one). The limit is
the pool's idle timeout, except while waiting for the response head when the request gives a
`head_timeout` (a non-streaming answer arrives all at once, when the model has finished).
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from collections import defaultdict
from collections.abc import AsyncIterator
from time import monotonic  # not loop.time(): asyncio.get_running_loop() costs a getpid() call
from urllib.parse import urlsplit

CONNECT_TIMEOUT = 15.0
# Defaults of the silence allowed from an upstream (the settings: retry.RetryPolicy): within a body or
# before a stream's head; before a non-streaming answer's head (it comes when the model has finished).
IDLE_TIMEOUT = 120.0
ANSWER_TIMEOUT = 600.0
MAX_IDLE_PER_ORIGIN = 64
READ_SIZE = 1 << 16


class UpstreamConnectionError(ConnectionError):
    """The upstream connection failed or closed mid-response (retried like any connection error)."""


class UpstreamIdleTimeout(UpstreamConnectionError):
    """The upstream sent nothing for the connection's limit; the connection was closed."""


Origin = tuple[str, str, int]


class _Conn:
    __slots__ = ("reader", "writer", "origin", "last_read", "limit", "timed_out")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: Origin) -> None:
        self.reader, self.writer, self.origin = reader, writer, origin
        self.last_read = 0.0  # time.monotonic() of the last bytes received while a request is in flight
        self.limit = IDLE_TIMEOUT  # seconds of silence allowed now (set per request by the pool)
        self.timed_out = False  # closed by the sweeper for silence

    def idle_error(self) -> UpstreamIdleTimeout:
        return UpstreamIdleTimeout(f"upstream sent nothing for {self.limit:g} s (idle timeout)")

    def usable(self) -> bool:
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


def _chunk_size(line: bytes) -> int:
    try:
        return int(line.split(b";", 1)[0].strip() or b"0", 16)
    except ValueError:
        raise UpstreamConnectionError(f"bad chunk size line from upstream: {line[:50]!r}") from None


class RawResponse:
    def __init__(self, pool: ConnectionPool, conn: _Conn, status: int, headers: dict[str, str], method: str) -> None:
        self.status = status
        self.headers = headers
        self._pool, self._conn, self._method = pool, conn, method
        self._done = False
        self._released = False

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body, de-chunked, as it arrives. Everything received so far leaves as one piece (so
        several SSE events that arrived together cost one write downstream); nothing is held back,
        and no piece is empty. Closing the generator before its end gives the connection up."""
        reusable = self.headers.get("connection", "").lower() != "close"
        try:
            if self._method == "HEAD" or self.status in (204, 304):
                pass
            elif self.headers.get("transfer-encoding", "").lower().endswith("chunked"):
                async for piece in self._chunked():
                    yield piece
            elif "content-length" in self.headers:
                left = int(self.headers["content-length"])
                while left > 0:
                    data = await self._pool.read(self._conn, min(left, READ_SIZE))
                    if not data:
                        raise UpstreamConnectionError(f"upstream closed with {left} body bytes missing")
                    left -= len(data)
                    yield data
            else:  # the body runs until the server closes
                reusable = False
                while data := await self._pool.read(self._conn, READ_SIZE):
                    yield data
            self._done = True
        finally:
            self._release(self._done and reusable)

    async def _chunked(self) -> AsyncIterator[bytes]:
        buf = bytearray()
        size = -1  # -1: expecting a size line, else that many data bytes + CRLF
        while True:
            out: list[bytes] = []
            while True:
                if size < 0:
                    i = buf.find(b"\r\n")
                    if i < 0:
                        break
                    size = _chunk_size(bytes(buf[:i]))
                    del buf[: i + 2]
                    if size == 0:  # last chunk: then optional trailers, then an empty line
                        while True:
                            i = buf.find(b"\r\n")
                            if i == 0:
                                if out:
                                    yield b"".join(out)
                                return
                            if i > 0:
                                del buf[: i + 2]
                                continue
                            data = await self._pool.read(self._conn, READ_SIZE)
                            if not data:
                                raise UpstreamConnectionError("upstream closed the connection in the chunked trailer")
                            buf += data
                if len(buf) < size + 2:
                    break
                out.append(bytes(buf[:size]))
                del buf[: size + 2]
                size = -1
            if out:
                yield b"".join(out)
            data = await self._pool.read(self._conn, READ_SIZE)
            if not data:
                raise UpstreamConnectionError("upstream closed the connection mid-response")
            buf += data

    def _release(self, reusable: bool) -> None:
        if not self._released:
            self._released = True
            self._pool.finished(self._conn, reusable)


@functools.lru_cache(maxsize=256)  # an upstream's calls go to one or two URLs: parsed once
def _split_url(url: str) -> tuple[Origin, str, str]:
    """(origin, request target, host header) of an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # Named without user:password@ and ?query: a base URL may carry a credential there, and
        # this message reaches the transcript and the agent.
        shown = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}{parts.path}"
        raise ValueError(
            f"upstream URL {shown!r} must be http(s)://host[:port]/path; check the provider's "
            "base-URL variable (e.g. ANTHROPIC_BASE_URL)"
        )
    origin: Origin = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return origin, target, parts.netloc.rsplit("@", 1)[-1]


class ConnectionPool:
    """Per-origin idle connections. Read timeouts are enforced by one sweeper task (a timer per
    read cost more than the rest of the proxying): a connection in use that received nothing
    for its limit is closed, which ends its pending read with UpstreamIdleTimeout."""

    def __init__(self, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.idle_timeout = idle_timeout
        self._idle: dict[Origin, list[_Conn]] = defaultdict(list)
        self._active: set[_Conn] = set()
        self._ssl: ssl.SSLContext | None = None
        self._closed = False
        self._sweeper: asyncio.Task[None] | None = None

    async def read(self, conn: _Conn, n: int) -> bytes:
        try:
            data = await conn.reader.read(n)
        except OSError as e:
            raise UpstreamConnectionError(f"{type(e).__name__}: {e}") from None
        if not data and conn.timed_out:
            raise conn.idle_error()
        conn.last_read = monotonic()
        return data

    def finished(self, conn: _Conn, reusable: bool) -> None:
        self._active.discard(conn)
        idle = self._idle[conn.origin]
        if not reusable or self._closed or len(idle) >= MAX_IDLE_PER_ORIGIN or not conn.usable():
            conn.close()
        else:
            idle.append(conn)

    async def _sweep(self) -> None:
        while not self._closed:
            # A quarter of the shortest limit in force: a stall is noticed within 125 % of its limit.
            await asyncio.sleep(min([5.0, self.idle_timeout / 4] + [c.limit / 4 for c in self._active]))
            now = monotonic()
            for conn in list(self._active):
                if now - conn.last_read > conn.limit:
                    conn.timed_out = True
                    conn.close()
                    conn.reader.feed_eof()  # a pending read returns b"": reported as UpstreamIdleTimeout

    async def _connect(self, origin: Origin) -> _Conn:
        scheme, host, port = origin
        if scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl if scheme == "https" else None, limit=1 << 20
                )
        except TimeoutError:
            raise UpstreamConnectionError(
                f"connecting to {host}:{port} timed out after {CONNECT_TIMEOUT:.0f} s"
            ) from None
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # SSE events must not wait for ACKs
        return _Conn(reader, writer, origin)

    async def request(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, head_timeout: float | None = None
    ) -> RawResponse:
        """Send a request; returns once the status and headers arrived. `head_timeout`: the silence
        allowed before the head (default: the pool's idle timeout, which applies to the body)."""
        origin, target, host = _split_url(url)
        head = [f"{method} {target} HTTP/1.1\r\nhost: {host}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None:
            head.append(f"content-length: {len(body)}")
        head.append("\r\n")
        payload = "\r\n".join(head).encode("latin-1")
        if body:
            payload += body
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        idle = self._idle.get(origin)
        while idle:  # an idle connection the server has closed fails at once: then the next, or a new one
            conn = idle.pop()
            if not conn.usable():
                conn.close()
                continue
            try:
                return await self._exchange(conn, payload, method, head_timeout)
            except UpstreamIdleTimeout:
                raise  # the server took the request and went silent: a new connection would not help now
            except UpstreamConnectionError:
                pass
        return await self._exchange(await self._connect(origin), payload, method, head_timeout)

    async def _exchange(self, conn: _Conn, payload: bytes, method: str, head_timeout: float | None) -> RawResponse:
        conn.last_read = monotonic()
        conn.limit = head_timeout or self.idle_timeout
        conn.timed_out = False
        self._active.add(conn)
        try:
            conn.writer.write(payload)
            head = await conn.reader.readuntil(b"\r\n\r\n")
            lines = head[:-4].decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
        except BaseException as e:
            self._active.discard(conn)
            conn.close()
            if isinstance(e, asyncio.IncompleteReadError) and conn.timed_out:
                raise conn.idle_error() from None
            if isinstance(e, asyncio.IncompleteReadError):
                raise UpstreamConnectionError(
                    f"upstream closed the connection before responding ({len(e.partial)} bytes)"
                ) from None
            if isinstance(e, (IndexError, ValueError)):
                raise UpstreamConnectionError("upstream sent a malformed status line") from None
            if isinstance(e, (OSError, asyncio.LimitOverrunError)):
                raise UpstreamConnectionError(f"{type(e).__name__}: {e}") from None
            raise
        conn.limit = self.idle_timeout  # the body: silence between bytes
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return RawResponse(self, conn, status, headers, method)

    async def aclose(self) -> None:
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self._active):
            conn.close()
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
