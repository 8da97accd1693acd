"""Breakdowns beyond the leaderboard: coverage per finding cluster, per-finding hit rates,
follow-up artifacts vs the main report, and data variants side by side.

All of them use only runs that count towards means (`aggregate.averaged`) and only grades with
a score; an unscored item (judge failed on it) is skipped, never read as 0.
A finding is a *hit* in a run when its strict score is > 0, i.e. the judge's raw score was
above 0.5 (strict = max(2s − 1, 0)).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from fractions import Fraction
from itertools import chain
from typing import Any

from benchctl.report.aggregate import Config, Grouping, averaged, clip_interval
from benchctl.report.headline import Headlines
from benchctl.report.model import Column, Table, fmt, fmt_interval
from benchctl.report.stats import mean_ci
from benchctl.stats import mean_or_none


def _natural(s: str) -> tuple:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


def _row_label(grouping: Grouping, c: Config) -> str:
    parts = [grouping.model_label(c), c.budget]
    for d in ("task", "variant", "tools"):
        if grouping.varies[d]:
            parts.append(getattr(c, d))
    # a configuration without a value where others have one (runs with no tool configuration beside
    # runs with one) leaves its part out rather than ending in a stray " · "
    return " · ".join(p for p in parts if p)


def clusters(grouping: Grouping, grader: str = "coverage") -> Table | None:
    """Mean strict coverage per finding cluster, one row per configuration."""
    names: set[str] = set()
    rows = []
    for c in grouping.sorted_keys():
        acc: dict[str, list[float]] = defaultdict(list)
        n = 0
        for r in grouping.groups[c]:
            g = r.grade(grader)
            if not averaged(r) or g is None or g.score is None:
                continue
            n += 1
            for cl, v in g.by_cluster.items():
                if v is not None:
                    acc[cl].append(float(v))
        if not n:
            continue
        names.update(acc)
        rows.append(
            {"config": _row_label(grouping, c), "n_scored": n, "n_runs": len(grouping.groups[c])}
            | {cl: mean_or_none(v) for cl, v in acc.items()}
        )
    if not names:
        return None
    order = sorted(names, key=_natural)
    cols = [
        Column("config", "configuration"),
        Column("n_scored", "scored runs", "int"),
        Column("n_runs", "runs", "int", hidden=True),
    ] + [Column(cl, cl, "score") for cl in order]
    display = [("configuration", lambda r: r["config"]), ("scored", lambda r: f"{r['n_scored']} of {r['n_runs']}")]
    display += [(cl, (lambda cl: lambda r: fmt("score", r.get(cl)))(cl)) for cl in order]
    return Table(
        "clusters",
        "Coverage by finding cluster",
        cols,
        rows,
        ["Mean strict coverage of each cluster's findings over scored runs."],
        display,
    )


def findings(grouping: Grouping, grader: str = "coverage") -> Table | None:
    """Per-finding hit rate overall and per model (across budgets)."""
    # ~400,000 items in a 10,000-run sweep, but only a few hundred distinct ones: the loader shares
    # one tuple per distinct (id, score, strict, cluster) (load._Compactor). So each configuration's
    # items are counted at C speed (Counter over the shared tuples) and only the distinct tuples
    # are looked at in Python. The counter keeps first-seen order, so findings and models appear
    # in the order a per-item loop would meet them.
    per_model: dict[str, dict[str, list[int]]] = {}  # model label -> finding -> [hits, scored]
    strict_sums: dict[str, Counter[float]] = {}  # finding -> strict score -> how many items had it
    cluster_of: dict[str, str | None] = {}
    key = (grader, None)
    for c in grouping.sorted_keys():
        item_lists = [
            g.items
            for r in grouping.groups[c]
            if (g := r.grades.get(key)) is not None and g.score is not None and averaged(r)
        ]
        if not item_lists:
            continue
        cells = per_model.setdefault(grouping.model_label(c), {})
        for (fid, score, strict, cluster), n in Counter(chain.from_iterable(item_lists)).items():
            if strict is None:
                if score is None:
                    continue  # unscored item: skipped, never 0
                strict = max(2 * score - 1, 0)
            cell = cells.get(fid)
            if cell is None:
                cell = cells[fid] = [0, 0]
                if fid not in strict_sums:
                    strict_sums[fid] = Counter()
                    cluster_of[fid] = cluster
            if strict > 0:
                cell[0] += n
            cell[1] += n
            strict_sums[fid][strict] += n
    if not strict_sums:
        return None
    models = list(per_model)
    rows = []
    for fid in sorted(strict_sums, key=_natural):
        cells_of = [(m, cells[fid]) for m, cells in per_model.items() if fid in cells]
        hits = sum(v[0] for _, v in cells_of)
        n = sum(v[1] for _, v in cells_of)
        row: dict[str, Any] = {
            "finding": fid,
            "cluster": cluster_of.get(fid),
            "n_scored": n,
            "hit_rate": hits / n if n else None,
            "mean_strict": _exact_mean(strict_sums[fid], n),
        }
        for m in models:
            h, k = per_model[m].get(fid, (0, 0))
            row[f"hit:{m}"] = h / k if k else None
        rows.append(row)
    cols = [
        Column("finding", "finding"),
        Column("cluster", "cluster"),
        Column("n_scored", "scored", "int"),
        Column("hit_rate", "hit rate", "pct"),
        Column("mean_strict", "mean strict", "score"),
    ]
    cols += [Column(f"hit:{m}", m, "pct") for m in models]
    return Table(
        "findings",
        "Per-finding hit rates",
        cols,
        rows,
        ["Hit = strict score > 0 (judge's raw score above 0.5). Unscored items are skipped."],
    )


def _exact_mean(counts: Counter[float], n: int) -> float | None:
    """The mean of `n` values given as value -> count, rounded once (exact rational arithmetic over
    the few distinct values), like stats.mean_or_none's fsum: the same for any order of the items."""
    if not n:
        return None
    return float(sum(Fraction(v) * k for v, k in counts.items()) / n)


