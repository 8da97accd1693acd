"""Judge validation: compare judge grades with human scores.

Human score file: CSV with a header row, or JSON Lines, with these fields per score:

    run_id        the run (directory name under runs/)
    grader        coverage | tldr | combined | any_of_n | ...
    item          a finding id / prediction index, or "holistic" for the grade's headline score
    score         the human's score, 0..1 (the judge's raw scale, before the strict transform)
    artifact_tag  optional: "followup-1" etc. for follow-up artifacts (empty = main artifact)
    rater         optional: who scored it; several raters are averaged for the comparison and
                  give Krippendorff's alpha among themselves

Per (grader, level) — level "item" (per-finding / per-prediction) or "holistic" — this reports
n, MAE, bias (mean judge - human), the share within 0.1, Pearson and Spearman; for holistic
scores also pairwise accuracy over run pairs the human scored >= 0.2 apart (same order = 1,
judge tie = 1/2, reversed = 0) with the pair count and its split into same / tied / reversed
(so a published split such as 343 / 46 / 14 can be checked); and Krippendorff's alpha (interval) over
all raters with the judge as one more rater (and among humans alone when there are several).
Human scores with no judge score are counted as `missing_judge`, not silently dropped.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchctl.grading.stats import PairCounts, krippendorff_alpha_interval, pair_counts, pearson, spearman
from benchctl.jsonio import read_json
from benchctl.stats import mean_or_none

Unit = tuple[str, str, str | None, str]  # (grader, run_id, artifact_tag, item)


class HumanScoresError(ValueError):
    pass


def load_human(path: Path) -> list[dict[str, Any]]:
    text = Path(path).read_text(encoding="utf-8")
    if path.suffix.lower() in (".jsonl", ".json") or text.lstrip().startswith("{"):
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise HumanScoresError(f"{path}:{i}: not JSON ({e}); write one JSON object per line") from None
    else:
        rows = list(csv.DictReader(text.splitlines()))
    out = []
    for i, row in enumerate(rows, 1):
        missing = [k for k in ("run_id", "grader", "item", "score") if row.get(k) in (None, "")]
        if missing:
            raise HumanScoresError(
                f"{path}: row {i} lacks {', '.join(missing)}; "
                "every row needs run_id, grader, item (or 'holistic') and score"
            )
        try:
            score = float(row["score"])
        except (TypeError, ValueError):
            raise HumanScoresError(f"{path}: row {i}: score {row['score']!r} is not a number") from None
        if not 0.0 <= score <= 1.0:
            raise HumanScoresError(f"{path}: row {i}: score {score} is outside 0..1")
        out.append(
            {
                "run_id": str(row["run_id"]),
                "grader": str(row["grader"]),
                "item": str(row["item"]),
                "score": score,
                "artifact_tag": str(row.get("artifact_tag") or "") or None,
                "rater": str(row.get("rater") or "human"),
            }
        )
    if not out:
        raise HumanScoresError(f"{path}: no scores found")
    return out


def load_judge(grades: Path) -> dict[Unit, float]:
    grades = Path(grades)
    if (grades / "grades").is_dir():
        grades = grades / "grades"
    if not grades.is_dir():
        raise HumanScoresError(f"{grades}: not a grades directory; pass a results dir or its grades/ dir")
    out: dict[Unit, float] = {}
    for p in sorted(grades.glob("*/*.json")):
        try:
            rec = read_json(p)
        except Exception as e:  # orjson.JSONDecodeError / OSError: name the file instead of a traceback
            raise HumanScoresError(
                f"{p}: unreadable grade file ({e}); delete it and re-run `benchctl grade` to regrade that run"
            ) from None
        if not isinstance(rec, dict):
            continue  # not a grade record
        key = (rec.get("grader", p.parent.name), rec.get("run_id", p.stem), rec.get("artifact_tag"))
        if rec.get("score") is not None:
            out[(*key, "holistic")] = float(rec["score"])
        for it in rec.get("items") or []:
            if it.get("score") is not None and it.get("id") != "holistic":
                out[(*key, str(it["id"]))] = float(it["score"])
    return out


def _metrics(
    units: list[Unit], human: dict[Unit, dict[str, float]], judge: dict[Unit, float], holistic: bool
) -> dict[str, Any]:
    both = [u for u in units if u in judge]
    h = [mean_or_none(list(human[u].values())) for u in both]
    j = [judge[u] for u in both]
    diffs = [b - a for a, b in zip(h, j)]  # type: ignore[operator]
    raters = sorted({r for u in units for r in human[u]})
    m: dict[str, Any] = {
        "n": len(both),
        "missing_judge": len(units) - len(both),
        "raters": raters,
        "mae": mean_or_none([abs(d) for d in diffs]),
        "bias": mean_or_none(diffs),
        "within_0_1": mean_or_none([1.0 if abs(d) <= 0.1 + 1e-9 else 0.0 for d in diffs]),
        "pearson": pearson(h, j),  # type: ignore[arg-type]
        "spearman": spearman(h, j),  # type: ignore[arg-type]
        "alpha": krippendorff_alpha_interval([[human[u].get(r) for r in raters] + [judge[u]] for u in both]),
        "alpha_humans": (
            krippendorff_alpha_interval([[human[u].get(r) for r in raters] for u in units]) if len(raters) > 1 else None
        ),
    }
    if holistic:
        # pairs are compared within one grader and artifact (a TLDR score vs another TLDR score)
        counts = PairCounts()
        groups: dict[tuple, list[Unit]] = defaultdict(list)
        for u in both:
            groups[(u[0], u[2])].append(u)
        for us in groups.values():
            counts += pair_counts([mean_or_none(list(human[u].values())) for u in us], [judge[u] for u in us])  # type: ignore[misc]
        m.update(
            pairwise_accuracy=counts.accuracy,
            pairs=counts.pairs,
            pairs_same=counts.same,
            pairs_tied=counts.tied,
            pairs_reversed=counts.reversed,
        )
    return m


def validate(human_rows: list[dict[str, Any]], judge: dict[Unit, float]) -> dict[str, Any]:
    human: dict[Unit, dict[str, float]] = defaultdict(dict)
    for r in human_rows:
        human[(r["grader"], r["run_id"], r["artifact_tag"], r["item"])][r["rater"]] = r["score"]
    groups: dict[tuple[str, str], list[Unit]] = defaultdict(list)
    for u in sorted(human, key=lambda u: (u[0], u[1], u[2] or "", u[3])):
        groups[(u[0], "holistic" if u[3] == "holistic" else "item")].append(u)
    return {
        "groups": [
            {"grader": g, "level": level, **_metrics(us, human, judge, level == "holistic")}
            for (g, level), us in sorted(groups.items())
        ]
    }


def validate_files(human_path: Path, grades: Path) -> dict[str, Any]:
    return validate(load_human(human_path), load_judge(grades))


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def print_validation(report: dict[str, Any]) -> None:
    from rich.table import Table

    from benchctl.console import wide_console

    cols = [
        "grader",
        "level",
        "n",
        "missing_judge",
        "mae",
        "bias",
        "within_0_1",
        "pearson",
        "spearman",
        "pairwise_accuracy",
        "pairs",
        "alpha",
        "alpha_humans",
    ]
    t = Table(title="judge vs human")
    for c in cols:
        t.add_column(c.replace("_", " "))
    t.add_column("same / tied / reversed")
    for g in report["groups"]:
        split = f"{g['pairs_same']} / {g['pairs_tied']} / {g['pairs_reversed']}" if g["level"] == "holistic" else ""
        t.add_row(*(_fmt(g.get(c)) for c in cols), split)
    wide_console().print(t)
