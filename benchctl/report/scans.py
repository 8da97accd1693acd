"""The scans table: each scanner's hit rate per configuration, with a 95 % Wilson interval.

Read from `scans/<scanner>/<run_id>.json` (benchctl.scan.result) as `benchctl scan` left them; a
result is counted for the configuration its run is grouped in (the report's grouping: the runs an
`--exclude-fallback` leaves out are left out here too). A scan asks about the transcript, not the
score, so every run with a scored result counts, errored runs included. `n` counts the runs with a
scored result, `hits` those whose answer is a hit (benchctl.scan.answers: true, a number other than
0, at least one label); an unscored result is never counted as a miss (`unscored`), and a run
with no result is `not_scanned`. A label or labels scanner also gets one row per label (`label`):
the runs whose answer is, or includes, that label.

The report reads files only: a result made from an older transcript is shown as it is until
`benchctl scan` is run again.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from benchctl.layout import SCANS
from benchctl.report.aggregate import Grouping
from benchctl.report.model import Column, Table
from benchctl.stats import mean_or_none, wilson_interval


def load_scans(root: str, problems: list[str]) -> dict[str, dict[str, tuple[str, Any, list[str]]]]:
    """scanner -> run_id -> (answer_type, answer or None when unscored, the scanner's labels)."""
    base = os.path.join(root, SCANS)
    out: dict[str, dict[str, tuple[str, Any, list[str]]]] = {}
    try:
        scanners = sorted(d.name for d in os.scandir(base) if d.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return out
    for name in scanners:
        folder = os.path.join(base, name)
        by_run: dict[str, tuple[str, Any, list[str]]] = {}
        for f in os.scandir(folder):
            if not f.name.endswith(".json") or not f.is_file():
                continue
            try:
                with open(f.path, "rb") as fh:
                    rec = orjson.loads(fh.read())
                run_id = rec["run_id"]
                by_run[str(run_id)] = (
                    str(rec.get("answer_type")),
                    rec.get("answer") if rec.get("status") == "scored" else None,
                    [str(x) for x in rec.get("labels") or []],
                )
            except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
                problems.append(f"{SCANS}/{name}/{f.name}: unreadable scan result, left out of the scans table")
        if by_run:
            out[name] = by_run
    return out


def _hit(answer_type: str, answer: Any, label: str | None) -> bool:
    from benchctl.scan.answers import hit_of

    return bool(hit_of(answer_type, answer, label))


def scans_table(root: str, grouping: Grouping, problems: list[str]) -> Table | None:
    scans = load_scans(root, problems)
    if not scans:
        return None
    rows: list[dict[str, Any]] = []
    for scanner, by_run in scans.items():
        answer_types = {t for t, _, _ in by_run.values()}
        order = next((ls for _, _, ls in by_run.values() if ls), [])  # the scanner's own order of its labels
        labels = order + sorted({x for _, _, ls in by_run.values() for x in ls} - set(order))
        per_label = any(t in ("label", "labels") for t in answer_types)
        keys: list[str | None] = ([] if answer_types == {"label"} else [None]) + (labels if per_label else [])
        for c in grouping.sorted_keys():
            runs = grouping.groups[c]
            found = [by_run[r.run_id] for r in runs if r.run_id in by_run]
            if not found:
                continue
            scored = [(t, a) for t, a, _ in found if a is not None]
            for label in keys:
                k, n = sum(_hit(t, a, label) for t, a in scored), len(scored)
                lo, hi = wilson_interval(k, n) if n else (None, None)
                numbers = [float(a) for t, a in scored if t == "number"] if label is None else []
                rows.append(
                    {"scanner": scanner, "label": label}
                    | grouping.key_fields(c)
                    | {
                        "hits": k,
                        "n": n,
                        "rate": k / n if n else None,
                        "lo": lo,
                        "hi": hi,
                        "mean": mean_or_none(numbers),
                        "unscored": len(found) - n,
                        "not_scanned": len(runs) - len(found),
                    }
                )
    if not rows:
        return None
    cols = [Column("scanner", "scanner")]
    if any(r["label"] is not None for r in rows):
        cols.append(Column("label", "label"))
    else:
        cols.append(Column("label", "label", hidden=True))
    cols += grouping.key_columns() + [
        Column("hits", "hits", "int"),
        Column("n", "scanned", "int"),
        Column("rate", "hit rate", "pct"),
        Column("lo", "95% lo", "pct"),
        Column("hi", "95% hi", "pct"),
        Column("mean", "mean answer", "float", hidden=not any(r["mean"] is not None for r in rows)),
        Column("unscored", "unscored", "int"),
        Column("not_scanned", "not scanned", "int"),
    ]
    return Table(
        "scans",
        "Scans: hit rate per configuration (benchctl scan)",
        cols,
        rows,
        notes=[
            "A hit: a boolean answer true, a number other than 0, at least one label (per label: that label). "
            "Interval: 95% Wilson over the runs with a scored result; unscored results are not counted as misses."
        ],
    )
