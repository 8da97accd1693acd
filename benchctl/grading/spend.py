"""The judge spend of a results directory on disk, so a rerun of `benchctl grade --max-cost`
continues the count.

Grade records and judge logs cannot be the source: a grade is written only once all of its judge
calls are done (an interrupted session loses the cost of the grades in flight), and a partial or
unscored grade is rewritten when it is retried (or every grade with --force), replacing the cost
it recorded. So every judge call also appends one line to its grader's spend log,
`grades/<grader>/judge_log/spend.jsonl`, the moment its answer arrives — the judge's equivalent
of a run's live transcript — and that file is never rewritten:

    {"at": 1767225600.0, "judge": "anthropic/claude-haiku-4-5", "subject": "<run_id>", "ask": "tldr",
     "attempt": 1, "cost_usd": 0.0041}

An answer read from a vendor's batch (`--batch`, grading/batches.py) also carries `"batch_id"` and
`"custom_id"`: a rerun that reads that batch's results again (the session that read them first was
killed before writing its grade) finds the custom id here and does not count the cost again.

`cost_usd` is null when the judge has no price (`--allow-unpriced`); like a run's unknown cost,
it counts 0. A torn last line (a session killed mid-write) is skipped, and the next line written
starts on a line of its own rather than joining it.

The spend before the log. A results directory graded by a version without spend logs has grade
records (each with its `cost_usd`) but no log, and a log started by a version without the rule
below lacks the calls made before it. So before a grading session asks its first judge question,
each grader's spend log gets its seed line, once (`seed_spend_log`, under an flock so two
sessions starting together write one):

    {"at": ..., "judge": "<the records' judges>", "subject": "", "ask": "before the spend log",
     "attempt": 0, "cost_usd": 0.3, "grades": 3, "unpriced": 0, "skipped": []}

carrying the known costs of the grader's records whose subject (the grade file's name: `<run_id>`
or `<run_id>~followup-1`; for the tournament, its canonical lists `canonical/<env>.json`, whose
cost is the environment's dedup and the extractions of that pass) has no line in the log: the
judge calls behind such a record were made before its grader's log recorded them (a call made
since is logged before its grade is written). A record whose subject is in the log is counted by
its lines alone, so nothing is counted twice; every later session finds the seed line and adds
nothing. For a new directory the seed is $0 from 0 grades. The seed is a lower bound, an
estimate: a grade rewritten before the log existed, a session interrupted before it, the
tournament's extractions redone without a new dedup, and unpriced records (`unpriced`, counted 0)
are not in it. A record whose `cost_usd` is not a number, or that cannot be read, is not counted
and named in `skipped` (and in the session's warnings), never counted as 0 in silence.
"""

from __future__ import annotations

import fcntl
import math
import os
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchctl.jsonio import parse_jsonl
from benchctl.layout import GRADES
from benchctl.tournament.schema import CANONICAL_DIR, TOURNAMENT

SPEND_LOG = "spend.jsonl"
JUDGE_LOG_DIR = "judge_log"
SEED_ASK = "before the spend log"
# how the seed line's ask reads in the log (orjson writes no spaces): a cheap test before parsing
_SEED_MARK = orjson.dumps({"ask": SEED_ASK})[1:-1]


def spend_log_path(results: Path, grader: str) -> Path:
    """grades/<grader>/judge_log/spend.jsonl (next to the judge logs; readers of grades only read *.json)."""
    return Path(results) / GRADES / grader / JUDGE_LOG_DIR / SPEND_LOG


