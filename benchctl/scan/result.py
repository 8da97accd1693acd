"""Scan results on disk: `scans/<scanner>/<run_id>.json`, one per (scanner, run).

    {"schema": 1, "scanner": "network_attempts", "run_id": "...", "kind": "grep",
     "status": "scored",                 # or "unscored": answer null, `error` says why
     "answer": true, "answer_type": "boolean", "hit": true,
     "explanation": "...", "events": [12, 40],   # cited (llm) or matching (grep) events, by seq
     "cost_usd": 0.0,                    # null when a judge call's price is unknown
     "transcript_hash": "sha256:...", "scanner_hash": "sha256:...", "judge": null, ...}

The format is documented in docs/formats/scans.md. Next to the results, an llm scanner's judge
exchanges (`judge_log/<run_id>.json`) and its spend log (`judge_log/spend.jsonl`), in the formats
grading uses (benchctl.grading.judge, benchctl.grading.spend).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from benchctl.grading.spend import JUDGE_LOG_DIR, SPEND_LOG
from benchctl.layout import SCANS
from benchctl.scan.answers import hit_of
from benchctl.scan.spec import Scanner

SCAN_SCHEMA = 1


def scans_dir(results: Path) -> Path:
    return Path(results) / SCANS


def judge_log_path(results: Path, scanner: str, run_id: str) -> Path:
    return scans_dir(results) / scanner / JUDGE_LOG_DIR / f"{run_id}.json"


def spend_log_path(results: Path, scanner: str) -> Path:
    return scans_dir(results) / scanner / JUDGE_LOG_DIR / SPEND_LOG


def make_result(
    scanner: Scanner,
    scanner_hash: str,
    run_id: str,
    transcript_hash: str,
    *,
    answer: Any,
    explanation: str,
    events: list[int],
    cost_usd: float | None,
    judge: str | None = None,
    error: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "schema": SCAN_SCHEMA,
        "scanner": scanner.name,
        "run_id": run_id,
        "kind": scanner.kind,
        "status": "unscored" if answer is None else "scored",
        "answer": answer,
        "answer_type": scanner.answer,
        "hit": hit_of(scanner.answer, answer),
        "explanation": explanation,
        "events": events,
        "cost_usd": cost_usd,
        "transcript_hash": transcript_hash,
        "scanner_hash": scanner_hash,
        "judge": judge,
        "created_at": round(time.time(), 3),
    }
    if scanner.labels:
        rec["labels"] = list(scanner.labels)
    if error:
        rec["error"] = error
    rec.update(extra)
    return rec


def read_result(path: Path) -> dict[str, Any] | None:
    """A result file, or None when it is missing or unreadable (then it is scanned again)."""
    try:
        rec = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


def iter_results(results: Path, problems: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Every result of every scanner in `results`, by scanner then run id. Unreadable files are
    named in `problems` (when given) and skipped."""
    base = scans_dir(results)
    if not base.is_dir():
        return
    for scanner in sorted(os.scandir(base), key=lambda d: d.name):
        if not scanner.is_dir():
            continue
        for f in sorted(os.scandir(scanner.path), key=lambda d: d.name):
            if not f.name.endswith(".json") or not f.is_file():
                continue
            rec = read_result(Path(f.path))
            if rec is None or not isinstance(rec.get("run_id"), str) or not isinstance(rec.get("scanner"), str):
                if problems is not None:
                    problems.append(f"{SCANS}/{scanner.name}/{f.name}: unreadable scan result, left out")
                continue
            yield rec


def results_of_run(results: Path, run_id: str) -> list[dict[str, Any]]:
    """The scan results about one run, by scanner name (unreadable ones left out)."""
    base = scans_dir(results)
    if not base.is_dir():
        return []
    out = []
    for scanner in sorted(d.name for d in os.scandir(base) if d.is_dir()):
        rec = read_result(base / scanner / f"{run_id}.json")
        if rec is not None and rec.get("run_id") == run_id and isinstance(rec.get("scanner"), str):
            out.append(rec)
    return out


def transcript_hash(path: Path) -> str | None:
    """The hash a scan records of a transcript (its bytes' sha256), read in pieces: what a result's
    `transcript_hash` is compared with to tell whether it describes the transcript as it is now."""
    try:
        with open(path, "rb") as f:
            return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def results_by_run(results: Path, problems: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """run_id -> its scan results (by scanner name)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in iter_results(results, problems):
        out.setdefault(rec["run_id"], []).append(rec)
    return out
