"""`batches.json`: the batches a judge submitted through a vendor's batch API (`--batch`), on disk
before any wait, so an interrupted or killed session resumes them instead of paying twice.

One file per place a judge's spend is logged, beside its `judge_log/` folder:
`grades/<grader>/batches.json` (grade), `scans/<scanner>/batches.json` (scan) and
`<--out DIR>/batches.json` (targets validate). Format (docs/formats/grades.md, "Batches"):

    {"schema": 1,
     "batches": [
       {"id": "msgbatch_01...", "model": "anthropic/claude-haiku-4-5", "submitted_at": 1767225600.0,
        "state": "in_progress",            # in_progress | ended | expired | cancelled | failed
        "ended_at": null,
        "requests": {"j3f2...": {"subject": "<run_id>", "ask": "coverage 1/2",
                                 "outcome": "pending",   # pending | succeeded | failed | unprocessed
                                 "error": null}}}]}

A request is found again by its `custom_id` (a hash of model, sample and request body): a batch
whose entry for it is `pending` is waited for again, `succeeded` has its result fetched again (free),
`failed` (the vendor's error for that request) and `unprocessed` (the batch expired or was cancelled
first) are submitted anew. Writes are atomic, and a read-modify-write holds an flock on
`batches.json.lock`, so two sessions on one directory do not lose each other's batches.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from benchctl.jsonio import read_json, write_json_atomic

BATCHES_FILE = "batches.json"
BATCHES_SCHEMA = 1
Outcome = Literal["pending", "succeeded", "failed", "unprocessed"]
RESUMABLE: tuple[Outcome, ...] = ("pending", "succeeded")


class BatchRecordError(ValueError):
    """batches.json cannot be read: the message names the file, the key and the fix."""


def batches_path(spend_log: Path) -> Path:
    """Where the batches of the judge calls logged in `spend_log` (`.../judge_log/spend.jsonl`) are
    recorded: beside its judge_log folder (grades/<grader>/, scans/<scanner>/, a study's --out DIR)."""
    return spend_log.parent.parent / BATCHES_FILE


def read_batches(path: Path) -> list[dict[str, Any]]:
    """The batches recorded in `path` ([] when there is no file)."""
    if not path.is_file():
        return []
    fix = "Fix: repair it; or move it away, and the requests it records are submitted (and paid for) again"
    try:
        data = read_json(path)
    except Exception as e:
        raise BatchRecordError(f"{path}: not valid JSON ({e}). {fix}") from None
    if not isinstance(data, dict) or not isinstance(data.get("batches"), list):
        raise BatchRecordError(f"{path}: key `batches`: missing or not a list. {fix}")
    for i, b in enumerate(data["batches"]):
        if not (isinstance(b, dict) and isinstance(b.get("id"), str) and isinstance(b.get("requests"), dict)):
            raise BatchRecordError(f"{path}: key `batches[{i}]`: needs a string `id` and a `requests` table. {fix}")
    return list(data["batches"])


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def update_batches(path: Path, change: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
    """Read, `change` in place, write atomically (under the lock); the batches as written."""
    with _locked(path):
        batches = read_batches(path)
        change(batches)
        write_json_atomic(path, {"schema": BATCHES_SCHEMA, "batches": batches})
    return batches


def new_batch(batch_id: str, model: str, requests: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The entry of a batch just submitted; `requests`: custom_id -> (subject, ask)."""
    return {
        "id": batch_id,
        "model": model,
        "submitted_at": round(time.time(), 3),
        "state": "in_progress",
        "ended_at": None,
        "requests": {
            cid: {"subject": subject, "ask": ask, "outcome": "pending", "error": None}
            for cid, (subject, ask) in requests.items()
        },
    }


def find_resumable(batches: list[dict[str, Any]], custom_id: str) -> dict[str, Any] | None:
    """The latest batch holding `custom_id` pending or succeeded (None: submit it anew)."""
    for b in reversed(batches):
        req = b["requests"].get(custom_id)
        if isinstance(req, dict) and req.get("outcome") in RESUMABLE:
            return b
    return None
