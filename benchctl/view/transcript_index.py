"""An in-memory index of a transcript.jsonl: the byte offset, seq, time and type of every line.

A 100,000-event transcript is far too big to ship to a browser or to parse per request, so the
run page reads windows of events by offset. Indexing scans the file once (reading only each
line's prefix, `{"v":1,"seq":N,"t":T,"type":"X"`, which is how `TranscriptWriter` writes every
event; other lines are parsed in full) and then follows it as it grows: transcripts are
append-only, so a refresh reads only the new bytes. A line without its newline yet is a write
in progress and is left for the next refresh. Indexing 100 MB takes about 0.35 s of CPU, so the
run page's first open does not wait for it: it indexes the first chunk, serves its first window
from it and indexes the rest once the page is sent (`refresh(lines=...)`, then `refresh()`).
The index lives in this process only: the viewer never writes into a results dir.
"""
from __future__ import annotations

import bisect
import os
import re
import sys
import threading
from array import array
from collections import OrderedDict
from typing import Any

import orjson

_PREFIX = re.compile(rb'\{"v":\d+,"seq":(\d+),"t":(-?[0-9][0-9.eE+-]*),"type":"([A-Za-z0-9_.-]{1,64})"')


class TranscriptIndex:
    """Line i of the file is event i: starts[i], seqs[i], times[i], types[i].

    Indexing publishes what it has read one chunk at a time, and can stop once the lines a
    reader needs are indexed (`refresh(lines=...)`), leaving the rest to a later refresh. The
    arrays only grow (or are replaced whole when the file is), so reading them without the lock
    sees a consistent prefix."""

    chunk_size = 1 << 20          # bytes read and published at a time

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()                   # guards the arrays and `end` while they change
        self._scan_lock = threading.Lock()             # one scan at a time
        self.partial = False                           # a refresh stopped before the end of the file
        self.generation = -1                           # +1 each time the index starts over (file replaced)
        self._reset(None)

    def _reset(self, ident: tuple[int, int] | None) -> None:
        self.generation += 1
        self.ident = ident
        self.end = 0                                   # bytes indexed (always just after a newline)
        self.starts = array("q")
        self.seqs = array("q")
        self.times = array("d")
        self.types: list[str] = []
        self.start_event: dict[str, Any] | None = None  # the run_start event, if any
        self.phase_starts: list[int] = []                # line numbers of `followup` events

    def __len__(self) -> int:
        return len(self.starts)

    def refresh(self, lines: int | None = None) -> int:
        """Index what was appended since the last call; returns the number of events. With
        `lines`, stop at the end of the chunk that reaches that many lines and leave the rest to a
        later call (`partial`); an index that is partial but has them already is left as it is."""
        if lines is not None and self.partial and len(self.starts) >= lines:
            return len(self.starts)                    # the rest is another refresh's work
        with self._scan_lock:
            with self.lock:
                try:
                    st = os.stat(self.path)
                except FileNotFoundError:
                    self._reset(None)
                    self.partial = False
                    return 0
                ident = (st.st_dev, st.st_ino)
                if ident != self.ident or st.st_size < self.end:     # replaced or truncated: start over
                    self._reset(ident)
                start, todo = self.end, st.st_size - self.end
            if todo > 0:
                with open(self.path, "rb") as f:
                    f.seek(start)
                    self.partial = self._scan(f, start, todo, lines)
            else:
                self.partial = False
            return len(self.starts)

    def on_chunk(self) -> None:
        """Called after each chunk is published: a hook for tests."""

    def _scan(self, f: Any, pos: int, remaining: int, lines: int | None) -> bool:
        """Index `remaining` bytes from `pos` on; returns whether it stopped early (`lines` reached)."""
        carry = b""
        while remaining > 0:
            chunk = f.read(min(self.chunk_size, remaining))
            remaining = remaining - len(chunk) if chunk else 0    # a shorter file: stop here
            buf = carry + chunk
            base = pos - len(carry)
            cut = buf.rfind(b"\n") + 1                # a line without its newline waits (carry)
            new = _Lines(len(self.starts))
            i = 0
            while i < cut:
                j = buf.index(b"\n", i)
                new.add(buf, i, j, base + i)
                i = j + 1
            carry = buf[cut:]
            pos = base + len(buf)
            with self.lock:                            # publish the chunk
                self.starts.extend(new.starts)
                self.seqs.extend(new.seqs)
                self.times.extend(new.times)
                self.types.extend(new.types)
                self.phase_starts.extend(new.phase_starts)
                if self.start_event is None:
                    self.start_event = new.start_event
                self.end = pos - len(carry)
            self.on_chunk()
            if lines is not None and len(self.starts) >= lines and remaining > 0:
                return True
        return False

    def position(self, seq: int) -> int | None:
        """The line holding event `seq` (equal to seq in a well-formed transcript)."""
        n = len(self.seqs)
        if 0 <= seq < n and self.seqs[seq] == seq:
            return seq
        lo, hi = 0, n                                  # seqs increase: binary search
        while lo < hi:
            mid = (lo + hi) // 2
            if self.seqs[mid] < seq:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < n and self.seqs[lo] == seq else None

    def read(self, first: int, last: int) -> list[dict[str, Any]]:
        """Events on lines [first, last), parsed; a damaged line becomes an `unparsed` event."""
        with self.lock:                                # a refresh may be extending the arrays
            first, last = max(0, first), min(last, len(self.starts))
            if first >= last:
                return []
            start = self.starts[first]
            stop = self.starts[last] if last < len(self.starts) else self.end
            with open(self.path, "rb") as f:
                f.seek(start)
                data = f.read(stop - start)
        out = []
        for k, line in enumerate(data.split(b"\n")[: last - first]):
            ev = _parse(line)
            ev.setdefault("seq", self.seqs[first + k])
            out.append(ev)
        return out

    def search(self, query: str, limit: int = 200) -> tuple[list[int], bool]:
        """Line numbers whose raw JSON contains `query` (ASCII case-insensitive), and whether more
        matched than `limit`. Searches the JSON text, so a query is also matched in its
        JSON-escaped form (quotes, backslashes, newlines)."""
        needles = {query.lower().encode()}
        needles.add(orjson.dumps(query.lower())[1:-1])
        needles.discard(b"")
        if not needles or not self.end:
            return [], False
        hits: set[int] = set()
        with self.lock, open(self.path, "rb") as f:
            data = f.read(self.end).lower()
            starts, end = self.starts[:], self.end
        for needle in needles:
            k = data.find(needle)
            while k >= 0:
                line = bisect.bisect_right(starts, k) - 1
                hits.add(line)
                if len(hits) > limit:
                    break
                nxt = starts[line + 1] if line + 1 < len(starts) else end
                k = data.find(needle, nxt)
        ordered = sorted(hits)
        return ordered[:limit], len(ordered) > limit


