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

from benchctl.view import events

_PREFIX = re.compile(rb'\{"v":\d+,"seq":(\d+),"t":(-?[0-9][0-9.eE+-]*),"type":"([A-Za-z0-9_.-]{1,64})"')


class TranscriptIndex:
    """Line i of the file is event i: starts[i], seqs[i], times[i], types[i].

    Indexing publishes what it has read one chunk at a time, and can stop once the lines a
    reader needs are indexed (`refresh(lines=...)`), leaving the rest to a later refresh. The
    arrays only grow (or are replaced whole when the file is), so reading them without the lock
    sees a consistent prefix."""

    chunk_size = 1 << 20  # bytes read and published at a time
    search_chunk = 8 << 20  # bytes read, decoded and case-folded at a time by search

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()  # guards the arrays and `end` while they change
        self._scan_lock = threading.Lock()  # one scan at a time
        self.partial = False  # a refresh stopped before the end of the file
        self.generation = -1  # +1 each time the index starts over (file replaced)
        self._reset(None)

    def _reset(self, ident: tuple[int, int] | None) -> None:
        self.generation += 1
        self.ident = ident
        self.end = 0  # bytes indexed (always just after a newline)
        self.starts = array("q")
        self.seqs = array("q")
        self.times = array("d")
        self.types: list[str] = []
        self.start_event: dict[str, Any] | None = None  # the run_start event, if any
        self.phase_starts: list[int] = []  # line numbers of `followup` events

    def __len__(self) -> int:
        return len(self.starts)

    def refresh(self, lines: int | None = None) -> int:
        """Index what was appended since the last call; returns the number of events. With
        `lines`, stop at the end of the chunk that reaches that many lines and leave the rest to a
        later call (`partial`); an index that is partial but has them already is left as it is."""
        if lines is not None and self.partial and len(self.starts) >= lines:
            return len(self.starts)  # the rest is another refresh's work
        with self._scan_lock:
            with self.lock:
                try:
                    st = os.stat(self.path)
                except FileNotFoundError:
                    self._reset(None)
                    self.partial = False
                    return 0
                ident = (st.st_dev, st.st_ino)
                if ident != self.ident or st.st_size < self.end:  # replaced or truncated: start over
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
            remaining = remaining - len(chunk) if chunk else 0  # a shorter file: stop here
            buf = carry + chunk
            base = pos - len(carry)
            cut = buf.rfind(b"\n") + 1  # a line without its newline waits (carry)
            new = _Lines(len(self.starts))
            i = 0
            while i < cut:
                j = buf.index(b"\n", i)
                new.add(buf, i, j, base + i)
                i = j + 1
            carry = buf[cut:]
            pos = base + len(buf)
            with self.lock:  # publish the chunk
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
        lo, hi = 0, n  # seqs increase: binary search
        while lo < hi:
            mid = (lo + hi) // 2
            if self.seqs[mid] < seq:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < n and self.seqs[lo] == seq else None

    def read(self, first: int, last: int) -> list[dict[str, Any]]:
        """Events on lines [first, last), parsed; a damaged line becomes an `unparsed` event."""
        with self.lock:  # a refresh may be extending the arrays
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
        r"""Line numbers of the events whose text (`events.texts`: the strings and numbers in them,
        not keys or JSON punctuation) contains `query`, compared Unicode case-folded, and whether
        more than `limit` matched (the search stops there).

        Parsing every line would take about a second for 100,000 events, so the file is read
        `search_chunk` bytes at a time, decoded and case-folded whole, and only the lines whose
        folded JSON could hold a match are parsed and checked (`events.matches`): those holding
        the query as written or JSON-escaped (`\"`, `\\`, `\n`) other than inside a key
        (`"name":`), those with a `\u` (or, for a query with `/`, `\/`) escape that the raw text
        cannot be searched through, and damaged lines (shown as their raw text)."""
        needle = query.casefold()
        if not needle or not self.end:
            return [], False
        escaped = orjson.dumps(needle).decode()[1:-1]
        # (text to find, whether a line holding it only inside keys can be skipped)
        patterns = [(needle, _KEY_CHARS.fullmatch(needle) is not None)]
        patterns += [(escaped, False)] if escaped != needle else []
        patterns += [("\\u", False)] + ([("\\/", False)] if "/" in needle else [])
        with self.lock:
            starts, end = self.starts[:], self.end
            damaged = [i for i, t in enumerate(self.types) if t == "unparsed"]
        hits: list[int] = []
        n = len(starts)
        with open(self.path, "rb") as f:
            a = 0
            while a < n and len(hits) <= limit:
                b = max(a + 1, bisect.bisect_right(starts, starts[a] + self.search_chunk, a))
                base = starts[a]
                f.seek(base)
                data = f.read((starts[b] if b < n else end) - base)
                text = data.decode("utf-8", "replace").casefold()
                lines = {a + k for pattern, in_keys in patterns for k in _lines_holding(text, pattern, in_keys)}
                lines.update(damaged[bisect.bisect_left(damaged, a) : bisect.bisect_left(damaged, b)])
                for i in sorted(lines):
                    raw = data[starts[i] - base : (starts[i + 1] if i + 1 < n else end) - base - 1]
                    if events.matches(_parse(raw), needle):
                        hits.append(i)
                        if len(hits) > limit:
                            break
                a = b
        return hits[:limit], len(hits) > limit


def _lines_holding(text: str, pattern: str, skip_keys: bool) -> set[int]:
    """The numbers of the lines of `text` (lines of case-folded JSON) holding `pattern`; with
    `skip_keys`, not those holding it only inside keys."""
    out: set[int] = set()
    line, pos = 0, 0
    k = text.find(pattern)
    while k >= 0:
        line += text.count("\n", pos, k)
        stop = text.find("\n", k)
        stop = len(text) if stop < 0 else stop
        if not (skip_keys and _only_in_keys(text, pattern, text.rfind("\n", 0, k) + 1, stop)):
            out.add(line)
        pos, k = k, text.find(pattern, stop)
    return out


# A key as TranscriptWriter (orjson) writes it, after case folding: `{"name":` or `,"name":`. A
# run of these characters between an unescaped quote and `":` can only be a key, so a query
# found only inside such runs is in no value.
_KEY_CHARS = re.compile(r"[a-z0-9_.-]+")
_KEY_TAIL = re.compile(r'[a-z0-9_.-]*":')


def _only_in_keys(text: str, needle: str, start: int, stop: int) -> bool:
    """Whether every occurrence of `needle` (key characters only) in text[start:stop], a line of
    case-folded JSON, is inside a key: `"` after `{` or `,`, key characters, the needle, key
    characters, `":`."""
    k = text.find(needle, start, stop)
    while k >= 0:
        q = text.rfind('"', max(start, k - 100), k)
        if (
            q < start + 1
            or text[q - 1] not in "{,"
            or (q + 1 < k and not _KEY_CHARS.fullmatch(text, q + 1, k))
            or not _KEY_TAIL.match(text, k + len(needle), stop)
        ):
            return False
        k = text.find(needle, k + 1, stop)
    return True


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
        else:  # another writer's key order, or a damaged line
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
    return (
        ev
        if isinstance(ev, dict)
        else {"type": "unparsed", "error": "not a JSON object", "raw": line[:4000].decode("utf-8", "replace")}
    )


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
