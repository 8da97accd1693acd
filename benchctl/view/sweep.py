"""The sweep as the viewer lists it: one row per run, finished or in progress, from the report
loader (`benchctl.report.load`) plus the run directories that have no meta.json yet.

The loader's parse cache normally lives in `RESULTS/.benchctl-report-cache`, but the viewer
never writes into a results dir: it reads that file if `benchctl report` left one, and keeps
its own copy in memory (`load_results(memo=...)`), so after the first load a refresh only
stats the files and re-reads the changed ones.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl.layout import RUNS, read_meta
from benchctl.report.aggregate import Options, config_of, field_of
from benchctl.report.headline import Headlines, pick_headlines
from benchctl.report.load import UNFINISHED, Results, Run, gc_paused, load_results
from benchctl.run.progress import _tokens
from benchctl.tournament.participants import auditor_label, run_info
from benchctl.view.live import LiveRuns, sweep_active

PAGE_SIZE = 200  # rows per page: a 10,000-run sweep is sorted and filtered on the server
IN_PROGRESS = ("running", "unfinished")


@dataclass(slots=True)
class RunRow:
    run_id: str
    status: str
    task: str
    harness: str
    model: str
    budget: str
    budget_s: float | None
    variant: str
    tools: str
    seed: int | None
    score: float | None
    grader: str | None  # whose score it is: the run's task's headline grader (report.headline)
    elapsed_s: float | None
    turns: int | None
    tokens: int | None
    cost_usd: float | None
    fell_back_to: str | None
    error: str | None
    doing: str | None = None  # live: what a running run is doing now
    run: Run | None = None  # the loader's run (finished runs), for the `found` and `auditor` filters

    def sort_value(self, key: str) -> Any:
        return getattr(self, key, None)


SORT_KEYS = (
    "run_id",
    "status",
    "task",
    "harness",
    "model",
    "budget_s",
    "variant",
    "tools",
    "seed",
    "score",
    "elapsed_s",
    "turns",
    "tokens",
    "cost_usd",
)
FILTER_KEYS = ("status", "task", "harness", "model", "budget", "variant", "tools")
# Filters without a menu of their own, reached by links (a report row's runs): a seed; `found`:
# the runs whose coverage grade counts a finding as found (strict score > 0); `auditor`: the runs
# of a tournament auditor (its label under the ratings' auditor key).
LINK_KEYS = ("seed", "found", "auditor")
PARAM_KEYS = (*FILTER_KEYS, *LINK_KEYS, "q", "sort", "desc")


def found(run: Run | None, finding: str) -> bool:
    """Whether the run's coverage grade counts `finding` as found, as the report's per-finding
    table counts a hit (strict > 0; strict from the score when the item has none)."""
    grade = run.grade("coverage") if run is not None else None
    for fid, score, strict, _ in grade.items if grade is not None else ():
        if fid == finding:
            if strict is None and score is not None:
                strict = max(2 * score - 1, 0)
            if strict is not None and strict > 0:
                return True
    return False


def _finished_row(run: Any, headline: str | None) -> RunRow:
    """A finished run's row; its settings read as `benchctl report` reads them (`config_of`), its score
    is its task's headline grader's (`headline`)."""
    meta = run.meta
    cfg = config_of(run, Options(), True)
    fb = meta.get("fallbacks") or []
    seed = field_of(run, "seed")
    return RunRow(
        run_id=run.run_id,
        status=str(meta.get("status") or "?"),
        task=cfg.task,
        harness=cfg.harness,
        model=cfg.model,
        budget=cfg.budget,
        budget_s=None if cfg.budget_s == float("inf") else cfg.budget_s,
        variant=cfg.variant,
        tools=cfg.tools,
        seed=seed if isinstance(seed, int) else None,
        score=run.score(headline) if headline else None,
        grader=headline,
        elapsed_s=meta.get("elapsed_s"),
        turns=meta.get("turns"),
        tokens=_tokens(meta.get("usage")) if isinstance(meta.get("usage"), dict) else None,
        cost_usd=meta.get("cost_usd"),
        fell_back_to=str(fb[-1].get("to")) if fb and isinstance(fb[-1], dict) else None,
        error=meta.get("error"),
        run=run,
    )


@dataclass(slots=True)
class Snapshot:
    results: Results
    rows: list[RunRow]  # the finished runs' rows (the loader's unfinished ones are pending rows)
    headlines: Headlines
    loaded: float  # time.monotonic() when it was loaded
    took: float  # seconds the load took


class Sweep:
    """The results dir's runs. The first load happens at once; after that a request is answered
    from the last snapshot and, when that is older than `max_age` seconds (or ten times what the
    last load took, so a big sweep is not reloaded back to back), a reload starts in the
    background (re-stats every file, re-reads the changed ones): no request waits for a reload
    of a 10,000-run sweep. Runs in progress are looked at on every request."""

    def __init__(self, root: str, max_age: float = 2.0) -> None:
        self.root = root
        self.max_age = max_age
        self.live = LiveRuns(root)
        self._memo: dict[str, tuple[Any, Any]] = {}  # used by one load at a time (see snapshot())
        self._lock = threading.Lock()
        self._snap: Snapshot | None = None
        self._refreshing = False
        self.refresh_error: str | None = None

    def _load(self) -> Snapshot:
        t = time.monotonic()
        with gc_paused():  # 10,000 rows of small objects, no cycles (see load.py)
            res = load_results(self.root, memo=self._memo)
            headlines = pick_headlines(res)
            rows = [_finished_row(r, headlines.of(r)) for r in res.runs if r.meta.get("status") != UNFINISHED]
        return Snapshot(res, rows, headlines, time.monotonic(), time.monotonic() - t)

    def snapshot(self) -> Snapshot:
        with self._lock:
            if self._snap is None:
                self._snap = self._load()
            elif not self._refreshing and time.monotonic() - self._snap.loaded > max(
                self.max_age, 10 * self._snap.took
            ):
                self._refreshing = True
                threading.Thread(target=self._refresh, name="benchctl-view-reload", daemon=True).start()
            return self._snap

    def _refresh(self) -> None:
        snap = None
        try:
            snap = self._load()
            self.refresh_error = None
        except Exception as e:  # e.g. the results dir went away: keep showing the last snapshot
            self.refresh_error = f"{type(e).__name__}: {e}"
        with self._lock:
            if snap is not None:
                self._snap = snap
            self._refreshing = False

    @property
    def reloading(self) -> bool:
        return self._refreshing

    def results(self) -> Results:
        return self.snapshot().results

    @property
    def headlines(self) -> Headlines:
        return self.snapshot().headlines

    def rows(self) -> list[RunRow]:
        """Every run: finished ones from the loader, then the ones still without meta.json."""
        snap = self.snapshot()
        res = snap.results
        rows = list(snap.rows)
        pending: list[str] = []
        with os.scandir(os.path.join(self.root, RUNS)) as it:
            names = [e.name for e in it if e.is_dir()]
        # the loader lists a run without meta.json as `unfinished`; here it is `running` while a
        # `benchctl run` holds the lock, with live figures from its transcript
        finished = [r for r in res.runs if r.meta.get("status") != UNFINISHED]
        if len(names) > len(finished) or res.stats.get("run_dirs", 0) > res.stats.get("runs", 0):
            done = {r.run_id for r in finished}
            pending = sorted(n for n in names if n not in done)
            status = "running" if sweep_active(self.root) else "unfinished"
            rows += [self.pending_row(rid, status) for rid in pending]
        self.live.keep_only(set(pending))
        return rows

    def pending_row(self, run_id: str, status: str) -> RunRow:
        """A run without meta.json: settings from its run_start event, figures from its transcript."""
        live = self.live.stats(run_id)
        try:
            finished = read_meta(Path(self.root, RUNS, run_id))  # finished since the last reload?
        except (OSError, ValueError):
            finished = None
        if isinstance(finished, dict) and finished.get("status"):
            status = str(finished["status"])
        run = Run(run_id, {"spec": live.get("spec") or {}})
        cfg = config_of(run, Options(), True)
        seed = field_of(run, "seed")
        elapsed = live.get("elapsed_s") if status == "running" else live.get("last_s")
        return RunRow(
            run_id=run_id,
            status=status,
            task=cfg.task if live.get("started") else "",
            harness=cfg.harness,
            model=cfg.model,
            budget=cfg.budget,
            budget_s=live.get("budget_s"),
            variant=cfg.variant,
            tools=cfg.tools,
            seed=seed if isinstance(seed, int) else None,
            score=None,
            grader=None,
            elapsed_s=elapsed,
            turns=live.get("turns"),
            tokens=live.get("tokens"),
            cost_usd=live.get("cost_usd"),
            fell_back_to=None,
            error=None,
            doing=live.get("doing") if status == "running" else None,
        )


def select(rows: list[RunRow], params: dict[str, str], auditor_key: str | None = None) -> list[RunRow]:
    """Filter by exact column values, LINK_KEYS (`auditor` under `auditor_key`, the tournament's)
    and a run-id or model substring (`q`), then sort (`sort`, `desc`)."""
    out = rows
    for key in FILTER_KEYS:
        want = params.get(key)
        if want:
            out = [r for r in out if str(getattr(r, key)) == want]
    if params.get("seed"):
        out = [r for r in out if str(r.seed) == params["seed"]]
    if params.get("found"):
        out = [r for r in out if found(r.run, params["found"])]
    if params.get("auditor"):
        key = auditor_key or "model"
        out = [r for r in out if r.run is not None and auditor_label(run_info(r.run.meta), key) == params["auditor"]]
    q = (params.get("q") or "").strip().lower()
    if q:
        out = [r for r in out if q in r.run_id.lower() or q in r.model.lower()]
    sort = params.get("sort")
    key = sort if sort is not None and sort in SORT_KEYS else "run_id"
    desc = params.get("desc") == "1"
    present = [r for r in out if r.sort_value(key) is not None]
    missing = [r for r in out if r.sort_value(key) is None]  # "no value" sorts last either way
    present.sort(key=lambda r: (r.sort_value(key), r.run_id), reverse=desc)
    return present + missing


def counts(rows: list[RunRow], key: str) -> list[tuple[str, int]]:
    c: dict[str, int] = {}
    for r in rows:
        v = str(getattr(r, key))
        c[v] = c.get(v, 0) + 1
    return sorted(c.items())
