"""Any-of-N success tables and tournament (Elo) tables.

Any-of-N: one grade per run (grader "any_of_n"): score 1.0 = one of the N predictions matched
the hidden behaviour, 0.0 = none did, None = the judge gave no verdict (never counted as a
failure). Success rate per configuration with a 95 % Wilson interval, and two mean costs per run:
the investigator's own (meta `cost_usd`) and the target + auxiliary models' (meta `target_tools`,
written by the runner apart from the investigator's usage). A run whose cost is unknown (None, or
no `target_tools` record) is left out of that mean and the cell says how many runs are priced.

Tournament: rendered from grades/tournament/ratings.json as the tournament grader wrote it
(schema: benchctl.tournament.schema.Ratings); the report does not refit anything.
"""

from __future__ import annotations

from typing import Any

from benchctl.report.aggregate import SUCCESS_AT, Grouping, averaged
from benchctl.report.model import NA, Column, Table, fmt
from benchctl.stats import mean_or_none, wilson_interval

ANY_OF_N = "any_of_n"


def target_cost(meta: dict[str, Any], role: str | None = None) -> float | None:
    """USD spent on the target, auxiliary and baseline models in one run (or one `role`), from
    meta `target_tools`; None when unknown: no record, or an unpriced call (never read as 0).
    The baseline model (its tools only) has a record only when the task names one."""
    tt = meta.get("target_tools")
    if not isinstance(tt, dict):
        return None
    total = 0.0
    for r in (role,) if role else ("target", "auxiliary", *(("baseline",) if "baseline" in tt else ())):
        part = tt.get(r)
        cost = part.get("cost_usd") if isinstance(part, dict) else None
        if not isinstance(cost, (int, float)):
            return None
        total += float(cost)
    return total


def _mean_known(values: list[float | None]) -> tuple[float | None, int]:
    """(mean over the known values, how many are known)."""
    known = [v for v in values if v is not None]
    return mean_or_none(known), len(known)


def _cost_cell(mean: float | None, n_priced: int, n: int) -> str:
    return fmt("usd", mean) + ("" if n_priced in (0, n) else f" ({n_priced} of {n} priced)")


