"""The report loader's parse cache: each file's parsed record, kept until the file changes.

Parsing ~130 MB of grade JSON costs most of a second, so the compacted records are kept in
`<results>/.benchctl-report-cache`, each keyed by its file's relative path and validated by
(inode, mtime_ns, size) from a fresh `stat` on every load — a file rewritten in place or
atomically replaced, added or removed is re-read, never served stale. The cache is an
optimisation only: unreadable, corrupt, foreign or unwritable (read-only results) means "no
cache", and it is replaced atomically but never fsynced (a crash can at worst lose it). It is
stored with `marshal` (JSON types only: dicts, lists, tuples, str, numbers, None): reading it
back is several times faster than JSON, and objects shared in memory (the compacted items, see
`load._Compactor`) are written once and shared again on load. marshal can crash on a maliciously
crafted file (it never runs code), so a cache file is trusted only as far as the current user's
own files: it is read only when it belongs to the current user and starts with the expected header.

Reading: a file is read with `os.open` + `os.fstat` + `os.read` (no buffered-IO object: ~35 %
less CPU than `open().read()` on small files), and its cache key comes from that `fstat`, so the
key describes exactly the bytes parsed. A file with no cache entry is not `stat`ed first.
"""

from __future__ import annotations

import marshal
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from benchctl.jsonio import write_bytes_atomic

FileKey = tuple  # (st_ino, st_mtime_ns, st_size): what a cached record is checked against


def read_bytes(path: str) -> tuple[bytes, FileKey]:
    """A file's bytes and the key of exactly those bytes, from one open (see the module docstring).
    OSErrors name `path`, as `open()`'s do."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            data = os.read(fd, st.st_size + 1)
            if len(data) > st.st_size:  # grown since fstat: read to the end
                chunks = [data]
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                data = b"".join(chunks)
        finally:
            os.close(fd)
    except OSError as e:
        if e.filename is None:  # os.read on a directory: EISDIR without a name
            raise OSError(e.errno, e.strerror, path) from None
        raise
    return data, (st.st_ino, st.st_mtime_ns, st.st_size)


CACHE_FILE = ".benchctl-report-cache"
RACY_NS = 3_000_000_000
# marshal's format may change between Python versions: the version is part of the header.
_CACHE_HEADER = f"benchctl-report-cache/6 python{sys.version_info[0]}.{sys.version_info[1]}\n".encode()


class FileCache:
    """relpath -> (ino, mtime_ns, size, parsed value); see the module docstring. With `memo`
    (a dict a long-running caller keeps between loads) the entries live in that dict: read from
    it when it has any (else from the cache file), stored back into it, never written to disk."""

    def __init__(self, root: str, enabled: bool, memo: dict[str, tuple[Any, ...]] | None = None):
        self.path = os.path.join(root, CACHE_FILE)
        self.enabled = enabled
        self.memo = memo
        self.old: dict[str, tuple[Any, ...]] = {}
        self.new: dict[str, tuple[Any, ...]] = {}
        self.hits = self.misses = 0
        if enabled and memo:
            self.old = memo
        elif enabled:
            try:
                with open(self.path, "rb") as f:
                    if os.fstat(f.fileno()).st_uid == os.getuid() and f.read(len(_CACHE_HEADER)) == _CACHE_HEADER:
                        data = marshal.loads(f.read())
                        self.old = data if isinstance(data, dict) else {}
            except (OSError, ValueError, EOFError, TypeError):
                self.old = {}

    def get(self, rel: str, path: str, parse: Callable[[bytes], Any]) -> Any:
        """The parsed value of the file at `path` (`rel` to the results dir): the cached one if the
        file's (inode, mtime, size) still match, else `parse(its bytes)`, which raises on a bad file
        (not cached)."""
        hit = self.old.get(rel)
        if hit is not None:
            st = os.stat(path)
            if hit[0] == st.st_ino and hit[1] == st.st_mtime_ns and hit[2] == st.st_size:
                self.hits += 1
                self.new[rel] = hit
                return hit[3]
        data, key = read_bytes(path)
        value = parse(data)
        self.misses += 1
        if self.enabled:
            self.new[rel] = (*key, value)
        return value

    def save(self) -> None:
        unchanged = self.misses == 0 and len(self.new) == len(self.old)
        if not self.enabled or (unchanged and (self.memo is None or self.old is self.memo)):
            return
        # "Racy" files (modified in the last few seconds) are not cached: file times have
        # jiffy granularity, so a same-size rewrite in place moments after we read it could keep
        # its (inode, mtime, size) key. Like git's racy-index rule; they are re-read next time.
        fresh = time.time_ns() - RACY_NS
        entries = {rel: e for rel, e in self.new.items() if e[1] < fresh}
        if self.memo is not None:
            self.memo.clear()
            self.memo.update(entries)
            return
        try:
            # No fsync: a cache lost in a crash is rebuilt; the rename still makes it all-or-nothing.
            write_bytes_atomic(self.path, _CACHE_HEADER + marshal.dumps(entries), sync=False)
        except (OSError, ValueError):  # ValueError: an unmarshallable value (never JSON)
            pass  # read-only results dir: just no cache


__all__ = ["CACHE_FILE", "FileCache", "FileKey", "read_bytes"]
