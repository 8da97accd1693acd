"""Safe artifact collection: turn what is inside a sandbox into files under one host directory.

Nothing the sandbox wrote can make the host read or write outside `dest_dir`:

- we never call `tarfile.extract*`; each tar member is checked and written by hand;
- names that are absolute, contain `..`, or were not in the in-container listing are refused;
- symlinks and hard links are never created or followed on the host; special files (fifos,
  sockets, devices) are skipped; each of these is reported with a reason;
- regular files above the size cap are refused *before* their bytes are streamed (the
  in-container listing tells us the size), so a 2 GB sparse file is never read; a file that
  grows past the cap between listing and copying is cut off and deleted;
- host files are opened with O_NOFOLLOW and parent directories are checked to be real
  directories, so a pre-existing symlink in `dest_dir` is not followed either.

The Docker-specific parts (listing via exec, `get_archive`) live in docker_sandbox.py; this
module is pure and unit-testable with hand-made tar streams.
"""

from __future__ import annotations

import os
import posixpath
import stat
import tarfile
from collections.abc import Iterable, Iterator, Set
from dataclasses import dataclass
from pathlib import Path

from benchctl.sandbox.base import WORK_DIR, CollectReport

# `find -printf` record for the listing: type, size, path, symlink target, each NUL-terminated.
FIND_PRINTF = r"%y\0%s\0%p\0%l\0"

SPECIAL_KINDS = {"p": "fifo", "s": "socket", "c": "character device", "b": "block device", "D": "door"}


@dataclass(frozen=True)
class Entry:
    """One filesystem object inside the sandbox, as `find -P -printf FIND_PRINTF` saw it."""

    kind: str  # find %y: f d l p s c b
    size: int
    path: str  # absolute in-container path
    link_target: str = ""


def parse_find_listing(raw: bytes) -> list[Entry]:
    fields = raw.split(b"\0")
    entries = []
    for i in range(0, len(fields) - 3, 4):
        kind, size, path, target = (f.decode("utf-8", "surrogateescape") for f in fields[i : i + 4])
        entries.append(Entry(kind=kind, size=int(size) if size.isdigit() else 0, path=path, link_target=target))
    return entries


def dest_name(root: str) -> str:
    """Where a requested in-container path lands, relative to dest_dir.

    Paths under /work keep their place (`/work/reports/r.md` -> `reports/r.md`, `/work/preds`
    -> `preds/...`, `/work` itself -> its contents), so the artifacts folder mirrors /work;
    anything else lands under its basename (`/tmp/x.log` -> `x.log`)."""
    if root == WORK_DIR:
        return ""
    if root.startswith(WORK_DIR + "/"):
        return posixpath.relpath(root, WORK_DIR)
    return posixpath.basename(root)


def relative_name(root: str, path: str, root_is_dir: bool) -> str:
    """Where an in-container `path` (found under the requested `root`) lands under dest_dir."""
    base = dest_name(root)
    if root_is_dir and path != root:
        return posixpath.join(base, posixpath.relpath(path, root)) if base else posixpath.relpath(path, root)
    return base


def safe_relpath(name: str) -> str | None:
    """A normalised relative path, or None if `name` is absolute, empty or climbs with `..`."""
    if not name or name.startswith("/") or "\0" in name:
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


class SafeWriter:
    """Creates directories and regular files strictly below `dest_dir`, never via a symlink."""

    def __init__(self, dest_dir: Path) -> None:
        dest_dir.mkdir(parents=True, exist_ok=True)
        self.root = dest_dir.resolve()

    def _real_dir(self, rel_dir: str) -> Path:
        """Create (if needed) and return the directory `rel_dir`, refusing symlinked components."""
        current = self.root
        for part in [p for p in rel_dir.split("/") if p]:
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                os.mkdir(current, 0o755)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise OSError(f"{current} exists and is not a real directory")
        return current

    def mkdir(self, rel: str) -> None:
        self._real_dir(rel)

    def write(self, rel: str, chunks: Iterable[bytes], max_bytes: int) -> int | None:
        """Write `chunks` to `rel`; return bytes written, or None (file removed) if over the cap."""
        parent, _, base = rel.rpartition("/")
        target = self._real_dir(parent) / base
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        written = 0
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    written += len(chunk)
                    if written > max_bytes:
                        break
                    out.write(chunk)
        except BaseException:
            os.unlink(target)
            raise
        if written > max_bytes:
            os.unlink(target)
            return None
        return written


