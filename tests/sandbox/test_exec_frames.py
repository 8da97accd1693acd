"""FrameReader: Docker's multiplexed exec stream parsed from a socket, whatever the read boundaries."""

from __future__ import annotations

import socket
import struct
import time

from benchctl.sandbox.docker_exec import FrameReader, StreamCapture


class ScriptedSocket:
    """A socket whose recv() returns given pieces in order (then EOF); select() sees a real, readable fd."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = list(pieces)
        self._a, self._b = socket.socketpair()
        self._b.sendall(b"x")  # keeps self._a readable for select()
        self._sock = self

    def fileno(self) -> int:
        return self._a.fileno()

    def recv(self, n: int) -> bytes:
        return self._pieces.pop(0) if self._pieces else b""

    def close(self) -> None:
        self._a.close()
        self._b.close()


def _frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


def test_frames_split_across_reads_are_reassembled_even_a_lone_question_mark() -> None:
    out, err = _frame(1, b"?"), _frame(2, b"oops\n")
    # Reads that cut frames anywhere, including one read that is exactly the payload byte "?".
    sock = ScriptedSocket([out[:8], out[8:], err[:3], err[3:]])
    capture = StreamCapture(cap=1000)
    reader = FrameReader(sock)
    reader.pump(capture, time.monotonic() + 5)
    reader.close()
    assert reader.eof
    assert capture.text(0) == "?" and capture.text(1) == "oops\n"
