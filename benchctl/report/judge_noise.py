"""Judge noise and judge agreement, from grades made with `benchctl grade --repeats K` or a panel
(`--judge A --judge B`); `grading.panel` writes each record's `judge_noise`.

- `judge_share` (a leaderboard column): the share of the between-run variance of a configuration's
  headline score that comes from the judge: the mean over its scored runs of each score's judge
  variance (estimated from the spread of the repeated answers) divided by the sample variance of
  the scores. Shown only when every scored run of the row has a judge variance; clipped to 1 (with
  few runs the between-run variance is itself noisy). A high share says: more repeats, not more
  seeds, would narrow this row's interval.
- the `judges` table: per grader, the judge (or panel), how many grades carry repeats, the judge's
  standard deviation of a grade's score (the root of the mean judge variance), and for panels
  Krippendorff's α (interval metric) between the judges over every item of every grade — summed
  from each record's additive pieces, so exact over the whole directory — and each judge's mean.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from benchctl.report.aggregate import Grouping, averaged
from benchctl.report.inference import sample_var
from benchctl.report.load import Run
from benchctl.report.model import Column, Table, fmt


def judge_var(run: Run, grader: str) -> float | None:
    g = run.grade(grader)
    noise = g.judge_noise if g is not None else None
    v = noise.get("var") if noise else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def judge_share(scores: list[float], variances: list[float | None]) -> float | None:
    if len(scores) < 2 or any(v is None for v in variances):
        return None
    between = sample_var(scores)
    if between <= 0:
        return None
    return min(1.0, math.fsum(variances) / len(variances) / between)  # type: ignore[arg-type]


def add_judge_share(lb: Table, grouping: Grouping, headline_of: Callable[[str], str | None]) -> None:
    """Fill the leaderboard's `judge_share` column (None where the row's grades have no repeats)."""
    by_fields = {_key(grouping.key_fields(c)): c for c in grouping.groups}
    keys = [col.key for col in grouping.key_columns()]
    shown = False
    for row in lb.rows:
        c = by_fields.get(_key({k: row.get(k) for k in keys}))
        grader = headline_of(c.task) if c is not None else None
        row["judge_share"] = None
        if c is None or grader is None:
            continue
        runs = [r for r in grouping.groups[c] if averaged(r) and r.score(grader) is not None]
        row["judge_share"] = judge_share([r.score(grader) for r in runs], [judge_var(r, grader) for r in runs])  # type: ignore[misc]
        shown |= row["judge_share"] is not None
    lb.columns.append(Column("judge_share", "judge share of variance", "pct"))
    if shown and lb.display is not None:
        after = next((i for i, (label, _) in enumerate(lb.display) if label == "scored"), len(lb.display) - 1)
        lb.display.insert(after + 1, ("judge share", lambda r: fmt("pct", r.get("judge_share"))))
        lb.notes.append(
            "Judge share: of the spread of scores between a row's runs, the part that comes from the judge "
            "(from the spread of its repeated answers, benchctl grade --repeats); high = more repeats narrow "
            "the interval more than more seeds would."
        )


def _key(fields: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, repr(v)) for k, v in fields.items()))


def alpha(pieces: list[dict[str, Any]]) -> float | None:
    """Krippendorff's α (interval) from summed per-record pieces (grading.panel.agreement_stats)."""
    n = sum(int(p.get("n") or 0) for p in pieces)
    if n < 2:
        return None
    total = math.fsum(float(p.get("sum") or 0) for p in pieces)
    sumsq = math.fsum(float(p.get("sumsq") or 0) for p in pieces)
    d_o = math.fsum(float(p.get("d_o") or 0) for p in pieces) / n
    d_e = 2 * (n * sumsq - total * total) / (n * (n - 1))
    return None if d_e <= 0 else 1.0 - d_o / d_e


def judges_table(runs: list[Run]) -> Table | None:
    """Judge noise and agreement per grader, over the grades that carry `judge_noise`."""
    noisy: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        for (grader, _tag), g in r.grades.items():
            if g.judge_noise:
                noisy[(grader, g.judge or "")].append(g.judge_noise)
    if not noisy:
        return None
    rows = []
    for (grader, judge), noises in sorted(noisy.items()):
        variances = [float(n["var"]) for n in noises if isinstance(n.get("var"), (int, float))]
        pieces = [n["agreement"] for n in noises if isinstance(n.get("agreement"), dict)]
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for p in pieces:
            for j, (s, k) in (p.get("judge_sums") or {}).items():
                sums[j][0] += s
                sums[j][1] += k
        rows.append(
            {
                "grader": grader,
                "judge": judge,
                "grades": len(noises),
                "judge_sd": math.sqrt(math.fsum(variances) / len(variances)) if variances else None,
                "items": int(sum(int(p.get("n") or 0) for p in pieces) / max(1, len(sums))) if pieces else None,
                "alpha": alpha(pieces) if pieces else None,
                "judge_means": {j: s / k for j, (s, k) in sorted(sums.items()) if k} or None,
            }
        )
    cols = [
        Column("grader", "grader"),
        Column("judge", "judge (panel)"),
        Column("grades", "grades with repeats", "int"),
        Column("judge_sd", "judge SD of a grade", "score"),
        Column("items", "items rated by the panel", "int"),
        Column("alpha", "Krippendorff's α", "score"),
        Column("judge_means", "mean per judge"),
    ]
    display = [
        ("grader", lambda r: r["grader"]),
        ("judge (panel)", lambda r: r["judge"]),
        ("grades", lambda r: str(r["grades"])),
        ("judge SD of a grade", lambda r: fmt("score", r["judge_sd"])),
        ("α between judges", lambda r: fmt("score", r["alpha"])),
        (
            "mean per judge",
            lambda r: ", ".join(f"{j}: {m:.3f}" for j, m in (r["judge_means"] or {}).items()) or "–",
        ),
    ]
    return Table(
        "judges",
        "Judge noise and agreement",
        cols,
        rows,
        [
            "Judge SD: the standard deviation of a grade's score that comes from sampling the judge (jackknife over "
            "its repeated answers; the mean of K answers already divides it by √K). α: Krippendorff's α (interval) "
            "between a panel's judges over every item, each judge's value the mean of its repeats (1 = agree, "
            "0 = no better than chance)."
        ],
        display,
    )
