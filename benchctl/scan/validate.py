"""A scanner against human labels: accuracy, precision, recall, F1 and balanced accuracy, with intervals.

Labels file: CSV with a header row holding `run_id` and `label`, and optionally `event`:

    run_id,event,label
    demo__react__m__2m__s0,12,yes
    demo__react__m__2m__s1,,no

`label` is the human's answer in the scanner's type (yes / no for a boolean scanner, a number,
a label, or labels separated by `;`), or yes / no for "the scanner should find something" with
any type. Each is compared with the scanner's answer as a hit (benchctl.scan.answers): positive =
a hit. A label or labels scanner is scored for one label (`positive`): a hit is an answer with
it; a labels scanner without one counts any label. Several rows of one run are one label: a hit
when any row is. `event`, when given, is the event the human found it in: `event_agreement` is
the share of true positives with a human event whose result cites one of them.

Runs labelled but not scanned (or unscored) are listed in `missing`, never counted as a miss.
Intervals (95 %): Wilson for accuracy, precision and recall (proportions of runs); a percentile
bootstrap over runs (2,000 resamples, fixed seed: the same file gives the same interval) for F1 and
balanced accuracy, which are not proportions.
"""

from __future__ import annotations

import csv
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchctl.layout import scan_path
from benchctl.scan.answers import NO, YES, hit_of
from benchctl.scan.result import iter_results, scans_dir
from benchctl.stats import wilson_interval

BOOTSTRAP = 2000
KEYS = ("n", "accuracy", "precision", "recall", "f1", "balanced_accuracy")


class LabelsError(ValueError):
    """A labels file that cannot be used; the message names the file, the row and the fix."""


@dataclass
class Label:
    run_id: str
    hit: bool
    events: set[int] = field(default_factory=set)


def _human_hit(raw: str, answer_type: str, positive: str | None, where: str) -> bool:
    word = raw.strip()
    if word.casefold() in YES:
        return True
    if word.casefold() in NO:
        return False
    if answer_type == "boolean":
        raise LabelsError(f"{where}: label {raw!r} is not yes or no")
    if answer_type == "number":
        try:
            return float(word) != 0
        except ValueError:
            raise LabelsError(f"{where}: label {raw!r} is not a number (nor yes / no)") from None
    given = [] if word.casefold() == "none" else [x.strip() for x in word.split(";") if x.strip()]
    if positive is not None:
        return any(x.casefold() == positive.casefold() for x in given)
    if answer_type == "labels":
        return bool(given)
    raise LabelsError(f"{where}: a label scanner is validated for one label: pass --positive LABEL")


def load_labels(path: Path, answer_type: str, positive: str | None) -> dict[str, Label]:
    """run_id -> its human label (rows of one run combined)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as e:
        raise LabelsError(f"{path}: cannot read the labels file ({e.strerror or e})") from None
    reader = csv.DictReader(text.splitlines())
    cols = reader.fieldnames or []
    if "run_id" not in cols or "label" not in cols:
        raise LabelsError(f"{path}: the header row must name run_id and label (and optionally event); it has {cols}")
    out: dict[str, Label] = {}
    for i, row in enumerate(reader, 2):
        where = f"{path}:{i}"
        run_id, raw = (row.get("run_id") or "").strip(), row.get("label") or ""
        if not run_id or not raw.strip():
            raise LabelsError(f"{where}: every row needs a run_id and a label")
        hit = _human_hit(raw, answer_type, positive, where)
        label = out.setdefault(run_id, Label(run_id, False))
        label.hit = label.hit or hit
        event = (row.get("event") or "").strip()
        if event:
            try:
                seq = int(event.removeprefix("E"))
            except ValueError:
                raise LabelsError(f"{where}: event {event!r} is not an event number (seq), e.g. 12 or E12") from None
            if hit:
                label.events.add(seq)
    if not out:
        raise LabelsError(f"{path}: no labelled runs")
    return out


def scanner_results(results: Path, scanner: str) -> dict[str, dict[str, Any]]:
    """run_id -> the scanner's result in `results`; LabelsError when there are none."""
    if not (scans_dir(results) / scanner).is_dir():
        raise LabelsError(
            f"{scan_path(results, scanner, '*').parent} does not exist: run `benchctl scan {results} --scanner "
            f"{scanner}` first"
        )
    return {r["run_id"]: r for r in iter_results(results) if r["scanner"] == scanner}