def any_of_n(grouping: Grouping, grader: str = ANY_OF_N) -> Table | None:
    rows = []
    for c in grouping.sorted_keys():
        runs = grouping.groups[c]
        graded = [r.grade(grader) for r in runs if averaged(r)]
        if not any(g is not None for g in graded):
            continue
        verdicts = [g.score for g in graded if g is not None and g.score is not None]
        k = sum(1 for s in verdicts if s >= SUCCESS_AT)
        n = len(verdicts)
        lo, hi = wilson_interval(k, n) if n else (None, None)
        # Costs over the runs that count (not error/unfinished), like the leaderboard's mean cost.
        usable = [r for r in runs if averaged(r)]
        inv_mean, n_inv = _mean_known(
            [float(r.meta["cost_usd"]) if isinstance(r.meta.get("cost_usd"), (int, float)) else None for r in usable]
        )
        tgt_mean, n_tgt = _mean_known([target_cost(r.meta) for r in usable])
        # The target model (from meta target_tools): declared by the task, so rows of different
        # targets are already apart when the task column is shown; this names them.
        targets = sorted(
            {
                str(tt["target_model"])
                for r in runs
                if isinstance(tt := r.meta.get("target_tools"), dict) and tt.get("target_model")
            }
        )
        rows.append(
            grouping.key_fields(c)
            | {
                "target": ", ".join(targets) or None,
                "successes": k,
                "n_scored": n,
                "n_runs": len(runs),
                "n_unscored": sum(1 for g in graded if g is None or g.score is None),
                "n_not_averaged": sum(1 for r in runs if not averaged(r)),
                "rate": k / n if n else None,
                "rate_lo": lo,
                "rate_hi": hi,
                "n_costed": len(usable),
                "investigator_cost_mean_usd": inv_mean,
                "n_investigator_priced": n_inv,
                "target_cost_mean_usd": tgt_mean,
                "n_target_priced": n_tgt,
                "target_only_cost_mean_usd": _mean_known([target_cost(r.meta, "target") for r in usable])[0],
                "auxiliary_cost_mean_usd": _mean_known([target_cost(r.meta, "auxiliary") for r in usable])[0],
            }
        )
    if not rows:
        return None
    has_target = any(r["target"] for r in rows)
    cols = (
        grouping.key_columns()
        + [Column("target", "target")]
        + [
            Column("successes", "successes", "int"),
            Column("n_scored", "scored", "int"),
            Column("n_runs", "runs", "int"),
            Column("n_unscored", "no verdict", "int"),
            Column("n_not_averaged", "error/unfinished", "int"),
            Column("rate", "success rate", "pct"),
            Column("rate_lo", "95% lo", "pct"),
            Column("rate_hi", "95% hi", "pct"),
            Column("n_costed", "runs costed", "int", hidden=True),
            Column("investigator_cost_mean_usd", "investigator cost", "usd"),
            Column("n_investigator_priced", "investigator priced runs", "int"),
            Column("target_cost_mean_usd", "target+aux cost", "usd"),
            Column("n_target_priced", "target+aux priced runs", "int"),
            Column("target_only_cost_mean_usd", "target cost", "usd", hidden=True),
            Column("auxiliary_cost_mean_usd", "auxiliary cost", "usd", hidden=True),
        ]
    )
    display = (
        [
            (c.label, (lambda k, kind: lambda r: fmt(kind, r.get(k)))(c.key, c.kind))
            for c in grouping.key_columns()
            if not c.hidden
        ]
        + ([("target", lambda r: r["target"] or "–")] if has_target else [])
        + [
            (
                "success (95% Wilson)",
                lambda r: (
                    "–"
                    if r["rate"] is None
                    else f"{r['successes']}/{r['n_scored']} = {fmt('pct', r['rate'])} [{fmt('pct', r['rate_lo'])}, {fmt('pct', r['rate_hi'])}]"
                ),
            ),
            ("runs", lambda r: str(r["n_runs"])),
            ("no verdict", lambda r: str(r["n_unscored"]) if r["n_unscored"] else ""),
            ("error/unfinished", lambda r: str(r["n_not_averaged"]) if r["n_not_averaged"] else ""),
            (
                "investigator cost",
                lambda r: _cost_cell(r["investigator_cost_mean_usd"], r["n_investigator_priced"], r["n_costed"]),
            ),
            ("target+aux cost", lambda r: _cost_cell(r["target_cost_mean_usd"], r["n_target_priced"], r["n_costed"])),
        ]
    )
    return Table(
        "any_of_n",
        "Any-of-N success rate",
        cols,
        rows,
        [
            "Success = a judge matched one of the run's predictions to the hidden behaviour. "
            "Runs without a verdict and error runs are counted, not treated as failures.",
            "Costs are means per run over error-free runs with a known cost: the investigator's own model "
            "calls, and the target + auxiliary (scaffold) + baseline model calls made through the target tools "
            "(meta.json target_tools); – = unknown, never 0.",
        ],
        display,
    )


def _elo_cell(r: dict[str, Any]) -> str:
    """Elo with its interval; an auditor that played no match gets "–" for the interval, never a
    zero-width one (older ratings.json files carry one: matches == 0 decides)."""
    if r["elo"] is None:
        return NA
    if not r.get("matches"):
        return f"{r['elo']:.0f} ({NA})"
    return f"{r['elo']:.0f} ({r['lo']:.0f}–{r['hi']:.0f})" if r["lo"] is not None else f"{r['elo']:.0f}"


ONE_ENVIRONMENT_NOTE = (
    "No interval: the tournament was played on one environment, and the bootstrap resamples environments "
    "(every round would be that one), so nothing separates the auditors' ranks and their Elo differences are "
    "not tested."
)


def one_environment(ratings: dict[str, Any]) -> bool:
    """Rated auditors without an interval: ratings.json from a tournament on one environment (an
    auditor that played no match has none either, for its own reason, noted apart)."""
    rated = [r for r in ratings.get("leaderboard") or [] if isinstance(r, dict) and r.get("matches")]
    return bool(rated) and all(r.get("lo") is None for r in rated)


