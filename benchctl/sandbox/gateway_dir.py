"""The per-run gateway directory (`/tmp/bc-gw-XXXXXXXX`): its `s/` subdirectory holds the
gateway's unix socket and is what the sandbox mounts at /gateway; beside it, `owner.lock` says
which run made it and is locked (flock) by that run's process for as long as the run lives.

A run removes its directory when it ends; a SIGKILL leaves it behind. The kernel drops a dead
process's flock, so a directory whose lock can be taken has no live owner and can go: resume
removes those of the runs it redoes, `benchctl cleanup` all of them. A live run's directory is
never touched: its lock is held, also against other threads of the same process. The lock
file sits outside the mounted `s/`, so the agent can neither see nor remove it.

Directories made by older benchctl versions (no `owner.lock`, the socket directly inside) count
as stale only when their socket refuses connections (its gateway died) and is over a minute
old; one without a socket is left alone, since it cannot be told from a run that is starting.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path("/tmp")  # AF_UNIX socket paths must stay under 108 bytes
PREFIX = "bc-gw-"
OWNER_FILE = "owner.lock"
MOUNTED = "s"  # the subdirectory mounted at /gateway
LEGACY_SOCKET = "gw.sock"
LEGACY_MIN_AGE_S = 60.0


class GatewayDir:
    """A run's gateway directory, locked by this process until `remove()`."""

    def __init__(self, run_id: str, results: Path | None = None, root: Path = ROOT) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
        # Locked before it gets its name, so no cleanup ever sees an unlocked owner file of a live run.
        pending = self.path / (OWNER_FILE + ".new")
        self._lock: IO[str] | None = open(pending, "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        json.dump(
            {
                "run_id": run_id,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "results": str(results) if results else None,
                "created_at": time.time(),
            },
            self._lock,
        )
        self._lock.flush()
        os.rename(pending, self.path / OWNER_FILE)
        self.mounted = self.path / MOUNTED
        self.mounted.mkdir()
        self.mounted.chmod(0o755)  # the sandbox's non-root user must reach the socket

    def remove(self) -> None:
        """Delete the directory, then let go of the lock (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


@dataclass
class FoundDir:
    path: Path
    run_id: str | None  # None for a directory made by an older benchctl
    owner_alive: bool
    legacy: bool = False  # made by an older benchctl: no owner lock


def _try_lock(path: Path) -> IO[str] | None:
    """The owner file opened and locked by us (its owner is gone), or None (it lives)."""
    try:
        f = open(path)
    except OSError:
        return None
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        return None
    return f


def _legacy_dead(d: Path) -> bool:
    sock = d / LEGACY_SOCKET
    try:
        st = sock.lstat()
    except OSError:
        return False
    if not stat.S_ISSOCK(st.st_mode) or time.time() - st.st_mtime < LEGACY_MIN_AGE_S:
        return False
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(str(sock))
    except (ConnectionRefusedError, FileNotFoundError):
        return True
    except OSError:
        return False  # e.g. a full backlog: someone is listening
    finally:
        s.close()
    return False


def _candidates(root: Path) -> list[Path]:
    """Our own real directories named bc-gw-*: never a symlink another user planted in /tmp."""
    out = []
    for p in sorted(root.glob(PREFIX + "*")):
        try:
            st = p.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            out.append(p)
    return out


def _owner_run_id(d: Path) -> str | None:
    try:
        rid = json.loads((d / OWNER_FILE).read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return rid if isinstance(rid, str) else None


def find(run_id: str | None = None, root: Path = ROOT) -> list[FoundDir]:
    """Gateway directories (of one run, if given), each with whether its owner still runs."""
    found = []
    for d in _candidates(root):
        legacy = not (d / OWNER_FILE).exists()
        if legacy and run_id is not None:
            continue  # it names no run: never one of the run's
        if legacy:
            rid, alive = None, not _legacy_dead(d)
        else:
            rid = _owner_run_id(d)
            lock = _try_lock(d / OWNER_FILE)
            if lock is not None:
                lock.close()
            alive = lock is None
        if run_id is None or rid == run_id:
            found.append(FoundDir(d, rid, alive, legacy))
    return found


def remove_stale(run_id: str | None = None, root: Path = ROOT, dry_run: bool = False) -> list[FoundDir]:
    """Remove the gateway directories (of one run, if given) whose owner is gone; return them.
    The owner lock is held while removing, so two cleanups never race over one directory."""
    removed = []
    for d in find(run_id, root):
        if d.owner_alive:
            continue
        if d.legacy:  # no lock to hold
            if not dry_run:
                shutil.rmtree(d.path, ignore_errors=True)
            removed.append(d)
            continue
        lock = _try_lock(d.path / OWNER_FILE)
        if lock is None:  # taken meanwhile (another cleanup)
            continue
        try:
            if not dry_run:
                shutil.rmtree(d.path, ignore_errors=True)
            removed.append(d)
        finally:
            lock.close()
    return removed