def _ratio(k: int, n: int) -> float | None:
    return k / n if n else None


def _f1(tp: int, fp: int, fn: int) -> float | None:
    return 2 * tp / (2 * tp + fp + fn) if tp else (0.0 if fp + fn else None)


def _balanced(tp: int, fp: int, tn: int, fn: int) -> float | None:
    if not tp + fn or not tn + fp:
        return None
    return (tp / (tp + fn) + tn / (tn + fp)) / 2


def _bootstrap(cells: list[str], stat: Any) -> tuple[float | None, float | None]:
    """95 % percentile interval of stat(tp, fp, tn, fn) over resampled runs (undefined resamples skipped)."""
    if not cells:
        return None, None
    rng = random.Random(0)
    values = []
    for _ in range(BOOTSTRAP):
        c = Counter(rng.choices(cells, k=len(cells)))
        v = stat(c["tp"], c["fp"], c["tn"], c["fn"])
        if v is not None:
            values.append(v)
    if not values:
        return None, None
    values.sort()
    lo = values[max(0, math.ceil(0.025 * len(values)) - 1)]
    hi = values[min(len(values) - 1, math.ceil(0.975 * len(values)) - 1)]
    return lo, hi


def validate(labels: dict[str, Label], found: dict[str, dict[str, Any]], positive: str | None = None) -> dict[str, Any]:
    cells: list[str] = []
    missing: list[str] = []
    agree = with_events = 0
    for run_id in sorted(labels):
        lab, rec = labels[run_id], found.get(run_id)
        hit = hit_of(str(rec.get("answer_type")), rec.get("answer"), positive) if rec is not None else None
        if hit is None:
            missing.append(run_id)
            continue
        cells.append(("t" if hit == lab.hit else "f") + ("p" if hit else "n"))
        if hit and lab.hit and lab.events:
            with_events += 1
            agree += bool(lab.events & set(rec.get("events") or []))  # type: ignore[union-attr]
    c = Counter(cells)
    tp, fp, tn, fn = c["tp"], c["fp"], c["tn"], c["fn"]
    n = len(cells)
    out: dict[str, Any] = {
        "n": n,
        "accuracy": _ratio(tp + tn, n),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _f1(tp, fp, fn) if n else None,
        "balanced_accuracy": _balanced(tp, fp, tn, fn),
    }
    out["intervals"] = {
        "accuracy": list(wilson_interval(tp + tn, n)) if n else None,
        "precision": list(wilson_interval(tp, tp + fp)) if tp + fp else None,
        "recall": list(wilson_interval(tp, tp + fn)) if tp + fn else None,
        "f1": list(_bootstrap(cells, lambda a, b, _c, d: _f1(a, b, d) if a + b + d else None)),
        "balanced_accuracy": list(_bootstrap(cells, _balanced)),
    }
    out |= {
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "positive": positive,
        "missing": missing,
        "event_agreement": _ratio(agree, with_events),
        "event_n": with_events,
    }
    return out


def validate_files(results: Path, scanner: str, labels_path: Path, positive: str | None = None) -> dict[str, Any]:
    found = scanner_results(results, scanner)
    types = {str(r.get("answer_type")) for r in found.values()}
    if len(types) > 1:
        raise LabelsError(
            f"scans/{scanner}/ holds results of more than one answer type; rescan with one scanner definition"
        )
    answer_type = next(iter(types), "boolean")
    if positive is not None:
        known = {str(x) for r in found.values() for x in r.get("labels") or []}
        if answer_type not in ("label", "labels"):
            raise LabelsError(f"--positive {positive}: {scanner} answers {answer_type}, not labels; leave it out")
        if positive not in known:
            raise LabelsError(f"--positive {positive}: not a label of {scanner} ({', '.join(sorted(known))})")
    if answer_type == "label" and positive is None:
        raise LabelsError(f"{scanner} answers one label of several: pass --positive LABEL (the label scored as a hit)")
    return {"scanner": scanner} | validate(load_labels(labels_path, answer_type, positive), found, positive)
