"""Assemble a `Report` from a results directory: load, group, aggregate, check provenance."""

from __future__ import annotations

import os
from typing import Any

from benchctl.report import breakdowns, comparisons, contests, judge_noise, target_studies, tool_use
from benchctl.report.aggregate import Grouping, Options, fell_back, leaderboard, unscored_runs
from benchctl.report.headline import pick_headlines
from benchctl.report.load import Results, gc_paused, load_results
from benchctl.report.model import Report, Table
from benchctl.report.provenance import provenance
from benchctl.report.scans import scans_table


def build_report(
    results: Results | str | os.PathLike[str], opts: Options | None = None, *, cache: bool = True
) -> Report:
    """The whole report as data. `cache=False` bypasses the loader's parse cache."""
    with gc_paused():
        return _build(results, opts or Options(), cache)


def _build(results: Results | str | os.PathLike[str], opts: Options, cache: bool) -> Report:
    if opts.exclude_fallback and opts.separate_fallback:
        raise ValueError("--exclude-fallback and --separate-fallback contradict each other; pick one")
    if opts.by not in ("auto", "model", "model+harness"):
        raise ValueError(f"--by {opts.by}: expected model or model+harness")
    res = results if isinstance(results, Results) else load_results(results, cache=cache)
    prov, warnings = provenance(res)
    runs = res.runs
    headlines = pick_headlines(res, opts.score)
    excluded = [r for r in runs if fell_back(r)] if opts.exclude_fallback else []
    if excluded:
        runs = [r for r in runs if not fell_back(r)]
    grouping = Grouping(runs, opts)
    lb = leaderboard(grouping, headlines)
    if excluded:
        lb.notes.append(f"--exclude-fallback: {len(excluded)} runs that fell back to another model are left out.")
    partial = sum(1 for r in runs if (g := r.grade(headlines.of(r) or "")) is not None and g.status == "partial")
    if partial:
        lb.notes.append(
            f"{partial} runs have a partial {headlines.single or 'headline'} grade (some items unscored by the "
            f"judge); their score is the grader's figure over the items it could score."
        )
    tables: list[Table] = [lb]
    if "coverage" in res.graders:
        for t in (breakdowns.clusters(grouping), breakdowns.findings(grouping), breakdowns.followups(grouping)):
            if t is not None:
                tables.append(t)
    elif headlines.graders:
        t = breakdowns.followups(grouping, headlines.graders[0])
        if t is not None:
            tables.append(t)
    v = breakdowns.variants(grouping, headlines)
    if v is not None:
        tables.append(v)
    if contests.ANY_OF_N in res.graders:
        t = contests.any_of_n(grouping)
        if t is not None:
            tables.append(t)
    tables += target_studies.study_tables(grouping, res.root, res.graders)
    t = tool_use.tool_use(grouping)
    if t is not None:
        tables.append(t)
    if res.ratings:
        tables += contests.tournament_tables(res.ratings)
    judge_noise.add_judge_share(lb, grouping, headlines.of_task)
    jt = judge_noise.judges_table(runs)
    if jt is not None:
        tables.append(jt)
    cmp = comparisons.comparisons_table(grouping, headlines.of_task, res.ratings)
    if cmp is not None:
        tables.append(cmp)
    if opts.plan is not None:
        from benchctl.report.power import plan_table

        tables.append(plan_table(grouping, headlines.of_task, opts.plan))
    scans = scans_table(str(res.root), grouping, warnings)
    if scans is not None:
        tables.append(scans)
    un = unscored_runs(runs, headlines)
    if un.rows:
        tables.append(un)
    elif runs:
        what = f"`{headlines.single}` score" if headlines.single else "headline score (column grader)"
        lb.notes.append(f"All {len(runs)} runs have a {what}.")
    plot_data: dict[str, Any] = {"headline": headlines.single}
    prov |= {"headline_grader": headlines.label(), "headline_graders": dict(sorted(headlines.by_task.items()))}
    return Report(tables=tables, provenance=prov, warnings=warnings, plot_data=plot_data)
