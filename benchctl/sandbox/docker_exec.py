"""How a command runs in a DockerSandbox's container: the one exec path under both the blocking
`exec` and the streaming `exec_stream`.

The docker SDK's `exec_run` blocks until the process ends and keeps all output in memory.
Here we take the raw upgraded socket (`exec_start(socket=True)`), parse the 8-byte frame
headers ourselves and `select()` against a deadline, so the caller can kill the process when the
deadline passes even if something in the container keeps the pipe open.

Every exec carries a marker variable (EXEC_MARKER) in its environment, which its children inherit
even through `setsid`. To end an exec the host kills every process whose environment holds the
marker (KILL_BY_MARKER, itself one more short exec). Where output goes is a *sink*: StreamCapture
keeps the first bytes of each stream (blocking exec), LineSink hands stdout to a callback line by
line as it arrives (streaming exec).
"""

from __future__ import annotations

import math
import select
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from benchctl.sandbox.base import SandboxError

EXEC_MARKER = "BENCHCTL_EXEC_ID"
# Kills every process whose environment carries the marker ($1, NAME=VALUE). Repeated so processes
# forked during the sweep are caught too.
KILL_BY_MARKER = (
    "for round in 1 2 3; do found=; for p in /proc/[0-9]*; do "
    'grep -qzx "$1" "$p/environ" 2>/dev/null && { kill -9 "${p#/proc/}" 2>/dev/null; found=1; }; '
    'done; [ -z "$found" ] && break; done; true'
)
# The container's count of out-of-memory kills (cgroup v1 or v2).
OOM_COUNT = (
    "cat /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events 2>/dev/null"
    " | awk '$1==\"oom_kill\"{print $2; exit}'"
)
POLL_S = 0.25  # how often a running exec's deadline, cancel and stop are looked at
# After this many bytes beyond the cap (per stream), stop draining and let the caller kill the
# process: an endless `yes` must not pump gigabytes through the API.
DRAIN_FACTOR = 10
STDERR_CAP = 2_000_000  # stderr a streamed command keeps

# Why the host killed an exec.
Reason = Literal["deadline", "flood", "cancelled", "stopped"]


class Sink(Protocol):
    """Where an exec's demultiplexed output goes (stream 1: stdout, 2: stderr)."""

    @property
    def flooding(self) -> bool: ...

    def add(self, stream: int, chunk: bytes) -> None: ...


@dataclass
class StreamCapture:
    """Keeps the first `cap` bytes of stdout and of stderr; floods past DRAIN_FACTOR times that."""

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