def tournament_tables(ratings: dict[str, Any]) -> list[Table]:
    out: list[Table] = []
    lb = ratings.get("leaderboard") or []
    rows = [
        {
            k: r.get(k)
            for k in ("rank", "auditor", "elo", "lo", "hi", "matches", "environments", "runs", "mean_share", "cost_usd")
        }
        for r in lb
    ]
    cols = [
        Column("rank", "rank", "int"),
        Column("auditor", "auditor"),
        Column("elo", "Elo", "float"),
        Column("lo", "95% lo", "float"),
        Column("hi", "95% hi", "float"),
        Column("matches", "matches", "int"),
        Column("environments", "envs", "int"),
        Column("runs", "runs", "int"),
        Column("mean_share", "mean share", "pct"),
        Column("cost_usd", "total cost", "usd"),
    ]
    display = [
        ("rank", lambda r: fmt("int", r["rank"])),
        ("auditor", lambda r: r["auditor"]),
        ("Elo (95% CI)", _elo_cell),
        ("matches", lambda r: fmt("int", r["matches"])),
        ("envs", lambda r: fmt("int", r["environments"])),
        ("mean share", lambda r: fmt("pct", r["mean_share"])),
        ("total cost", lambda r: fmt("usd", r["cost_usd"])),
    ]
    notes = [
        f"Bradley–Terry fit on the Elo scale (mean 1000; +100 ≈ 64% expected share), weighting "
        f"{ratings.get('weighting', '?')}, {ratings.get('bootstrap_rounds', '?')} bootstrap rounds over "
        f"environments; rank = 1 + auditors whose interval lies wholly above. Auditor = {ratings.get('auditor_key', '?')}.",
        "Total cost = the sum of the agent cost (meta.json cost_usd) over the auditor's runs; – when any "
        "of them is unknown.",
    ]
    if one_environment(ratings):  # the note above promises bootstrap intervals: say why there are none
        notes.append(ONE_ENVIRONMENT_NOTE)
    flags = ratings.get("flags") or {}
    if flags.get("disconnected"):
        notes.append(
            "WARNING: the match graph is disconnected; ratings across components are not comparable: "
            + " | ".join(", ".join(c) for c in flags.get("components", []))
        )
    if flags.get("prior_used"):
        notes.append(
            f"A small prior was used (weight {flags.get('prior_weight')}) because the maximum-likelihood fit does not exist."
        )
    if flags.get("failed_envs"):
        notes.append("Environments left out (judge failed): " + ", ".join(flags["failed_envs"]))
    if flags.get("excluded_runs"):
        notes.append(
            f"{len(flags['excluded_runs'])} runs were excluded from the tournament because their issues "
            f"could not be read (invalid issues.json, or the judge failed to extract them; the reason is "
            f"in grades/tournament/canonical/<env>.json excluded_runs): "
            + ", ".join(flags["excluded_runs"][:10])
            + (" ..." if len(flags["excluded_runs"]) > 10 else "")
        )
    if flags.get("match_rows_omitted"):
        notes.append(
            "Per-match rows were omitted from ratings.json (too many run-vs-run matches to list), so there "
            "is no match table; the ratings use every match."
        )
    if flags.get("unrated_auditors"):
        notes.append(
            f"Played no match, so not rated (its Elo is not a measurement: no interval, no rank): "
            f"{', '.join(flags['unrated_auditors'])}"
            + (" — a tournament needs at least two auditors on an environment." if len(rows) == 1 else ".")
        )
    if flags.get("no_issue_runs"):
        notes.append(f"{len(flags['no_issue_runs'])} runs entered with no issues artifact (score 0).")
    out.append(Table("tournament", "Tournament (Elo)", cols, rows, notes, display))

    ov = ratings.get("overlap") or {}
    auditors = ov.get("auditors") or []
    if auditors:
        orows = [
            {"auditor": a}
            | {
                b: (ov["values"][i][j] if i < len(ov["values"]) and j < len(ov["values"][i]) else None)
                for j, b in enumerate(auditors)
            }
            for i, a in enumerate(auditors)
        ]
        out.append(
            Table(
                "overlap",
                "Issue overlap (share of row's supported issues the column also found)",
                [Column("auditor", "auditor")] + [Column(b, b, "pct") for b in auditors],
                orows,
            )
        )

    mrows = []
    for env in ratings.get("environments") or []:
        for m in env.get("matches") or []:
            mrows.append(
                {
                    "env": env.get("env"),
                    "a": m.get("a"),
                    "b": m.get("b"),
                    "run_a": m.get("run_a"),
                    "run_b": m.get("run_b"),
                    "cancelled": len(m.get("cancelled") or []),
                    "points_a": m.get("points_a"),
                    "points_b": m.get("points_b"),
                    "share_a": m.get("share_a"),
                    "outcome": m.get("outcome"),
                }
            )
    if mrows:
        mcols = [
            Column("env", "environment"),
            Column("a", "auditor A"),
            Column("b", "auditor B"),
            Column("run_a", "run A", hidden=True),
            Column("run_b", "run B", hidden=True),
            Column("cancelled", "shared", "int"),
            Column("points_a", "A points", "float"),
            Column("points_b", "B points", "float"),
            Column("share_a", "A share", "pct"),
            Column("outcome", "outcome"),
        ]
        out.append(Table("matches", "Tournament matches per environment", mcols, mrows))
    return out
