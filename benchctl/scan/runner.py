"""Scanning every run of a results directory, resumably.

A run is scanned once it has a `meta.json` whose status is not `running` (finished or failed:
an errored run's tool failures are worth finding) and a transcript. Each transcript is read once per session: its
hash decides what is left to do, and its parts feed every scanner. A result already on disk is
kept when it was made by the same scanner definition (`scanner_hash`) from the same transcript
bytes (`transcript_hash`), by the same judge for an llm scanner, and it is scored; anything else
is scanned again (`force`: everything).

Grep scanners run first, over all runs, in one thread: their results are written in batches,
each file atomically but none synced to disk (`jsonio.write_bytes_batch`, sync=False): a result
lost in a crash is scanned again in seconds, while 10,000 fsyncs, or one syncfs of a disk others
are writing to, would take longer than the scan. Then llm scanners: up to `concurrency` runs at a time are read and asked about, every
judge call through the session's one `Judge` (its concurrency limit, its cost cap), each result
written atomically with its judge log as soon as it is done, so an interrupted session loses at
most the scans in flight. A run's llm scanners are asked together, so scanners shown the same
transcript segment share its cached prompt prefix (`llm.shared_segments`). A cost cap counts the
spend logs of the scanners being run (every earlier session's calls too), as `benchctl grade
--max-cost` does.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchctl.grading.batches import BatchCollector, BatchProgress, BatchStats
from benchctl.grading.judge import Judge, Tally, write_judge_log
from benchctl.grading.spend import logged_spend
from benchctl.jsonio import dumps, write_bytes_batch, write_json_atomic
from benchctl.layout import TRANSCRIPT, iter_runs, runs_dir, scan_path
from benchctl.scan.grep import scan_grep
from benchctl.scan.llm import TEMPLATES, scan_llm, segments_for, shared_segments
from benchctl.scan.parts import Record, file_hash, parse_record
from benchctl.scan.result import judge_log_path, make_result, read_result, spend_log_path
from benchctl.scan.segments import Segment
from benchctl.scan.spec import Scanner

BATCH = 2000  # grep results written per filesystem sync
# --batch: runs read and asked about at once (at least). A vendor's batch can take hours, so the
# questions of many runs must go into one batch, not --concurrency runs' worth per round
BATCH_RUNS = 1000


class ScanConfigError(ValueError):
    """Options that cannot work together (an llm scanner without a judge); nothing was scanned."""


@dataclass
class ScanOptions:
    judge: str | None = None  # model id; needed by llm scanners
    concurrency: int = 16
    run_glob: str | None = None  # fnmatch over run ids
    force: bool = False
    max_cost: float | None = None  # USD the scanners' judge spend may reach (their spend logs count)
    segment_chars: int | None = None  # overrides every llm scanner's segment_chars
    batch: bool = False  # --batch: judge calls go through the vendors' batch APIs (grading/batches.py)


@dataclass
class Outcome:
    scanner: str
    run_id: str
    status: str  # scored | unscored
    hit: bool | None
    reused: bool
    cost_usd: float | None = 0.0
    error: str | None = None
    answer: Any = None
    kind: str = "grep"


@dataclass
class Session:
    outcomes: list[Outcome] = field(default_factory=list)
    skipped_runs: list[tuple[str, str]] = field(default_factory=list)  # (run_id, why not scanned)
    judge_calls: int = 0
    judge_spent_usd: float = 0.0  # this session's priced judge spend
    judge_spent_before_usd: float = 0.0  # with a cost cap: what the scanners' spend logs held before
    judge_max_cost: float | None = None
    judge_calls_capped: int = 0
    batch: BatchStats | None = None  # --batch: what the session's batches did


def scanner_hash(scanner: Scanner) -> str:
    return scanner.hash(TEMPLATES if scanner.kind == "llm" else "")


def select_runs(results: Path, run_glob: str | None, session: Session) -> list[tuple[Path, str]]:
    """(run directory, run id) of every run to scan; the others go to session.skipped_runs."""
    base = runs_dir(results)
    if not base.is_dir():
        raise FileNotFoundError(f"{results} has no runs/ directory; pass the results directory of a sweep")
    with_meta = {p.name: meta for p, meta in iter_runs(results)}
    out = []
    for name in sorted(d.name for d in os.scandir(base) if d.is_dir()):
        if run_glob and not fnmatch.fnmatchcase(name, run_glob):
            continue
        meta = with_meta.get(name)
        if meta is None:
            session.skipped_runs.append((name, "no meta.json (still running, or killed before it finished)"))
        elif meta.get("status") == "running":
            session.skipped_runs.append((name, "still running"))
        elif not (base / name / TRANSCRIPT).is_file():
            session.skipped_runs.append((name, f"no {TRANSCRIPT}: nothing to scan"))
        else:
            out.append((base / name, str(meta.get("run_id") or name)))
    return out


def _reusable(
    path: Path, scanner: str, run_id: str, want_scanner: str, want_transcript: str, judge: str | None
) -> dict[str, Any] | None:
    """The result at `path` when it is this scanner's scored answer about this transcript (by this judge)."""
    rec = read_result(path)
    if (
        rec is not None
        and rec.get("scanner") == scanner
        and rec.get("run_id") == run_id
        and rec.get("scanner_hash") == want_scanner
        and rec.get("transcript_hash") == want_transcript
        and rec.get("judge") == judge
        and rec.get("status") == "scored"
    ):
        return rec
    return None