class LineSink:
    """stdout split into lines for `on_line` as they arrive; stderr kept up to STDERR_CAP."""

    flooding = False  # a streamed command's stdout is the caller's to keep: never capped here

    def __init__(self, on_line: Callable[[str], None]) -> None:
        self.on_line = on_line
        self.first_stdout: float | None = None  # monotonic time of the first stdout bytes
        self.stderr = bytearray()
        self._buf = bytearray()

    def add(self, stream: int, chunk: bytes) -> None:
        if stream == 2:
            room = STDERR_CAP - len(self.stderr)
            if room > 0:
                self.stderr += chunk[:room]
            return
        if self.first_stdout is None:
            self.first_stdout = time.monotonic()
        self._buf += chunk
        start = 0
        while (nl := self._buf.find(b"\n", start)) >= 0:
            self._emit(bytes(self._buf[start:nl]))
            start = nl + 1
        del self._buf[:start]

    def flush(self) -> None:
        """The last line, when the output did not end with a newline."""
        if self._buf:
            line, self._buf = bytes(self._buf), bytearray()
            self._emit(line)

    def _emit(self, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").strip()
        if text:
            try:
                self.on_line(text)
            except Exception:  # a caller's parser bug must not stop the reading (and the kill at the deadline)
                pass


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

    def pump(self, sink: Sink, until: float) -> None:
        """Read frames into `sink` until EOF, flooding, or the monotonic time `until`."""
        while not self.eof and not sink.flooding:
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
                sink.add(stream, self._buf[8 : 8 + size])
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


@dataclass
class Ended:
    """How an exec ended: its exit code, and why the host killed it (None: it ended by itself)."""

    exit_code: int | None
    reason: Reason | None
    duration_s: float  # from the exec's start until its output ended (before the exit-code poll)
    marker: str  # EXEC_MARKER's value: kill_marked(marker) ends whatever is left of it


@dataclass(frozen=True)
class Container:
    """A running container as its execs see it: docker-py's low-level API, its id, its name (for
    messages). Every Docker error comes out as SandboxError."""

    api: Any
    id: str
    name: str

    def run(
        self,
        argv: list[str],
        sink: Sink,
        *,
        user: str,
        env: dict[str, str],
        workdir: str | None,
        deadline: Callable[[], float],
        cancel: threading.Event | None = None,
        stop: Callable[[], bool] | None = None,
        drain_s: float = 0.0,
    ) -> Ended:
        """Run `argv` with its output going to `sink` until it ends by itself or is killed: output
        flooding, `cancel` set, the monotonic `deadline()` passed, `stop()` true (checked in that
        order every POLL_S). After a kill, output is read for `drain_s` more seconds (0: none)."""
        marker = uuid.uuid4().hex
        started = time.monotonic()
        exec_id, reader = self.start_exec(
            argv, user, stdout=True, stderr=True, environment={**env, EXEC_MARKER: marker}, workdir=workdir
        )
        reason: Reason | None = None
        try:
            while not reader.eof:
                reader.pump(sink, min(time.monotonic() + POLL_S, deadline()))
                if reader.eof:
                    break
                if sink.flooding:
                    reason = "flood"
                elif cancel is not None and cancel.is_set():
                    reason = "cancelled"
                elif time.monotonic() >= deadline():
                    reason = "deadline"
                elif stop is not None and stop():
                    reason = "stopped"
                if reason is not None:
                    break
            if reason is not None and drain_s > 0 and reason != "flood":
                # What the processes wrote before they died still reaches the sink.
                self.kill_marked(marker, user)
                reader.pump(sink, time.monotonic() + drain_s)
            elif reason is not None:
                # Close our end first: the daemon serialises exit handling behind an undrained
                # stream, so the kill exec would otherwise stall.
                reader.close()
                self.kill_marked(marker, user)
        finally:
            reader.close()
        duration = time.monotonic() - started
        return Ended(self.exit_code(exec_id), reason, duration, marker)

    def start_exec(self, argv: list[str], user: str, **kwargs: Any) -> tuple[str, FrameReader]:
        """Create and start an exec; its output is read from the returned FrameReader."""
        import docker.errors

        try:
            exec_id = self.api.exec_create(self.id, argv, user=user, **kwargs)["Id"]
            return exec_id, FrameReader(self.api.exec_start(exec_id, socket=True))
        except docker.errors.APIError as e:  # container gone (stopped, removed by cleanup) or not running
            raise SandboxError(f"cannot exec in sandbox {self.name}: {e.explanation or e}") from e

    def exit_code(self, exec_id: str) -> int | None:
        import docker.errors

        for _ in range(50):  # the exit code appears a moment after the stream closes
            try:
                info = self.api.exec_inspect(exec_id)
            except docker.errors.APIError as e:  # the container was removed while the command ran
                raise SandboxError(f"sandbox {self.name} went away while a command ran: {e.explanation or e}") from e
            if not info.get("Running"):
                return info.get("ExitCode")
            time.sleep(0.02)
        return None

    def kill_marked(self, marker: str, user: str) -> None:
        """Kill every process of the exec whose marker value is `marker`."""
        try:
            self.quick(["sh", "-c", KILL_BY_MARKER, "kill", f"{EXEC_MARKER}={marker}"], user)
        except Exception:
            pass  # the container may already be gone; stopping the sandbox removes everything anyway

    def quick(self, argv: list[str], user: str, timeout: float = 15.0) -> str:
        """A short helper command's stdout, with a host-side deadline (never hangs the caller)."""
        _, reader = self.start_exec(argv, user)
        capture = StreamCapture(cap=1_000_000)
        try:
            reader.pump(capture, time.monotonic() + timeout)
        finally:
            reader.close()
        if not reader.eof:
            raise SandboxError(f"helper command {argv[:3]} did not finish in {timeout} s")
        return capture.text(0)


def monotonic_deadline(deadline: float | None | Callable[[], float | None]) -> Callable[[], float]:
    """A unix-time deadline (or a function giving one now, or None) as a function giving the
    monotonic time it falls at (inf for none)."""
    wall0, mono0 = time.time(), time.monotonic()

    def at() -> float:
        now = deadline() if callable(deadline) else deadline
        return math.inf if now is None else mono0 + (now - wall0)

    return at