def append_spend(
    path: Path,
    *,
    judge: str,
    subject: str,
    ask: str,
    attempt: int,
    cost_usd: float | None,
    batch: tuple[str, str] | None = None,
    usage: Mapping[str, int] | None = None,
) -> None:
    """One judge call's cost (and its token usage, prompt-cache reads and writes included, when
    known), appended as one line in one write (no fsync: a call's cost is worth milliseconds of no
    judge call's time; a crash loses at most what the OS had not written).
    `batch`: (batch id, custom id) of an answer read from a vendor's batch (`--batch`): the custom
    id marks its cost as counted, so a rerun that reads the same batch again does not count it twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {
        "at": round(time.time(), 3),
        "judge": judge,
        "subject": subject,
        "ask": ask,
        "attempt": attempt,
        "cost_usd": cost_usd,
    }
    if usage is not None:
        row["usage"] = dict(usage)
    if batch is not None:
        row["batch_id"], row["custom_id"] = batch
    line = orjson.dumps(row) + b"\n"
    with open(path, "a+b") as f:
        f.write(_after_torn_line(f) + line)  # O_APPEND: one write at the end, whoever else appends


def counted_custom_ids(path: Path) -> set[str]:
    """The custom ids of the batch answers whose cost the spend log holds (append_spend's `batch`)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return set()
    if b'"custom_id"' not in data:
        return set()
    return {r["custom_id"] for r in _lines(data) if isinstance(r.get("custom_id"), str)}


def _after_torn_line(f: Any) -> bytes:
    """b"\\n" when the log (open for reading and appending) ends in a torn line — a session killed
    mid-write — so that what is appended next starts a line of its own instead of joining it and
    being lost with it (the torn line itself stays unreadable and is skipped); else b""."""
    end = f.seek(0, os.SEEK_END)
    if not end:
        return b""
    f.seek(end - 1)
    return b"" if f.read(1) == b"\n" else b"\n"


@dataclass(frozen=True)
class LoggedSpend:
    """USD the spend logs hold: every line's known cost, and the part of it their seed lines
    estimated from grade records written before the logs."""

    usd: float = 0.0
    estimated_usd: float = 0.0

    def __add__(self, other: LoggedSpend) -> LoggedSpend:
        return LoggedSpend(self.usd + other.usd, self.estimated_usd + other.estimated_usd)


def _lines(data: bytes) -> list[dict[str, Any]]:
    """The log's readable lines (a torn or corrupt line is skipped)."""
    return [row for row in parse_jsonl(data) if isinstance(row, dict)]


def _is_seed(line: bytes) -> bool:
    """A seed line (parsed only when its text says so: a log of 100,000 calls is read in milliseconds)."""
    return _SEED_MARK in line and any(r.get("ask") == SEED_ASK for r in _lines(line))


def _known_cost(c: Any) -> float | None:
    """A cost that counts: a finite number >= 0 (not a bool); None otherwise."""
    if isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c >= 0:
        return float(c)
    return None


def logged_spend(path: Path) -> LoggedSpend:
    """USD of one spend log: the known costs (null counts 0; a torn or corrupt line is skipped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LoggedSpend()
    total = estimated = 0.0
    for row in _lines(data):
        c = _known_cost(row.get("cost_usd")) or 0.0
        total += c
        if row.get("ask") == SEED_ASK:
            estimated += c
    return LoggedSpend(total, estimated)


def judge_spent_on_disk(results: Path, graders: Collection[str]) -> LoggedSpend:
    """USD every judge call of these graders has spent on `results` (any judge, any run, any session),
    as their spend logs hold it (seed lines included: call `seed_spend_log` first)."""
    total = sum((logged_spend(spend_log_path(results, g)) for g in sorted(set(graders))), LoggedSpend())
    return LoggedSpend(round(total.usd, 8), round(total.estimated_usd, 8))


@dataclass
class Seed:
    """What `seed_spend_log` wrote: the spend it estimated from the grader's records."""

    grader: str
    cost_usd: float = 0.0  # known costs of the records counted
    grades: int = 0  # records counted (their subject had no line in the log)
    unpriced: int = 0  # of which with a null cost (counted 0)
    judges: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # records not counted (unreadable, or no cost in USD)
    warnings: list[str] = field(default_factory=list)  # why, one per skipped record


def seed_lines(seed: Seed) -> list[str]:
    """What a user is told about a seed line: the estimate (when there were records to estimate
    from) and every record left out."""
    out = []
    if seed.grades:
        unpriced = f"; {seed.unpriced} unpriced, counted $0" if seed.unpriced else ""
        out.append(
            f"{seed.grader}: spend log started with ${seed.cost_usd:.4f} of earlier judge spend, estimated "
            f"from {seed.grades} grade record(s) written before it (a lower bound{unpriced})"
        )
    return out + [f"{seed.grader}: {w}" for w in seed.warnings]


def _record_files(results: Path, grader: str) -> list[Path]:
    """The files that state a grader's judge costs: its grade records, grades/<grader>/*.json; for
    the tournament its canonical lists (its per-run records share those costs out, and ratings.json
    states the runs' own costs, not the judge's)."""
    folder = Path(results) / GRADES / grader
    if grader == TOURNAMENT:
        folder = folder / CANONICAL_DIR
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def estimate_from_records(results: Path, grader: str, logged_subjects: Collection[str]) -> Seed:
    """The known judge cost the grader's records state, over records whose subject is not in
    `logged_subjects` (those are counted by their log lines)."""
    seed = Seed(grader)
    judges: set[str] = set()
    for p in _record_files(results, grader):
        if p.stem in logged_subjects:
            continue
        name = f"{GRADES}/{grader}/{p.relative_to(Path(results) / GRADES / grader)}"
        try:
            rec = orjson.loads(p.read_bytes())
        except (OSError, orjson.JSONDecodeError) as e:
            seed.skipped.append(name)
            seed.warnings.append(f"{name}: unreadable ({e}); its judge spend is not counted")
            continue
        if not isinstance(rec, dict):
            seed.skipped.append(name)
            seed.warnings.append(
                f"{name}: not a grade record (a JSON {type(rec).__name__}); its judge spend is not counted"
            )
            continue
        c = rec.get("cost_usd", "<missing>")
        if c is None:
            seed.unpriced += 1  # an unpriced judge: counts 0, as in the log
        elif (known := _known_cost(c)) is None:
            seed.skipped.append(name)
            seed.warnings.append(f"{name}: cost_usd {c!r} is not a cost in USD; its judge spend is not counted")
            continue
        else:
            seed.cost_usd += known
        seed.grades += 1
        if isinstance(rec.get("judge"), str) and rec["judge"]:
            judges.add(rec["judge"])
    seed.cost_usd, seed.judges = round(seed.cost_usd, 8), sorted(judges)
    return seed


def seed_spend_log(results: Path, grader: str) -> Seed | None:
    """Give the grader's spend log its seed line if it has none (see the module docstring); the
    Seed written, or None when the log had one already. Call before any judge call of a session."""
    path = spend_log_path(results, grader)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        # two sessions starting on one directory: the second waits, then finds the first's seed
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.seek(0)
            data = f.read()
            if any(_is_seed(line) for line in data.splitlines()):
                return None
            seed = estimate_from_records(results, grader, {str(r.get("subject")) for r in _lines(data)})
            line = (
                orjson.dumps(
                    {
                        "at": round(time.time(), 3),
                        "judge": ", ".join(seed.judges),
                        "subject": "",
                        "ask": SEED_ASK,
                        "attempt": 0,
                        "cost_usd": seed.cost_usd,
                        "grades": seed.grades,
                        "unpriced": seed.unpriced,
                        "skipped": seed.skipped,
                    }
                )
                + b"\n"
            )
            f.write(_after_torn_line(f) + line)
            f.flush()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    return seed