def followups(grouping: Grouping, grader: str = "coverage") -> Table | None:
    """Follow-up artifact vs main report, paired per run: mean gain with a t-interval."""
    rows = []
    for c in grouping.sorted_keys():
        tags: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in grouping.groups[c]:
            main = r.score(grader)
            if main is None or len(r.grades) == 1 or not averaged(r):
                continue  # no pair possible
            for (gname, tag), g in r.grades.items():
                if tag is not None and gname == grader and g.score is not None:
                    tags[tag].append((main, g.score))
        for tag in sorted(tags, key=_natural):
            pairs = tags[tag]
            gain, lo, hi = clip_interval(*mean_ci([f - m for m, f in pairs]), floor=-1.0, ceil=1.0)
            rows.append(
                {
                    "config": _row_label(grouping, c),
                    "artifact": tag,
                    "n_pairs": len(pairs),
                    "main_mean": mean_or_none([m for m, _ in pairs]),
                    "followup_mean": mean_or_none([f for _, f in pairs]),
                    "gain_mean": gain,
                    "gain_lo": lo,
                    "gain_hi": hi,
                }
            )
    if not rows:
        return None
    cols = [
        Column("config", "configuration"),
        Column("artifact", "follow-up"),
        Column("n_pairs", "runs", "int"),
        Column("main_mean", "main", "score"),
        Column("followup_mean", "follow-up", "score"),
        Column("gain_mean", "gain", "score"),
        Column("gain_lo", "gain 95% lo", "score"),
        Column("gain_hi", "gain 95% hi", "score"),
    ]
    display = [
        ("configuration", lambda r: r["config"]),
        ("follow-up", lambda r: r["artifact"]),
        ("runs", lambda r: str(r["n_pairs"])),
        ("main", lambda r: fmt("score", r["main_mean"])),
        ("follow-up score", lambda r: fmt("score", r["followup_mean"])),
        ("gain (95% CI)", lambda r: fmt_interval(r["gain_mean"], r["gain_lo"], r["gain_hi"])),
    ]
    return Table(
        "followups",
        f"Follow-up vs main report ({grader})",
        cols,
        rows,
        ["Paired over runs where both the main report and the follow-up have a score."],
        display,
    )


