"""Runs in progress: is a `benchctl run` working on this results dir right now, and how far along
is each of its runs (elapsed / budget, turns, tokens, cost so far)?

A run that is in progress has a directory but no meta.json yet (meta.json is written last). Such
a run is `running` while a `benchctl run` holds the results dir's lock (an flock, released by the
kernel when its process dies), and `unfinished` otherwise (its process was killed; a rerun will
redo it). The lock is looked up read-only in /proc/locks: taking it, even briefly, could make a
`benchctl run` starting at that moment refuse to start.

Live figures come from each running run's transcript, read incrementally and fed to the same
accumulator the live progress table of `benchctl run` uses (`benchctl.run.progress.Progress`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from types import SimpleNamespace
from typing import Any

import orjson

from benchctl.layout import RUNS, TRANSCRIPT
from benchctl.run.execution import LOCK_FILE
from benchctl.run.progress import Progress
from benchctl.sandbox.cleanup import pid_alive


def sweep_active(root: str) -> bool:
    """Whether a live process holds `benchctl run`'s lock on this results dir."""
    path = os.path.join(root, LOCK_FILE)
    try:
        st = os.stat(path)
    except OSError:
        return False
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            return any(ident in line.split() and "FLOCK" in line for line in f)
    except OSError:  # no /proc (not Linux): trust the recorded pid
        return _pid_alive(path)


def _pid_alive(lock_path: str) -> bool:
    try:
        with open(lock_path, encoding="utf-8", errors="replace") as f:
            words = f.read().split()  # "pid 123 on host"
        pid, host = int(words[1]), words[3]
    except (OSError, ValueError, IndexError):
        return False
    return host == socket.gethostname() and pid_alive(pid)


class _Tail:
    """Reads the complete lines appended to one transcript since the last call."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.ident: tuple[int, int] | None = None
        self.last_t: float | None = None  # time of the newest event read

    def new_events(self) -> list[dict[str, Any]]:
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if (st.st_dev, st.st_ino) != self.ident or st.st_size < self.offset:
            self.ident, self.offset = (st.st_dev, st.st_ino), 0
        if st.st_size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(st.st_size - self.offset)
        end = data.rfind(b"\n") + 1  # a line still being written waits
        self.offset += end
        out = []
        for line in data[:end].splitlines():
            try:
                ev = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(ev, dict):
                out.append(ev)
                if isinstance(ev.get("t"), (int, float)):
                    self.last_t = ev["t"]
        return out


class LiveRuns:
    """Live figures of the runs in progress, one tail per run, kept across requests."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.progress = Progress()
        self._tails: dict[str, tuple[_Tail, Any]] = {}
        self._lock = threading.Lock()

    def stats(self, run_id: str) -> dict[str, Any]:
        """Elapsed / budget, turns, tokens, cost so far and what the run is doing, from its transcript."""
        with self._lock:
            tail, spec = self._tails.get(run_id) or (_Tail(os.path.join(self.root, RUNS, run_id, TRANSCRIPT)), None)
            for ev in tail.new_events():
                if spec is None and ev.get("type") == "run_start":
                    raw = ev.get("spec")
                    s = raw if isinstance(raw, dict) else {}
                    spec = SimpleNamespace(
                        run_id=run_id,
                        harness=s.get("harness"),
                        model=s.get("model"),
                        budget=s.get("budget"),
                        budget_s=ev.get("budget_s") or s.get("budget_s"),
                        full=s,
                    )
                    self.progress.started(spec)
                if spec is not None:
                    self.progress.event(spec, ev)
            self._tails[run_id] = (tail, spec)
            line = self.progress.lines.get(run_id)
        if line is None or spec is None:  # (a line without a spec: the tail was dropped and re-read)
            return {"started": False}
        return {
            "started": True,
            "spec": spec.full,
            "harness": line.harness,
            "model": line.model,
            "budget": line.budget,
            "budget_s": line.budget_s,
            "elapsed_s": time.time() - line.started,
            "last_s": None if tail.last_t is None else tail.last_t - line.started,
            "turns": line.turns,
            "tokens": line.tokens,
            "cost_usd": None if line.cost_unknown else line.cost,
            "doing": line.status,
        }

    def keep_only(self, run_ids: set[str]) -> None:
        """Drop the tails of runs that are no longer in progress."""
        with self._lock:
            for rid in [r for r in self._tails if r not in run_ids]:
                self._tails.pop(rid, None)
                self.progress.lines.pop(rid, None)
