"""What a report was built from: versions, task content hashes, judges and rubric hashes.

Every output format carries this block. Mixing is flagged, not hidden: grades of one grader
made by different judge models or rubric versions are not comparable, and runs of one task
(and variant) made on different task contents are not either.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from typing import Any

from benchctl import __version__
from benchctl.report.load import UNFINISHED, Results
from benchctl.report.model import fmt


def provenance(results: Results) -> tuple[dict[str, Any], list[str]]:
    versions: Counter[str] = Counter()
    task_hashes: dict[str, Counter[str]] = defaultdict(Counter)
    judges: dict[str, Counter[str]] = defaultdict(Counter)
    rubrics: dict[str, Counter[str]] = defaultdict(Counter)
    # Rubrics legitimately differ between tasks (and variants, and tournament environments):
    # mixing is only checked within one grader on one task~variant.
    rubrics_by_task: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    unfinished = 0
    # One (grader, judge, rubric, task~variant) tuple per grade, counted at C speed and folded into
    # the per-grader counters afterwards: distinct tuples are folded in order of first appearance,
    # so every counter lists its keys in the order the per-grade loop used to (ties in
    # most_common() keep that order).
    per_grade: list[tuple[str, str, str, str]] = []
    costs: list[float] = []
    grade_cost_unknown = 0
    for r in results.runs:
        m = r.meta
        spec = m.get("spec") or {}
        task = m.get("task") or spec.get("task") or "?"
        variant = m.get("variant") or spec.get("variant")
        env = f"{task}~{variant}" if variant else str(task)
        if m.get("status") == UNFINISHED:
            # no meta.json: no version to compare; its task hash only when the transcript gave one
            unfinished += 1
            if m.get("task_hash"):
                task_hashes[env][str(m["task_hash"])] += 1
        else:
            versions[str(m.get("benchctl_version") or "unknown")] += 1
            task_hashes[env][str(m.get("task_hash") or "unknown")] += 1
        for (grader, _tag), g in r.grades.items():
            per_grade.append((grader, str(g.judge or "unknown"), str(g.rubric_hash or "unknown"), env))
            if g.cost_usd is None:
                grade_cost_unknown += 1
            else:
                costs.append(float(g.cost_usd))
    for (grader, judge, rubric, env), n in Counter(per_grade).items():
        judges[grader][judge] += n
        rubrics[grader][rubric] += n
        rubrics_by_task[(grader, env)][rubric] += n
    grade_cost = math.fsum(costs)  # exactly rounded, whatever the order of the grades
    if results.ratings:
        judges["tournament (ratings)"][str(results.ratings.get("judge") or "hand-made")] += 1

    warnings: list[str] = []
    for grader in sorted(judges):
        if len(judges[grader]) > 1:
            warnings.append(
                f"Mixed judges in `{grader}` grades: {_counts(judges[grader])}. Scores from different "
                f"judges are not comparable; re-grade with one judge (`benchctl grade --judge ...`)."
            )
    for grader, env in sorted(rubrics_by_task):
        c = rubrics_by_task[(grader, env)]
        if len(c) > 1:
            warnings.append(
                f"Mixed rubric versions in `{grader}` grades of task `{env}`: {_counts(c)}. "
                f"Re-grade the older runs with the current rubric (`benchctl grade --force`)."
            )
    for task in sorted(task_hashes):
        if len(task_hashes[task]) > 1:
            warnings.append(
                f"Task `{task}` was run on different contents (task hashes {_counts(task_hashes[task])}); "
                f"its runs are not comparable."
            )
    if len(versions) > 1:
        warnings.append(f"Runs were made by several benchctl versions: {_counts(versions)}.")
    warnings += run_warnings(results)
    warnings += [f"Problem reading results: {p}" for p in results.problems[:20]]
    if len(results.problems) > 20:
        warnings.append(f"... and {len(results.problems) - 20} more problems reading results.")

    prov = {
        "report_benchctl_version": __version__,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results_dir": str(results.root),
        "runs": len(results.runs),
        "unfinished_runs": unfinished,
        "grades": results.stats.get("grades", 0),
        "run_benchctl_versions": dict(versions),
        "task_hashes": {t: dict(c) for t, c in sorted(task_hashes.items())},
        "judges": {g: dict(c) for g, c in sorted(judges.items())},
        "rubric_hashes": {g: dict(c) for g, c in sorted(rubrics.items())},
        "grading_cost_usd": grade_cost,
        "grades_without_cost": grade_cost_unknown,
    }
    if results.ratings:
        prov["tournament_canonical_hashes"] = results.ratings.get("canonical_hashes") or {}
    if results.sweep:
        prov["sweep_benchctl_version"] = results.sweep.get("benchctl_version")
    return prov, warnings


def run_warnings(results: Results, limit: int = 20) -> list[str]:
    """One line per run whose meta.json lists warnings (e.g. tool calls its agent CLI rejected)."""
    lines = []
    for r in results.runs:
        ws = [w for w in r.meta.get("warnings") or [] if isinstance(w, dict)]
        if ws:
            said = "; ".join(
                f"{w.get('message')}" + (f" ({w['count']}×)" if (w.get("count") or 1) > 1 else "") for w in ws
            )
            lines.append(f"Run `{r.run_id}` ({r.meta.get('status')}) has warnings: {said}.")
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more runs with warnings (meta.json `warnings`)."]
    return lines


def _counts(c: Counter[str]) -> str:
    return ", ".join(f"{k} ({n})" for k, n in c.most_common())


def provenance_lines(prov: dict[str, Any]) -> list[str]:
    """Short human lines for terminal/markdown/CSV comments."""

    def fmt_map(d: dict[str, Any]) -> str:
        return "; ".join(f"{k}: {', '.join(v) if isinstance(v, dict) else v}" for k, v in d.items()) or "none"

    lines = [
        f"benchctl {prov['report_benchctl_version']} report of {prov['results_dir']} at {prov['generated_at']}",
        f"runs: {prov['runs']}"
        + (f" ({prov['unfinished_runs']} unfinished)" if prov.get("unfinished_runs") else "")
        + f", grade files: {prov['grades']}; runs made by benchctl "
        + (", ".join(prov["run_benchctl_versions"]) or "–"),
        f"task hashes: {fmt_map(prov['task_hashes'])}",
        f"judges: {fmt_map(prov['judges'])}",
        f"rubric hashes: {fmt_map(prov['rubric_hashes'])}",
    ]
    by_task = prov.get("headline_graders") or {}
    if len(set(by_task.values())) > 1:
        lines.append("headline score per task: " + "; ".join(f"{t}: {g or 'no grades'}" for t, g in by_task.items()))
    elif prov.get("headline_grader"):
        lines.append(f"headline score: {prov['headline_grader']}")
    # Always shown, $0 included (a free scripted judge, or no grades yet); grades of unknown cost are
    # said, not hidden behind the sum.
    cost = prov.get("grading_cost_usd") or 0.0
    lines.append(
        f"grading cost: {fmt('usd', cost)}"
        + (f" (+{prov['grades_without_cost']} grades of unknown cost)" if prov.get("grades_without_cost") else "")
        + ("" if prov.get("grades") else " (no grades yet)")
    )
    return lines