def _outcome(rec: dict[str, Any], reused: bool) -> Outcome:
    return Outcome(
        rec["scanner"],
        rec["run_id"],
        rec["status"],
        rec.get("hit"),
        reused,
        rec.get("cost_usd"),
        rec.get("error"),
        rec.get("answer"),
        str(rec.get("kind")),
    )


async def scan_results(
    results: Path,
    scanners: list[Scanner],
    opts: ScanOptions,
    on_done: Callable[[Outcome], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_batch: Callable[[BatchProgress], None] | None = None,
) -> Session:
    """Run every scanner over every selected run. on_plan(n) is told how many results will follow;
    on_done is called once per result (written or reused); on_batch at each poll of a batch (--batch)."""
    results = Path(results)
    if opts.segment_chars is not None:
        scanners = [replace(s, segment_chars=opts.segment_chars) if s.kind == "llm" else s for s in scanners]
    llm = [s for s in scanners if s.kind == "llm"]
    if llm and not opts.judge:
        names = ", ".join(s.name for s in llm)
        raise ScanConfigError(f"{names}: an llm scanner asks a judge model; pass --judge MODEL")
    session = Session(judge_max_cost=opts.max_cost)
    runs = select_runs(results, opts.run_glob, session)
    if on_plan:
        on_plan(len(runs) * len(scanners))

    def done(out: Outcome) -> None:
        session.outcomes.append(out)
        if on_done:
            on_done(out)

    hashes = {s.name: scanner_hash(s) for s in scanners}
    grep = [s for s in scanners if s.kind == "grep"]
    todo = await asyncio.to_thread(_grep_pass, results, runs, grep, llm, hashes, opts, done)
    if not llm:
        return session
    spent = 0.0
    if opts.max_cost is not None:  # the count continues from what earlier sessions spent
        spent = round(sum(logged_spend(spend_log_path(results, s.name)).usd for s in llm), 8)
    collector = BatchCollector(on_progress=on_batch) if opts.batch else None
    judge = Judge(str(opts.judge), concurrency=opts.concurrency, max_cost=opts.max_cost, spent=spent, batch=collector)
    # transcripts held in memory at once
    slots = asyncio.Semaphore(max(opts.concurrency, BATCH_RUNS) if opts.batch else opts.concurrency)

    async def one_run(run_path: Path, run_id: str, wanted: list[Scanner]) -> None:
        async with slots:
            parts = tuple(dict.fromkeys(p for s in wanted for p in s.parts))
            record, segmented = await asyncio.to_thread(_read_segments, run_path, parts, wanted)
            # a run's scanners are asked together, so the ones shown the same segment read it from the
            # vendor's prompt cache (it lives ~5 minutes) after the first has written it (llm.py)
            shared = shared_segments(segmented.values())
            await asyncio.gather(
                *(
                    _llm_one(results, s, hashes[s.name], run_id, record, segmented[s.name], judge, done, shared)
                    for s in wanted
                )
            )

    try:
        await asyncio.gather(*(one_run(p, rid, wanted) for p, rid, wanted in todo))
    finally:
        if collector is not None:  # the vendor's batches keep running when interrupted: a rerun resumes them
            await collector.aclose()
            session.batch = collector.stats
    session.judge_calls, session.judge_calls_capped = judge.calls, judge.capped
    session.judge_spent_usd, session.judge_spent_before_usd = round(judge.spent - spent, 6), spent
    return session


def _read_segments(
    run_path: Path, parts: tuple[str, ...], scanners: list[Scanner]
) -> tuple[Record, dict[str, list[Segment]]]:
    """A run's transcript and, per scanner, the segments its judge is asked about (split once, off
    the event loop)."""
    record = parse_record((run_path / TRANSCRIPT).read_bytes(), parts)
    return record, {s.name: segments_for(s, record.of(s.parts)) for s in scanners}


def _grep_pass(
    results: Path,
    runs: list[tuple[Path, str]],
    grep: list[Scanner],
    llm: list[Scanner],
    hashes: dict[str, str],
    opts: ScanOptions,
    done: Callable[[Outcome], None],
) -> list[tuple[Path, str, list[Scanner]]]:
    """Run the grep scanners; return the (run, llm scanners) pairs that still need the judge."""
    todo: list[tuple[Path, str, list[Scanner]]] = []
    parts = tuple(dict.fromkeys(p for s in grep for p in s.parts))  # what the grep scanners read
    batch: dict[str, bytes] = {}
    written: list[dict[str, Any]] = []
    for run_path, run_id in runs:
        data = (run_path / TRANSCRIPT).read_bytes()
        t_hash = file_hash(data)
        record: Record | None = None
        for s in grep:
            path = scan_path(results, s.name, run_id)
            old = None if opts.force else _reusable(path, s.name, run_id, hashes[s.name], t_hash, None)
            if old is not None:
                done(_outcome(old, True))
                continue
            record = record or parse_record(data, parts)
            got = scan_grep(s, record.of(s.parts))
            rec = make_result(
                s,
                hashes[s.name],
                run_id,
                t_hash,
                answer=got.value,
                explanation=got.explanation,
                events=got.events,
                cost_usd=0.0,  # no model: nothing spent (not an unknown cost)
                n_matches=got.n_matches,
            )
            batch[str(path)] = dumps(rec, pretty=True) + b"\n"
            written.append(rec)
        wanted = []
        for s in llm:
            path = scan_path(results, s.name, run_id)
            old = None if opts.force else _reusable(path, s.name, run_id, hashes[s.name], t_hash, opts.judge)
            if old is not None:
                done(_outcome(old, True))
            else:
                wanted.append(s)
        if wanted:
            todo.append((run_path, run_id, wanted))
        if len(batch) >= BATCH:
            _flush(batch, written, done)
    _flush(batch, written, done)
    return todo


def _flush(batch: dict[str, bytes], written: list[dict[str, Any]], done: Callable[[Outcome], None]) -> None:
    write_bytes_batch(batch, sync=False)  # a grep result is cheap to make again: a crash may lose it, not tear it
    for rec in written:
        done(_outcome(rec, False))
    batch.clear()
    written.clear()


async def _llm_one(
    results: Path,
    scanner: Scanner,
    s_hash: str,
    run_id: str,
    record: Record,
    segments: list[Segment],
    judge: Judge,
    done: Callable[[Outcome], None],
    shared: set[str],
) -> None:
    tally = Tally(spend_log=spend_log_path(results, scanner.name), subject=run_id)
    got = await scan_llm(scanner, segments, judge, tally, shared)
    extra: dict[str, Any] = {
        "judge_calls": tally.calls,
        "usage": dict(tally.usage),
        "segments": [g.to_json() for g in got.segments],
    }
    if got.prefiltered:
        extra["prefiltered"] = True
    rec = make_result(
        scanner,
        s_hash,
        run_id,
        record.transcript_hash,
        answer=got.value,
        explanation=got.explanation,
        events=got.events,
        cost_usd=tally.cost_usd,
        judge=judge.model,
        error=got.error,
        **extra,
    )
    await asyncio.to_thread(_write_llm, results, rec, tally)
    done(_outcome(rec, False))


def _write_llm(results: Path, rec: dict[str, Any], tally: Tally) -> None:
    """The judge log first, then the result: a result on disk has its exchanges beside it."""
    write_judge_log(
        judge_log_path(results, rec["scanner"], rec["run_id"]),
        grader=rec["scanner"],
        subject=rec["run_id"],
        judge=str(rec["judge"]),
        tally=tally,
    )
    write_json_atomic(scan_path(results, rec["scanner"], rec["run_id"]), rec)
