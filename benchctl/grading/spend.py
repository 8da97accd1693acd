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

`cost_usd` is null when the judge has no price (`--allow-unpriced`); like a run's unknown cost,
it counts 0. A torn last line (a session killed mid-write) is skipped.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Collection

import orjson

from benchctl.layout import GRADES

SPEND_LOG = "spend.jsonl"
JUDGE_LOG_DIR = "judge_log"


def spend_log_path(results: Path, grader: str) -> Path:
    """grades/<grader>/judge_log/spend.jsonl (next to the judge logs; readers of grades only read *.json)."""
    return Path(results) / GRADES / grader / JUDGE_LOG_DIR / SPEND_LOG


def append_spend(path: Path, *, judge: str, subject: str, ask: str, attempt: int, cost_usd: float | None) -> None:
    """One judge call's cost, appended as one line in one write (no fsync: a call's cost is
    worth milliseconds of no judge call's time; a crash loses at most what the OS had not written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = orjson.dumps({"at": round(time.time(), 3), "judge": judge, "subject": subject, "ask": ask,
                         "attempt": attempt, "cost_usd": cost_usd}) + b"\n"
    with open(path, "ab") as f:
        f.write(line)


def logged_spend(path: Path) -> float:
    """USD of one spend log: the known costs (null counts 0; a torn or corrupt line is skipped)."""
    total = 0.0
    try:
        with open(path, "rb") as f:
            for line in f:
                try:
                    c = orjson.loads(line).get("cost_usd")
                except (orjson.JSONDecodeError, AttributeError):
                    continue
                if isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0:
                    total += float(c)
    except FileNotFoundError:
        pass
    return total


def judge_spent_on_disk(results: Path, graders: Collection[str]) -> float:
    """USD every judge call of these graders has spent on `results` (any judge, any run, any session)."""
    return round(sum(logged_spend(spend_log_path(results, g)) for g in sorted(set(graders))), 8)
