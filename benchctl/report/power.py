"""`benchctl report --plan DELTA`: how many runs (seeds) per configuration would detect a true
difference DELTA of the headline score with 80 % power at α = 0.05, from the observed variance.

Per task: the within-configuration standard deviation pooled over its configurations with at least
two scored runs (Σ (n − 1)·s² / Σ (n − 1)), and the smallest n per configuration at which the
comparison's test (Welch's t for two configurations of the task, its power computed as
`inference.t_test_power` does) reaches 80 % power. Across tasks (when several share a headline
grader): the same for the across-task row, with each task's own SD. Success rates (any-of-N): the
power of the comparison's exact test around the observed pooled success rate (`inference.proportion_power`). The SD is itself estimated from few runs:
the plan is a guide, and the MDE column says what the current design detects.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from benchctl.report.aggregate import PROPORTION_GRADERS, SUCCESS_AT, Grouping
from benchctl.report.comparisons import HeadlineOf, scores_by_config
from benchctl.report.inference import (
    NEWCOMBE,
    STRATIFIED_NEWCOMBE,
    Cell,
    proportion_mde,
    sample_var,
    seeds_for_proportions,
    seeds_for_t,
    t_mde,
)
from benchctl.report.model import NA, Column, Table, fmt


def plan_table(grouping: Grouping, headline_of: HeadlineOf, delta: float) -> Table:
    if not 0 < delta <= 1:
        raise ValueError(f"--plan {delta}: give the difference to detect as a score difference in (0, 1], e.g. 0.05")
    scores = scores_by_config(grouping, headline_of)
    by_task: dict[str, list[list[float]]] = defaultdict(list)
    for c, s in scores.items():
        if s:
            by_task[c.task].append([v for _, v in s])
    rows: list[dict[str, Any]] = []
    sds: dict[str, list[float]] = defaultdict(list)  # grader -> per-task SDs (t) or rates (proportions)
    for task in sorted(by_task):
        grader = headline_of(task) or ""
        groups = by_task[task]
        n_now = sorted(len(g) for g in groups)[len(groups) // 2]  # median runs per configuration
        row: dict[str, Any] = {
            "task": task,
            "grader": grader,
            "delta": delta,
            "configurations": len(groups),
            "n_now": n_now,
        }
        if grader in PROPORTION_GRADERS:
            succ = sum(v >= SUCCESS_AT for g in groups for v in g)
            total = sum(len(g) for g in groups)
            rate = succ / total
            sds[grader].append(rate)
            k = round(rate * n_now)
            row.update(
                sd=None,
                rate=rate,
                n_needed=seeds_for_proportions(delta, [rate]),
                mde_now=proportion_mde([Cell(k, n_now, k, n_now)]),
                method=NEWCOMBE,
            )
        else:
            df = sum(len(g) - 1 for g in groups if len(g) > 1)
            sd = math.sqrt(math.fsum((len(g) - 1) * sample_var(g) for g in groups if len(g) > 1) / df) if df else None
            if sd is not None:
                sds[grader].append(sd)
            comps = [(sd * sd / n_now, n_now - 1.0)] * 2 if sd and n_now > 1 else None
            row.update(
                sd=sd,
                rate=None,
                n_needed=seeds_for_t(delta, [sd]) if sd is not None else None,
                mde_now=t_mde([comps])[0] if comps else None,
                method="welch",
            )
        rows.append(row)
    for grader, values in sorted(sds.items()):
        if len(values) > 1 and len(values) == sum(1 for r in rows if r["grader"] == grader):
            n_now = min(r["n_now"] for r in rows if r["grader"] == grader)
            row = {"task": None, "grader": grader, "delta": delta, "configurations": None, "n_now": n_now}
            if grader in PROPORTION_GRADERS:
                row.update(sd=None, rate=None, n_needed=seeds_for_proportions(delta, values), mde_now=None)
                row["method"] = STRATIFIED_NEWCOMBE
            else:
                k = len(values)
                comps = [(s * s / n_now / (k * k), n_now - 1.0) for s in values for _ in (0, 1)]
                row.update(sd=None, rate=None, n_needed=seeds_for_t(delta, values), method="stratified-t")
                row["mde_now"] = t_mde([comps])[0] if n_now > 1 and any(values) else None
            rows.append(row)
    cols = [
        Column("task", "task"),
        Column("grader", "grader"),
        Column("delta", "Δ to detect", "score"),
        Column("configurations", "configurations", "int"),
        Column("n_now", "runs per configuration now (median)", "int"),
        Column("sd", "within-configuration SD", "score"),
        Column("rate", "success rate", "pct"),
        Column("mde_now", "MDE now", "score"),
        Column("n_needed", "runs per configuration needed", "int"),
        Column("method", "test"),
    ]
    display = [
        ("task", lambda r: r["task"] or "all tasks (paired by task)"),
        ("grader", lambda r: r["grader"]),
        ("Δ", lambda r: fmt("score", r["delta"])),
        ("SD / rate", lambda r: fmt("score", r["sd"]) if r["sd"] is not None else fmt("pct", r["rate"])),
        ("runs now", lambda r: str(r["n_now"])),
        ("MDE now", lambda r: fmt("score", r["mde_now"])),
        ("runs needed", lambda r: NA if r["n_needed"] is None else str(r["n_needed"])),
        ("test", lambda r: r["method"]),
    ]
    notes = [
        f"Runs (seeds) per configuration for a true difference of {delta:g} to be found by the comparison's "
        f"two-sided test at α = 0.05 with 80% power, from the SD observed within configurations (pooled over a "
        f"task's configurations). The SD is itself estimated from few runs: a guide, not a guarantee. "
        f"– = no variance to plan from (fewer than 2 runs in every configuration)."
    ]
    return Table("plan", f"Power: runs needed to detect Δ = {delta:g}", cols, rows, notes, display)