class _ChunkReader:
    """File-like adapter over an iterator of byte chunks, for tarfile's streaming mode."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._it: Iterator[bytes] = iter(chunks)
        self._buf = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            try:
                self._buf += next(self._it)
            except StopIteration:
                break
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _member_chunks(tf: tarfile.TarFile, member: tarfile.TarInfo, limit: int) -> Iterator[bytes]:
    f = tf.extractfile(member)
    if f is None:
        return
    left = limit + 1  # one byte over the cap is enough to know it is too big
    while left > 0:
        chunk = f.read(min(1 << 20, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def extract_archive(
    chunks: Iterable[bytes],
    writer: SafeWriter,
    report: CollectReport,
    *,
    container_root: str,
    root_is_dir: bool,
    expected: dict[str, Entry] | None,
    max_bytes: int,
    dest_prefix: str = "",
    already_reported: Set[str] = frozenset(),
) -> bool:
    """Write the members of a `get_archive(container_root)` tar stream through `writer`.

    Members land at `dest_prefix/<name below container_root>` (directory) or
    `dest_prefix/<basename>` (file). `expected` maps those relative names to listing entries
    (None when no listing was possible; then only names and in-stream sizes are checked).
    Returns False if it stopped early because a member was over the cap in the stream itself —
    the caller must then close the HTTP stream so the daemon stops sending.
    """
    tf = tarfile.open(fileobj=_ChunkReader(chunks), mode="r|")  # type: ignore[call-overload]
    # Docker names members after the requested path's basename: "work/...", or "report.md".
    top = posixpath.basename(container_root.rstrip("/"))
    for member in tf:
        raw = member.name
        below = raw[len(top) :].lstrip("/") if raw == top or raw.startswith(top + "/") else None
        if below is None or (below and not root_is_dir):
            report.skipped.append(
                {"path": f"{container_root} :: {raw}", "reason": f"unexpected archive member name {raw!r}"}
            )
            continue
        if root_is_dir and below == "":  # the requested directory itself
            if dest_prefix:
                writer.mkdir(dest_prefix)
            continue
        cpath = posixpath.join(container_root, below) if below else container_root
        name = below if root_is_dir else top
        rel = safe_relpath(posixpath.join(dest_prefix, name) if dest_prefix else name)
        if rel is not None and rel in already_reported:
            continue  # refused from the listing, reason already recorded
        if rel is None or (expected is not None and rel not in expected):
            report.skipped.append({"path": cpath, "reason": f"unsafe or unlisted archive name {raw!r}"})
            continue
        if member.issym() or member.islnk():
            kind = "symlink" if member.issym() else "hard link"
            report.skipped.append({"path": cpath, "reason": f"{kind} -> {member.linkname} (not followed)"})
            continue
        if expected is not None and expected[rel].kind != ("d" if member.isdir() else "f" if member.isreg() else "?"):
            report.skipped.append({"path": cpath, "reason": "file type changed since listing, not copied"})
            continue
        if not member.isreg() and not member.isdir():
            report.skipped.append({"path": cpath, "reason": "special file (fifo/socket/device), not copied"})
            continue
        if member.size > max_bytes:
            report.skipped.append(
                {
                    "path": cpath,
                    "reason": f"file is {member.size} bytes, over the "
                    f"{max_bytes}-byte cap; collection of {container_root} stopped here",
                }
            )
            return False
        try:
            if member.isdir():
                writer.mkdir(rel)
                continue
            written = writer.write(rel, _member_chunks(tf, member, max_bytes), max_bytes)
        except OSError as e:  # e.g. a symlink or file already sitting in dest_dir on that path
            report.skipped.append({"path": cpath, "reason": f"not written on the host: {e}"})
            continue
        if written is None:
            report.skipped.append({"path": cpath, "reason": f"file grew over the {max_bytes}-byte cap"})
            continue
        report.copied.append(cpath)
    return True


def plan(
    entries: list[Entry], root: str, root_is_dir: bool, max_bytes: int, report: CollectReport
) -> tuple[dict[str, Entry], bool, set[str]]:
    """Split a listing into entries whose bytes may be fetched (by relative name), whether any
    file was refused for size (then the caller must fetch file by file instead of one archive
    of the whole tree), and the relative names refused — each refusal reported with a reason."""
    allowed: dict[str, Entry] = {}
    refused: set[str] = set()
    oversize = False
    for e in entries:
        if e.path == root and root_is_dir and not dest_name(root):
            continue  # /work itself: its contents go straight into dest_dir
        rel = safe_relpath(relative_name(root, e.path, root_is_dir))
        reason = None
        if rel is None:
            reason = "unsafe path name"
        elif e.kind == "l":
            reason = f"symlink -> {e.link_target} (not followed)"
        elif e.kind in SPECIAL_KINDS:
            reason = f"{SPECIAL_KINDS[e.kind]}, not copied"
        elif e.kind == "f" and e.size > max_bytes:
            reason = f"file is {e.size} bytes, over the {max_bytes}-byte cap (not read)"
            oversize = True
        elif e.kind not in ("f", "d"):
            reason = f"unknown file type {e.kind!r}"
        if reason is None and rel is not None:
            allowed[rel] = e
        else:
            report.skipped.append({"path": e.path, "reason": reason or "unsafe path name"})
            if rel is not None:
                refused.add(rel)
    return allowed, oversize, refused
