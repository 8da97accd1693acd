"""Scan results for the viewer: a run's answers (its run page) and every scanner's hits across runs
(the scans page), each linking to the events it cites (`/run/<run_id>#seq=<n>`).

A result made from an earlier version of its transcript (its `transcript_hash` is not the
transcript's now: the run went on, or was made again) is shown as stale. Transcript hashes are
kept per (path, size, mtime) in `TranscriptHashes`, so a page does not hash a big transcript twice.
Everything here (answers, explanations) was written by a judge or quotes an agent: untrusted text,
escaped by the templates like all agent text.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchctl.layout import RUNS, TRANSCRIPT, slug
from benchctl.scan.result import iter_results, results_of_run, transcript_hash

MAX_HITS_SHOWN = 500  # per scanner on the scans page (the result files have them all)
MAX_CITES = 30  # event links shown per result


class TranscriptHashes:
    """path -> the transcript's hash, recomputed when its size or mtime changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memo: dict[str, tuple[int, int, str | None]] = {}

    def get(self, path: str) -> str | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        with self._lock:
            hit = self._memo.get(path)
        if hit is not None and hit[:2] == (st.st_size, st.st_mtime_ns):
            return hit[2]
        h = transcript_hash(Path(path))
        with self._lock:
            self._memo[path] = (st.st_size, st.st_mtime_ns, h)
        return h


@dataclass
class ScanView:
    scanner: str
    run_id: str
    kind: str
    status: str
    answer: Any
    answer_type: str
    hit: bool | None
    explanation: str
    events: list[int]
    judge: str | None
    error: str | None
    stale: bool

    @property
    def answer_text(self) -> str:
        if self.answer is None:
            return "unscored"
        if isinstance(self.answer, bool):
            return "yes" if self.answer else "no"
        if isinstance(self.answer, list):
            return ", ".join(map(str, self.answer)) or "none"
        if isinstance(self.answer, float) and self.answer.is_integer():
            return str(int(self.answer))
        return str(self.answer)


def _view(rec: dict[str, Any], now: str | None) -> ScanView:
    events = [n for n in rec.get("events") or [] if isinstance(n, int) and not isinstance(n, bool)]
    return ScanView(
        scanner=str(rec["scanner"]),
        run_id=str(rec["run_id"]),
        kind=str(rec.get("kind") or ""),
        status=str(rec.get("status") or ""),
        answer=rec.get("answer"),
        answer_type=str(rec.get("answer_type") or ""),
        hit=rec.get("hit") if isinstance(rec.get("hit"), bool) else None,
        explanation=str(rec.get("explanation") or ""),
        events=events,
        judge=rec.get("judge") if isinstance(rec.get("judge"), str) else None,
        error=str(rec["error"]) if rec.get("error") else None,
        stale=rec.get("transcript_hash") != now,
    )


def run_scans(root: str, run_id: str, hashes: TranscriptHashes) -> list[ScanView]:
    """A run's scan results, hits first."""
    found = results_of_run(Path(root), run_id)
    if not found:
        return []
    now = hashes.get(os.path.join(root, RUNS, run_id, TRANSCRIPT))
    return sorted((_view(r, now) for r in found), key=lambda v: (v.hit is not True, v.scanner))


@dataclass
class ScannerSummary:
    name: str
    kind: str = ""
    answer_type: str = ""
    results: int = 0
    scored: int = 0
    hits: int = 0
    unscored: int = 0
    stale: int = 0
    labels: dict[str, int] = field(default_factory=dict)  # label answers: how often each was given
    shown: list[ScanView] = field(default_factory=list)  # hits (or, for one scanner, every result)
    more: int = 0  # results not shown (past MAX_HITS_SHOWN)


def scans_overview(root: str, hashes: TranscriptHashes, only: str | None = None) -> list[ScannerSummary]:
    """Every scanner's counts and hits across runs; with `only`, that scanner with every result
    (hits first). Results of runs that are gone are left out."""
    runs_dir = os.path.join(root, RUNS)
    out: dict[str, ScannerSummary] = {}
    for rec in iter_results(Path(root)):
        name, run_id = str(rec["scanner"]), str(rec["run_id"])
        if (only is not None and name != only) or slug(run_id) != run_id:
            continue  # another scanner, or a run id no run can have (a hand-edited file)
        path = os.path.join(runs_dir, run_id, TRANSCRIPT)
        if not os.path.exists(path):
            continue
        v = _view(rec, hashes.get(path))
        s = out.setdefault(name, ScannerSummary(name, v.kind, v.answer_type))
        s.results += 1
        s.stale += v.stale
        if v.answer is None:
            s.unscored += 1
            continue
        s.scored += 1
        s.hits += v.hit is True
        if v.answer_type == "label":
            s.labels[str(v.answer)] = s.labels.get(str(v.answer), 0) + 1
        if v.hit or v.answer_type == "label" or only is not None:
            s.shown.append(v)
    for s in out.values():
        s.shown.sort(key=lambda v: (v.hit is not True, v.run_id))
        s.more = max(0, len(s.shown) - MAX_HITS_SHOWN)
        del s.shown[MAX_HITS_SHOWN:]
    return [out[k] for k in sorted(out)]
