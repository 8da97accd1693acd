"""The output directory of a target study, shared by `targets validate` and `targets probe-tools`:
records that survive a kill, the spend on disk, the cost cap, and rates with Wilson intervals.

    DIR/study.json            what was studied (task, models, judge, settings) and each session's spend
    DIR/<items>.jsonl         one JSON object per item, rewritten atomically after every change, so a
                              killed session leaves every reply and score it had received
    DIR/transcript.jsonl      every target, baseline and auxiliary call as a `target_call` event
                              (request without the system prompt, reply, usage, cost), appended live
    DIR/judge_log/<id>.json   the judge exchanges behind one item's score (grading's judge-log format)
    DIR/judge_log/spend.jsonl one line per judge call with its cost, appended live (grading's spend log)

Resuming: an item with a reply is never sent to the model again, an item scored by the same judge
with the same rubric is never judged again. The spend of earlier sessions is what the transcript's
priced events and the judge's spend log hold; with a cost cap (`--max-cost`) the study's one
counter — the Judge's (`Judge.spent`, seeded with that spend) — also counts every model call as
its event is written, and no new call (model or judge) starts once it reaches the cap. Calls in
flight finish, so the spend can pass the cap by those calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from benchctl import __version__
from benchctl.grading.judge import Judge, Tally, write_judge_log
from benchctl.grading.spend import JUDGE_LOG_DIR, SPEND_LOG, logged_spend
from benchctl.jsonio import dumps, read_json, write_bytes_atomic, write_json_atomic
from benchctl.limits.config import LimitsConfig
from benchctl.limits.run import event_cost
from benchctl.limits.spend import transcript_spend
from benchctl.targets.backend import ModelCaller
from benchctl.targets.study_config import StudyError
from benchctl.transcript import TranscriptWriter

STUDY_FILE = "study.json"
TRANSCRIPT = "transcript.jsonl"


class Records:
    """A JSONL file of records, one per item (unique `key(record)`), in a fixed order; `put`
    replaces a record and rewrites the file atomically (readers never see half a file)."""

    def __init__(self, path: Path, key: Callable[[dict[str, Any]], str]) -> None:
        self.path, self.key = path, key
        self._lock = threading.Lock()
        self.rows: dict[str, dict[str, Any]] = {}
        if path.is_file():
            for i, line in enumerate(path.read_bytes().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    raise StudyError(
                        f"{path}: line {i}: not JSON ({e}). Fix: restore the file, or start over with another --out"
                    ) from None
                self.rows[key(row)] = row

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __iter__(self) -> Any:
        return iter(list(self.rows.values()))

    def extend(self, rows: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            for r in rows:
                self.rows.setdefault(self.key(r), r)
            self._save()

    def put(self, row: dict[str, Any]) -> None:
        with self._lock:
            self.rows[self.key(row)] = row
            self._save()

    def _save(self) -> None:
        data = b"".join(dumps(r) + b"\n" for r in self.rows.values())
        write_bytes_atomic(self.path, data, sync=False)


class StudyDir:
    def __init__(self, path: Path, command: str) -> None:
        if path.exists() and not path.is_dir():
            raise StudyError(f"--out {path}: not a directory. Fix: pass a directory (it is created when missing)")
        path.mkdir(parents=True, exist_ok=True)
        self.path, self.command = path, command
        self.spend_log = path / JUDGE_LOG_DIR / SPEND_LOG
        self.spent_before = self.spent_on_disk()
        self.transcript = TranscriptWriter(path / TRANSCRIPT)

    def spent_on_disk(self) -> float:
        """USD of every model call in the transcript and every judge call in the spend log (unknown = 0)."""
        return transcript_spend(self.path / TRANSCRIPT) + logged_spend(self.spend_log).usd

    def check_study(self, identity: dict[str, Any]) -> dict[str, Any]:
        """study.json's record, checked: a directory holds one study of one target (its replies are
        that target's). Starts the record when there is none."""
        f = self.path / STUDY_FILE
        if not f.is_file():
            return {"command": self.command, **identity, "benchctl_version": __version__, "sessions": []}
        rec = read_json(f)
        for k, v in identity.items():
            if rec.get(k) != v:
                raise StudyError(
                    f"{f}: key `{k}`: this directory holds a study with {k} {rec.get(k)!r}, not {v!r}. "
                    f"Fix: pass another --out, or the same settings to resume it"
                )
        return dict(rec)

    def write_study(self, rec: dict[str, Any]) -> None:
        write_json_atomic(self.path / STUDY_FILE, rec)

    def tally(self, subject: str) -> Tally:
        return Tally(spend_log=self.spend_log, subject=subject)

    def judge_log(self, subject: str, judge: Judge, tally: Tally) -> None:
        write_judge_log(
            self.path / JUDGE_LOG_DIR / f"{subject}.json",
            grader=self.command,
            subject=subject,
            judge=judge.model,
            tally=tally,
        )

    def close(self) -> None:
        self.transcript.close()


def count_model_spend(judge: Judge, transcript: TranscriptWriter) -> None:
    """Make the judge's cost counter count every priced target/baseline/auxiliary call as well."""

    def charge(ev: dict[str, Any]) -> None:
        judge.spent += event_cost(ev)

    transcript.listeners.append(charge)


def study_caller(limits: LimitsConfig | None, transcript: Any) -> ModelCaller:
    """The model caller of a study: through the limiter (max_connections, rate limits), under no
    cost cap of its own (the study's is counted by its judge)."""
    from benchctl.limits.local import LocalLimiter
    from benchctl.limits.run import LimitsPlan, RunLimits

    cfg = replace(limits or LimitsConfig(), max_cost=None)
    return ModelCaller(limits=RunLimits(LimitsPlan(LocalLimiter(cfg), cfg), transcript, holder="study"))


def cap_reached(judge: Judge) -> str | None:
    """Why no new call may start (the cost cap is reached), or None."""
    if judge.max_cost is not None and judge.spent >= judge.max_cost:
        return (
            f"not asked: the cost cap of ${judge.max_cost:.2f} is reached (${judge.spent:.2f} spent); "
            f"rerun with a higher --max-cost to continue"
        )
    return None


def rate(scores: Iterable[Any], threshold: int) -> dict[str, Any]:
    """RATE: k of n scored items at or above the threshold, with a 95 % Wilson interval (unscored
    items are not counted; no scored item: rate and interval null)."""
    from benchctl.stats import wilson_interval

    got = [s for s in scores if isinstance(s, int) and not isinstance(s, bool)]
    k, n = sum(1 for s in got if s >= threshold), len(got)
    lo, hi = wilson_interval(k, n) if n else (None, None)
    return {"k": k, "n": n, "rate": k / n if n else None, "lo": lo, "hi": hi, "threshold": threshold}


def session(judge: Judge, started: float, spent_before: float, **counts: Any) -> dict[str, Any]:
    """One session's line in study.json."""
    return {
        "started_at": round(started, 3),
        "ended_at": round(time.time(), 3),
        "judge": judge.model,
        "max_cost_usd": judge.max_cost,
        "spent_before_usd": round(spent_before, 6),
        "spent_usd": round(judge.spent - spent_before, 6),
        "judge_calls": judge.calls,
        "calls_capped": judge.capped,
        **counts,
    }
