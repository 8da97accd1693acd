"""Small JSON helpers shared by every module that writes results to disk.

orjson is used for speed (transcripts and reports touch many files); writes that mark
something as finished are atomic (write a temp file, fsync, rename) so a crash never leaves
a half-written file that a resume would mistake for a finished one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

_DUMP_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(obj: Any, *, pretty: bool = False) -> bytes:
    return orjson.dumps(obj, option=_DUMP_OPTS if pretty else orjson.OPT_SERIALIZE_NUMPY)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def read_json(path: str | os.PathLike[str]) -> Any:
    return orjson.loads(Path(path).read_bytes())


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Write `obj` as pretty JSON to `path` atomically (readers see the old file or the new one)."""
    write_bytes_atomic(path, dumps(obj, pretty=True) + b"\n")


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, *, sync: bool = True) -> None:
    """Readers see the old file or the new one. `sync=False` skips the fsync: for files that may be
    lost in a crash but must never be half-written (a cache)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[Any]:
    """A JSONL file's values one line at a time (constant memory). Lines that are not valid JSON are
    skipped, wherever they are: the expected one is a torn last line (a process killed mid-write),
    but a corrupt middle line is dropped too."""
    with open(path, "rb") as f:
        yield from _values(f)


def parse_jsonl(data: bytes) -> list[Any]:
    """The values of JSONL text already read (e.g. under a lock), skipping lines as `iter_jsonl` does."""
    return list(_values(data.splitlines()))


def _values(lines: Iterable[bytes]) -> Iterator[Any]:
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            continue


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """A whole JSONL file as a list (see `iter_jsonl`)."""
    return list(iter_jsonl(path))


def write_bytes_batch(files: Mapping[str, bytes], *, sync: bool = True) -> None:
    """Write many files, each atomically (temp file + rename: a reader sees the old file or the new
    one), and make them all durable with ONE filesystem sync at the end instead of an fsync per file
    (25,000 fsyncs took over a minute). Callers that publish a summary of these files write it
    after this returns (e.g. with `write_json_atomic`), so the summary is never on disk ahead of
    the files it describes. Paths are strings: pathlib costs seconds at this count. `sync=False`
    skips the sync, for files cheap to make again (a crash may lose them, never tear them): on a
    shared disk one syncfs waits for everything anyone has written."""
    if not files:
        return
    folders: set[str] = set()
    suffix = f".{os.getpid()}.tmp"
    for path, data in files.items():
        folder, name = os.path.split(path)
        if folder not in folders:
            os.makedirs(folder or ".", exist_ok=True)
            folders.add(folder)
        tmp = os.path.join(folder, f".{name}{suffix}")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
    if not sync:
        return
    for folder in {os.stat(d or ".").st_dev: d or "." for d in folders}.values():  # one sync per filesystem
        sync_filesystem(folder)


def sync_filesystem(path: str | os.PathLike[str]) -> None:
    """Flush everything written to the filesystem holding `path`: syncfs(2) on Linux (Python has
    no wrapper), else os.sync()."""
    import ctypes

    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs({path}): {os.strerror(err)}")
    finally:
        os.close(fd)
