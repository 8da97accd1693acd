"""The table printed after grading: counts first, and no average that hides missing grades."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from benchctl.grading.graders import grader
from benchctl.grading.runner import Outcome, Session
from benchctl.grading.spend import seed_lines
from benchctl.stats import mean_or_none, wilson_interval

if TYPE_CHECKING:  # the tournament is imported only when a session rates one
    from benchctl.tournament.schema import Ratings


def _mean_cell(scores: list[float], n_unscored_runs: int) -> str:
    m = mean_or_none(scores)
    if m is None:
        return "n/a (no scored runs)"
    text = f"{m:.3f} over {len(scores)}"
    if n_unscored_runs:
        text += f" ({n_unscored_runs} unscored run(s) excluded)"
    return text


def grader_rows(outcomes: Iterable[Outcome]) -> list[dict[str, object]]:
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by[o.grader].append(o)
    rows = []
    for name in sorted(by):
        os_ = by[name]
        scores = [o.score for o in os_ if o.score is not None]
        unscored = sum(1 for o in os_ if o.status == "unscored")
        costs = [o.cost_usd for o in os_ if not o.reused]
        rows.append(
            {
                "grader": name,
                "grades": len(os_),
                "reused": sum(o.reused for o in os_),
                "scored": sum(o.status == "scored" for o in os_),
                "partial": sum(o.status == "partial" for o in os_),
                "unscored": unscored,
                "items_unscored": f"{sum(o.n_unscored for o in os_)} of {sum(o.n_items for o in os_)}",
                "mean": _mean_cell(scores, unscored),
                "cost": "unknown" if any(c is None for c in costs) else f"${sum(c or 0 for c in costs):.4f}",
            }
        )
    return rows


def success_rows(outcomes: Iterable[Outcome], name: str) -> list[dict[str, object]]:
    """A success grader's (Grader.success) main-artifact grades per configuration: k of n scored runs
    with a Wilson 95 % interval."""
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.grader == name and o.artifact_tag is None:
            by[o.config].append(o)
    rows = []
    for config in sorted(by):
        scored = [o for o in by[config] if o.score is not None]
        k, n = sum(1 for o in scored if o.score == 1.0), len(scored)
        lo, hi = wilson_interval(k, n)
        rows.append(
            {
                "configuration": config,
                "k": k,
                "n": n,
                "rate": f"{k / n:.2f}" if n else "n/a",
                "ci95": f"{lo:.2f}–{hi:.2f}",
                "unscored": len(by[config]) - n,
            }
        )
    return rows


def tournament_lines(ratings: Ratings | None) -> tuple[list[str], list[str]]:
    """(plain lines, warnings) about the tournament this session rated; the warnings are the reasons
    some run's tournament grade is unscored (the command then exits 1)."""
    if not ratings:
        return [], []
    from benchctl.tournament.ratings import unscored_notes

    board = ratings.get("leaderboard") or []
    envs = ratings.get("environments") or []
    lines = [
        f"tournament: {len(board)} auditor(s) ({ratings.get('auditor_key')}) rated over {len(envs)} "
        f"environment(s); see grades/tournament/ratings.json or `benchctl report`"
    ]
    return lines, [f"tournament: {w}" for w in unscored_notes(ratings)]


def verify_lines(session: Session) -> list[str]:
    """What the tournament's verification settled (ratings.json `verify`) and what this session's
    verifier runs did; nothing when no environment is verified by an agent."""
    ratings = session.tournament_ratings
    v: dict[str, Any] = dict(ratings.get("verify") or {}) if ratings else {}
    stats = session.verify_stats
    if v.get("mode") not in ("agent", "mixed") and not (stats and (stats.runs or stats.reused)):
        return []
    cost = "unknown" if stats is None or stats.cost_usd is None else f"${stats.cost_usd:.4f}"
    runs = f"{stats.runs} verifier run(s) this session ({cost}), {stats.reused} reused" if stats else ""
    capped = f", {stats.not_started} not started (cost cap)" if stats and stats.not_started else ""
    return [
        f"tournament verification ({v.get('mode')}, credit: {v.get('credit')}): {v.get('confirmed', 0)} confirmed, "
        f"{v.get('refuted', 0)} refuted, {v.get('unverifiable', 0)} unverifiable, {v.get('unverified', 0)} not "
        f"verified; {runs}{capped}; runs in grades/tournament/verify/runs/"
    ]


def print_summary(session: Session) -> None:
    from rich.table import Table

    from benchctl.console import wide_console

    console = wide_console()
    table = Table(title="grades")
    cols = ["grader", "grades", "reused", "scored", "partial", "unscored", "items_unscored", "mean", "cost"]
    for c in cols:
        table.add_column(c.replace("_", " "), justify="left" if c in ("grader", "mean") else "right")
    for row in grader_rows(session.outcomes):
        table.add_row(*(str(row[c]) for c in cols))
    console.print(table)
    for name in sorted({o.grader for o in session.outcomes if grader(o.grader).success}):
        succ = success_rows(session.outcomes, name)
        if not succ:
            continue
        t2 = Table(title=f"{name} success by configuration (Wilson 95 %)")
        for c in ("configuration", "k", "n", "rate", "ci95", "unscored"):
            t2.add_column(c)
        for row in succ:
            t2.add_row(*(str(row[c]) for c in ("configuration", "k", "n", "rate", "ci95", "unscored")))
        console.print(t2)
    console.print(
        f"judge calls: {session.judge_calls}"
        + (f" ({session.tournament_judge_calls} by the tournament)" if session.tournament else "")
        + "; exchanges in grades/<grader>/judge_log/"
    )
    if session.batch is not None:
        from benchctl.grading.batches import batch_lines

        for line in batch_lines(session.batch, "grades/<grader>/batches.json"):
            console.print(line, markup=False)
    for seed in session.spend_seeds:
        for n, line in enumerate(seed_lines(seed)):
            console.print(line if n == 0 and seed.grades else f"[yellow]{line}[/yellow]")
    if session.judge_max_cost is not None:
        total = session.judge_spent_before_usd + session.judge_spent_usd
        estimated = (
            f", ${session.judge_spent_estimated_usd:.4f} of it estimated from grade records written before "
            f"the spend log"
            if session.judge_spent_estimated_usd
            else ""
        )
        stats = session.verify_stats
        verifiers = " and verifier runs" if stats and (stats.runs or stats.reused or stats.not_started) else ""
        console.print(
            f"cost cap: ${total:.4f} of ${session.judge_max_cost:.2f} spent by these graders' judge calls{verifiers} "
            f"(${session.judge_spent_before_usd:.4f} before this session{estimated}; "
            f"grades/<grader>/judge_log/spend.jsonl)"
        )
    if session.judge_calls_capped:
        console.print(
            f"cost cap reached: {session.judge_calls_capped} judge call(s) not made, their items are "
            f"unscored (raise --max-cost and rerun to score them)"
        )
    lines, warnings = tournament_lines(session.tournament_ratings)
    lines += verify_lines(session)
    for line in session.tournament_notes + lines:
        console.print(line, markup=False)  # "[grading]" is text, not a style
    for w in warnings:
        console.print(f"[yellow]{w}[/yellow]")
    for run_id, why in session.skipped_runs:
        console.print(f"[dim]not graded: {run_id}: {why}[/dim]")
    missing = sum(o.status == "unscored" for o in session.outcomes)
    if missing:
        console.print(
            f"[yellow]{missing} grade(s) unscored (judge failed or a part is missing); "
            f"re-run the same command to retry them.[/yellow]"
        )