def variants(grouping: Grouping, headlines: Headlines) -> Table | None:
    """Same model/harness/budget, each data variant side by side (in its task's headline score), with
    the change from original: Δ with its 95 % interval and p (`comparisons.variant_deltas`), and one
    row per task pooling the Δs of its rows."""
    if not grouping.varies["variant"] or not headlines.graders:
        return None
    from benchctl.report.comparisons import variant_deltas

    deltas = variant_deltas(grouping, headlines.of_task)
    cells: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    totals: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    names: set[str] = set()
    for c, runs in grouping.groups.items():
        key = (c.task, c.budget_s, c.budget, c.model, c.harness, c.tools, c.fell_back)
        names.add(c.variant)
        totals[key][c.variant] += len(runs)
        headline = headlines.of_task(c.task)
        for r in runs:
            if averaged(r) and headline and (s := r.score(headline)) is not None:
                cells[key][c.variant].append(s)
            else:
                cells[key].setdefault(c.variant, [])
    order = sorted(names, key=lambda v: (v != "original", v))
    rows = []
    for key in sorted(cells, key=lambda k: (k[0], k[1], k[3], k[4], k[5], k[6])):
        task, budget_s, budget, model, harness, tools, fb = key
        c = Config(task, model, harness, budget_s, budget, "", tools, fb)
        row: dict[str, Any] = {
            "config": " · ".join(
                p
                for p in (
                    grouping.model_label(c),
                    budget,
                    task if grouping.varies["task"] else "",
                    tools if grouping.varies["tools"] else "",
                )
                if p
            ),
            "grader": headlines.of_task(task),
        }
        base = mean_or_none(cells[key].get("original", []))
        for v in order:
            vals = cells[key].get(v, [])
            row[f"{v}:mean"] = mean_or_none(vals)
            row[f"{v}:n"] = len(vals)
            row[f"{v}:runs"] = totals[key].get(v, 0)
            if v != "original":
                row[f"{v}:delta"] = (row[f"{v}:mean"] - base) if base is not None and vals else None
                _delta_stats(row, v, deltas.get(key, {}).get(v))
        rows.append(row)
    for task in sorted({k[0] for k in cells}):
        pooled = deltas.get(("all", task))
        if pooled:
            row = {
                "config": "all rows" + (f" · {task}" if grouping.varies["task"] else ""),
                "grader": headlines.of_task(task),
            }
            for v in order:
                row.update({f"{v}:mean": None, f"{v}:n": None, f"{v}:runs": None})
                if v != "original":
                    res = pooled.get(v)
                    row[f"{v}:delta"] = None if res is None else res.diff
                    _delta_stats(row, v, res)
            rows.append(row)
    cols = [Column("config", "configuration"), Column("grader", "grader")]
    display = [("configuration", lambda r: r["config"])]
    if len(headlines.graders) > 1:
        display.append(("grader", lambda r: r["grader"] or "–"))
    for v in order:
        cols += [
            Column(f"{v}:mean", f"{v}", "score"),
            Column(f"{v}:n", f"{v} scored", "int"),
            Column(f"{v}:runs", f"{v} runs", "int"),
        ]
        display.append((v, (lambda v: lambda r: _variant_cell(r, v))(v)))
        if v != "original":
            cols += [
                Column(f"{v}:delta", f"Δ {v}", "score"),
                Column(f"{v}:delta_lo", f"Δ {v} 95% lo", "score"),
                Column(f"{v}:delta_hi", f"Δ {v} 95% hi", "score"),
                Column(f"{v}:p", f"Δ {v} p", "float"),
                Column(f"{v}:method", f"Δ {v} method"),
            ]
            display.append((f"Δ {v} (95% CI)", (lambda v: lambda r: _delta_cell(r, v))(v)))
            display.append((f"p {v}", (lambda v: lambda r: _p_cell(r[f"{v}:p"]))(v)))
    return Table(
        "variants",
        f"Data variants side by side ({headlines.single or 'headline score'})",
        cols,
        rows,
        [
            "Δ = variant mean − original mean for the same model, harness and budget, with its 95% interval and "
            "two-sided p: paired by seed when both have the same seeds, else Welch's t; success rates: Newcombe's "
            "interval and an exact p (Boschloo's test; for 'all rows' the exact conditional test), significance "
            "decided by p. 'all rows': the equally weighted mean of the rows' Δs (stratified "
            "by row), the question whether the variant moves scores at all."
        ],
        display,
    )


def _delta_stats(row: dict[str, Any], v: str, res: Any) -> None:
    row[f"{v}:delta_lo"] = None if res is None else res.lo
    row[f"{v}:delta_hi"] = None if res is None else res.hi
    row[f"{v}:p"] = None if res is None else res.p
    row[f"{v}:method"] = None if res is None else res.method


def _variant_cell(r: dict[str, Any], v: str) -> str:
    if r[f"{v}:n"] is None:
        return ""
    return f"{fmt('score', r[f'{v}:mean'])} ({r[f'{v}:n']} of {r[f'{v}:runs']})"


def _delta_cell(r: dict[str, Any], v: str) -> str:
    lo, hi = r[f"{v}:delta_lo"], r[f"{v}:delta_hi"]
    if lo is None or hi is None:
        return _signed(r[f"{v}:delta"])
    return f"{_signed(r[f'{v}:delta'])} [{_signed(lo)}, {_signed(hi)}]"


def _p_cell(p: float | None) -> str:
    return "–" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _signed(v: float | None) -> str:
    return "–" if v is None or math.isnan(v) else f"{v:+.3f}"
