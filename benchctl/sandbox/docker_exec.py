"""Reading a Docker exec's multiplexed output with a deadline and an output cap.

The docker SDK's `exec_run` blocks until the process ends and keeps all output in memory.
Here we take the raw upgraded socket (`exec_start(socket=True)`), parse the 8-byte frame
headers ourselves and `select()` with a deadline, so the caller can kill the process when the
deadline passes even if something in the container keeps the pipe open.
"""

from __future__ import annotations

import select
import struct
import time
from dataclasses import dataclass, field
from typing import Any

# After this many bytes beyond the cap (per stream), stop draining and let the caller kill the
# process: an endless `yes` must not pump gigabytes through the API.
DRAIN_FACTOR = 10


@dataclass
class StreamCapture:
    cap: int
    data: list[bytearray] = field(default_factory=lambda: [bytearray(), bytearray()])
    seen: list[int] = field(default_factory=lambda: [0, 0])

    def add(self, stream: int, chunk: bytes) -> None:
        idx = 1 if stream == 2 else 0
        self.seen[idx] += len(chunk)
        room = self.cap - len(self.data[idx])
        if room > 0:
            self.data[idx] += chunk[:room]

    @property
    def truncated(self) -> bool:
        return any(s > self.cap for s in self.seen)

    @property
    def flooding(self) -> bool:
        return any(s > self.cap * DRAIN_FACTOR + 10_000_000 for s in self.seen)

    def text(self, idx: int) -> str:
        return self.data[idx].decode("utf-8", "replace")


class FrameReader:
    """Incremental parser of Docker's stdcopy framing over a raw socket."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self._buf = b""
        self.eof = False

    def _recv(self) -> bytes | None:
        """The next bytes; b"" at EOF; None after a spurious wakeup (nothing to read yet)."""
        raw = getattr(self.sock, "_sock", self.sock)
        try:
            return raw.recv(65536)
        except (BlockingIOError, InterruptedError):
            return None

    def pump(self, capture: StreamCapture, until: float) -> None:
        """Read frames into `capture` until EOF, flooding, or the monotonic time `until`."""
        while not self.eof and not capture.flooding:
            left = until - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = self._recv()
            if chunk is None:
                continue
            if not chunk:
                self.eof = True
                return
            self._buf += chunk
            while len(self._buf) >= 8:
                stream, size = struct.unpack(">BxxxL", self._buf[:8])
                if len(self._buf) < 8 + size:
                    break
                capture.add(stream, self._buf[8 : 8 + size])
                self._buf = self._buf[8 + size :]

    def close(self) -> None:
        raw = getattr(self.sock, "_sock", None)
        for closer in (
            lambda: raw.close() if raw is not None else None,
            self.sock.close,
            lambda: getattr(self.sock, "_response", None) and self.sock._response.close(),
        ):
            try:
                closer()
            except Exception:
                pass
