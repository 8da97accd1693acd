"""The priced spend already on disk in a results directory, so a resumed sweep continues its count.

Every run directory and every earlier attempt (`attempts/<n>/`) counts: a finished run by its
meta.json (`cost_usd`, plus its target, baseline and auxiliary models' cost for audits), anything else —
an unfinished run, a meta whose cost is unknown (`null`) — by adding up its transcript's priced
events, the same rule a live run uses (`run.event_cost`). An unknown cost counts 0.
A standalone gateway's cap counts its --transcript with `transcript_spend`; the judges' spend of
`benchctl grade --max-cost` is in benchctl/grading/spend.py (same rule).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeGuard

import orjson

from benchctl.layout import META, RUNS, TRANSCRIPT
from benchctl.limits.run import event_cost

ATTEMPTS = "attempts"


def _known(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def meta_spend(meta: dict[str, Any]) -> float | None:
    """What a meta.json says the run spent, or None when it does not know all of it."""
    cost = meta.get("cost_usd")
    if not _known(cost):
        return None
    total = float(cost)
    targets = meta.get("target_tools")
    if isinstance(targets, dict):
        for role in ("target", "auxiliary", "baseline"):
            c = (targets.get(role) or {}).get("cost_usd", 0.0)
            if not _known(c):
                return None
            total += float(c)
    return total


def transcript_spend(path: Path) -> float:
    """The priced events of one transcript (a torn last line is skipped)."""
    total = 0.0
    try:
        with open(path, "rb") as f:
            for line in f:
                if b'"cost_usd"' not in line:
                    continue
                try:
                    total += event_cost(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue
    except FileNotFoundError:
        pass
    return total


def attempt_spend(path: Path) -> float:
    meta = None
    try:
        meta = orjson.loads((path / META).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        pass
    known = meta_spend(meta) if isinstance(meta, dict) else None
    return known if known is not None else transcript_spend(path / TRANSCRIPT)


def spent_on_disk(results: Path) -> float:
    """USD spent by every run and earlier attempt under `results`."""
    total = 0.0
    runs = Path(results) / RUNS
    if not runs.is_dir():
        return 0.0
    for run in runs.iterdir():
        if not run.is_dir():
            continue
        total += attempt_spend(run)
        attempts = run / ATTEMPTS
        if attempts.is_dir():
            total += sum(attempt_spend(a) for a in attempts.iterdir() if a.is_dir())
    return round(total, 8)
