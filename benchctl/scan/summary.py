"""What `benchctl scan` prints after a session: per scanner, counts first, hits with their interval."""

from __future__ import annotations

from collections import Counter, defaultdict

from benchctl.scan.runner import Outcome, Session
from benchctl.stats import wilson_interval

ERRORS_SHOWN = 10


def _hits_cell(outs: list[Outcome]) -> str:
    scored = [o for o in outs if o.status == "scored"]
    if not scored:
        return "n/a (nothing scored)"
    if all(o.hit is None for o in scored):  # label answers: how often each label was given
        counts = Counter(str(o.answer) for o in scored)
        return ", ".join(f"{label} {k}" for label, k in counts.most_common())
    k, n = sum(1 for o in scored if o.hit), len(scored)
    lo, hi = wilson_interval(k, n)
    return f"{k} of {n} ({k / n:.0%}, 95% {lo:.0%}–{hi:.0%})"


def scanner_rows(outcomes: list[Outcome]) -> list[dict[str, str]]:
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by[o.scanner].append(o)
    rows = []
    for name in sorted(by):
        outs = by[name]
        costs = [o.cost_usd for o in outs if not o.reused]
        rows.append(
            {
                "scanner": name,
                "kind": outs[0].kind,
                "runs": str(len(outs)),
                "scanned": str(sum(not o.reused for o in outs)),
                "reused": str(sum(o.reused for o in outs)),
                "hits": _hits_cell(outs),
                "unscored": str(sum(o.status == "unscored" for o in outs)),
                "cost": "unknown" if any(c is None for c in costs) else f"${sum(c or 0 for c in costs):.4f}",
            }
        )
    return rows


def print_summary(session: Session) -> None:
    from rich.table import Table

    from benchctl.console import wide_console

    console = wide_console()
    rows = scanner_rows(session.outcomes)
    if rows:
        t = Table(title="scans")
        for col in rows[0]:
            t.add_column(col)
        for r in rows:
            t.add_row(*r.values())
        console.print(t)
    lines = [f"judge calls: {session.judge_calls}"] if session.judge_calls or session.judge_calls_capped else []
    if session.batch is not None:
        from benchctl.grading.batches import batch_lines

        lines += batch_lines(session.batch, "scans/<scanner>/batches.json")
    if session.judge_max_cost is not None:
        total = session.judge_spent_before_usd + session.judge_spent_usd
        lines.append(
            f"cost cap: ${total:.4f} of ${session.judge_max_cost:.2f} spent by these scanners' judge calls "
            f"(${session.judge_spent_before_usd:.4f} before this session)"
        )
    if session.judge_calls_capped:
        lines.append(
            f"{session.judge_calls_capped} judge call(s) not made: the cost cap is reached; their scans are "
            "unscored (rerun with a higher --max-cost)"
        )
    for run_id, why in session.skipped_runs:
        lines.append(f"not scanned: {run_id}: {why}")
    failed = [o for o in session.outcomes if o.status == "unscored"]
    for o in failed[:ERRORS_SHOWN]:
        lines.append(f"unscored: {o.scanner} / {o.run_id}: {o.error}")
    if len(failed) > ERRORS_SHOWN:
        lines.append(f"... and {len(failed) - ERRORS_SHOWN} more unscored (see their result files' `error`)")
    for line in lines:
        console.print(line, markup=False, highlight=False)