class _Lines:
    """The index entries of one chunk's lines, before they are published."""

    def __init__(self, first_line: int) -> None:
        self.n = first_line
        self.starts = array("q")
        self.seqs = array("q")
        self.times = array("d")
        self.types: list[str] = []
        self.phase_starts: list[int] = []
        self.start_event: dict[str, Any] | None = None

    def add(self, buf: bytes, i: int, j: int, offset: int) -> None:
        m = _PREFIX.match(buf, i, j)
        if m is not None:
            seq, t, type_ = int(m.group(1)), float(m.group(2)), sys.intern(m.group(3).decode())
        else:                                          # another writer's key order, or a damaged line
            ev = _parse(buf[i:j])
            seq = ev["seq"] if isinstance(ev.get("seq"), int) else self.n
            t = float(ev["t"]) if isinstance(ev.get("t"), (int, float)) else float("nan")
            type_ = sys.intern(str(ev.get("type", "unparsed")))
        self.starts.append(offset)
        self.seqs.append(seq)
        self.times.append(t)
        self.types.append(type_)
        if type_ == "followup":
            self.phase_starts.append(self.n)
        if type_ == "run_start" and self.start_event is None:
            self.start_event = _parse(buf[i:j])
        self.n += 1


def _parse(line: bytes) -> dict[str, Any]:
    try:
        ev = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        return {"type": "unparsed", "error": f"not valid JSON: {e}", "raw": line[:4000].decode("utf-8", "replace")}
    return ev if isinstance(ev, dict) else {"type": "unparsed", "error": "not a JSON object",
                                            "raw": line[:4000].decode("utf-8", "replace")}


class IndexCache:
    """Keeps the indexes of the most recently viewed transcripts (LRU)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._items: OrderedDict[str, TranscriptIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str, lines: int | None = None) -> TranscriptIndex:
        """The index of `path`, brought up to date (with `lines`: at least that many lines of it,
        see `TranscriptIndex.refresh`)."""
        with self._lock:
            idx = self._items.pop(path, None) or TranscriptIndex(path)
            self._items[path] = idx
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        idx.refresh(lines)
        return idx
