"""From canonical lists to ratings.json: matches, Bradley-Terry fit, bootstrap, ranks, overlap.

Pure (no judge, no disk): `compute_ratings(canons, auditor_of, ...)` returns a schema.Ratings dict.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchctl.tournament.bootstrap import CI, DEFAULT_ROUNDS, DEFAULT_SEED, bootstrap, interval_ranks, pairwise
from benchctl.tournament.bradley_terry import ELO_MEAN, components, default_prior_weight, fit_batch, strongly_connected
from benchctl.tournament.canonical import list_hash, unverified_issues, verdict_of
from benchctl.tournament.matches import EnvArrays, credit_sets, env_matches, issue_points
from benchctl.tournament.overlap import overlap_matrix
from benchctl.tournament.schema import (
    RATINGS_SCHEMA,
    TOURNAMENT,
    VERDICTS,
    CanonicalList,
    EnvTable,
    Flags,
    LeaderboardRow,
    Ratings,
    VerifySummary,
    Weighting,
)

MAX_TABLE_MATCHES = 50_000  # above this many run-vs-run matches, per-env match rows are left out


def compute_ratings(
    canons: Sequence[CanonicalList],
    auditor_of: Mapping[str, str],
    *,
    weighting: Weighting = "points",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    prior_strength: float = 1.0,
    cost_by_run: Mapping[str, float | None] | None = None,
    judge: str | None = None,
    auditor_key: str = "model",
    no_issue_runs: Sequence[str] = (),
    match_tables: bool | None = None,
) -> Ratings:
    return compute(
        canons,
        auditor_of,
        weighting=weighting,
        rounds=rounds,
        seed=seed,
        prior_strength=prior_strength,
        cost_by_run=cost_by_run,
        judge=judge,
        auditor_key=auditor_key,
        no_issue_runs=no_issue_runs,
        match_tables=match_tables,
    )[0]


def compute(
    canons: Sequence[CanonicalList],
    auditor_of: Mapping[str, str],
    *,
    weighting: Weighting = "points",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    prior_strength: float = 1.0,
    cost_by_run: Mapping[str, float | None] | None = None,
    judge: str | None = None,
    auditor_key: str = "model",
    no_issue_runs: Sequence[str] = (),
    match_tables: bool | None = None,
) -> tuple[Ratings, dict[str, float | None]]:
    """Ratings, plus each run's mean share over its non-skipped matches (None when it had none).

    canons: canonical lists (failed ones are skipped and flagged); auditor_of: run_id -> auditor.
    prior_strength: virtual drawn matches per auditor against a 1000 anchor, used only when the
    match graph needs it (disconnected, or an auditor that never won / never lost a point).
    match_tables: include every match row per environment; None = only up to MAX_TABLE_MATCHES."""
    ok = [c for c in canons if c.get("status", "ok") == "ok"]
    usable = [c for c in ok if not unverified_issues(c)]
    failed = sorted(c["env"] for c in canons if c.get("status", "ok") != "ok")
    unverified = sorted(c["env"] for c in ok if unverified_issues(c))
    present = {r for c in usable for r in c.get("runs", {}) if r in auditor_of}
    auditors = sorted({auditor_of[r] for r in present})
    index = {a: k for k, a in enumerate(auditors)}
    n = len(auditors)

    envs = [EnvArrays(c, auditor_of, index, weighting) for c in usable]
    env_w = np.stack([e.wins for e in envs]) if envs else np.zeros((0, n, n))
    counts = sum((e.counts for e in envs), np.zeros((n, n)))
    share_sums = sum((e.share_sums for e in envs), np.zeros((n, n)))
    envs_of = sum((e.group.sum(axis=1) > 0 for e in envs), np.zeros(n)).astype(int)
    all_weights = np.concatenate([e.match_weights for e in envs]) if envs else np.zeros(0)
    run_scores: dict[str, float | None] = {}
    for e in envs:
        for k, r in enumerate(e.runs):
            m = int(e.run_matches[k])
            run_scores[r] = round(float(e.run_share_sum[k] / m), 6) if m else None

    total = env_w.sum(axis=0)
    # An auditor that played no (non-skipped) match -- the only auditor, or one whose every match had
    # nothing left -- has nothing to be fitted to. It is left out of the fit: in it, it would make the
    # match graph disconnected, switch on the prior and move every rated auditor (and shift the
    # centring). It is listed with no interval and no rank, at the centre of the scale (its Elo is no
    # measurement), and flagged.
    played_by = counts.sum(axis=1)
    rated = np.flatnonzero(played_by > 0)
    unrated = [a for a, k in index.items() if not played_by[k]]
    fit_total = total[np.ix_(rated, rated)]
    prior_weight = default_prior_weight(all_weights, prior_strength)
    mle = bool(strongly_connected(fit_total)) if rated.size > 1 else True
    full = fit_batch(fit_total, prior_weight=prior_weight, use_prior=not mle)
    # Resampled: the environments where a match was played. One without (a lone auditor, or matches
    # with nothing left) adds nothing to any fit, but drawing it would leave a resample fewer real ones.
    fit_env_w = env_w[:, rated][:, :, rated]
    fit_env_w = fit_env_w[fit_env_w.sum(axis=(1, 2)) > 0]
    boot = bootstrap(fit_env_w, full, prior_weight=prior_weight, rounds=rounds, seed=seed)
    elo = np.full(n, ELO_MEAN)
    lo_b, hi_b = np.full(n, np.nan), np.full(n, np.nan)
    elo[rated], lo_b[rated], hi_b[rated] = full.elo, boot.lo, boot.hi
    ranks = interval_ranks(lo_b, hi_b) if n else np.zeros(0, dtype=int)

    cost_by_run = cost_by_run or {}
    runs_of: dict[str, list[str]] = {a: [] for a in index}
    for r in sorted(present):
        runs_of[auditor_of[r]].append(r)
    board: list[LeaderboardRow] = []
    for a, k in index.items():
        runs = runs_of[a]
        costs = [c for r in runs if (c := cost_by_run.get(r)) is not None]
        cost = None if not runs or len(costs) < len(runs) else round(float(sum(costs)), 6)
        played = int(counts[k].sum())
        board.append(
            LeaderboardRow(
                rank=int(ranks[k]) if played else None,
                auditor=a,
                elo=_r(elo[k]),
                lo=_r(lo_b[k]) if played and np.isfinite(lo_b[k]) else None,  # NaN: one environment, no interval
                hi=_r(hi_b[k]) if played and np.isfinite(hi_b[k]) else None,
                matches=played,
                environments=int(envs_of[k]),
                runs=len(runs),
                mean_share=round(float(share_sums[k].sum() / played), 6) if played else None,
                points_won=round(float(total[k].sum()), 6),
                points_at_stake=round(float(total[k].sum() + total[:, k].sum()), 6),
                cost_usd=cost,
            )
        )
    board.sort(key=lambda row: (row["rank"] is None, -row["elo"], row["auditor"]))  # the unrated last

    n_matches = int(all_weights.size)
    with_rows = match_tables if match_tables is not None else n_matches <= MAX_TABLE_MATCHES
    comps = [[int(rated[i]) for i in c] for c in components(fit_total)] if rated.size else []
    flags = Flags(
        disconnected=len(comps) > 1,
        components=[[auditors[i] for i in c] for c in comps],
        mle_exists=mle,
        prior_used=bool(full.prior_used),
        prior_weight=round(prior_weight, 6) if full.prior_used or boot.rounds_with_prior else 0.0,
        bootstrap_rounds_with_prior=int(boot.rounds_with_prior),
        failed_envs=failed,
        no_issue_runs=sorted(no_issue_runs),
        excluded_runs=[],
        match_rows_omitted=not with_rows,
        unrated_auditors=unrated,
        no_match_runs=sorted(r for e in envs for r in e.runs if run_scores.get(r) is None),
        unverified_envs=unverified,
    )
    tables = [
        _env_table(c, auditor_of, env_matches(c, auditor_of, weighting=weighting) if with_rows else []) for c in usable
    ]
    ratings = Ratings(
        schema=RATINGS_SCHEMA,
        grader=TOURNAMENT,
        judge=judge,
        auditor_key=auditor_key,
        weighting=weighting,
        bootstrap_rounds=rounds,
        seed=seed,
        ci=list(CI),
        leaderboard=board,
        overlap=overlap_matrix(envs, auditors),
        environments=tables,
        canonical_hashes={c["env"]: list_hash(c) for c in usable},
        flags=flags,
        verify=verify_summary(ok),
        created_at=time.time(),
        # the fit holds the rated auditors only, in `rated` order
        pairwise=pairwise(boot.samples, full.elo, [auditors[i] for i in rated], np.ones(rated.size, dtype=bool)),
    )
    return ratings, run_scores


def verify_summary(canons: Sequence[CanonicalList]) -> VerifySummary:
    """The verify mode(s) of these lists and their agent-verified issues counted by verdict."""
    modes = {c.get("verify", "judge") for c in canons}
    agent = [c for c in canons if c.get("verify", "judge") == "agent"]
    credits = {c.get("verify_credit", "confirmed") for c in agent} or {"confirmed"}
    verdicts = [verdict_of(i) for c in agent for i in c.get("issues", [])]
    counts = {v: verdicts.count(v) for v in VERDICTS}
    return VerifySummary(
        mode=modes.pop() if len(modes) == 1 else "mixed" if modes else "judge",
        credit=credits.pop() if len(credits) == 1 else "mixed",
        confirmed=counts["confirmed"],
        refuted=counts["refuted"],
        unverifiable=counts["unverifiable"],
        unverified=verdicts.count(None),
    )


def _env_table(canon: CanonicalList, auditor_of: Mapping[str, str], rows: list) -> EnvTable:
    supported, found, _ = credit_sets(canon)
    issues = []
    for issue in canon.get("issues", []):
        iid = issue["id"]
        row: dict[str, Any] = {
            "id": iid,
            "title": issue.get("title", ""),
            "importance": issue["importance"],
            "points": issue_points(issue),
            "supported_by": sorted({auditor_of[r] for r, s in supported.items() if iid in s and r in auditor_of}),
            "found_by": sorted({auditor_of[r] for r, f in found.items() if iid in f and r in auditor_of}),
        }
        if "verification" in issue:
            v = issue["verification"]
            row.update(verdict=v.get("verdict"), reason=v.get("reason", ""), verifier_run=v.get("verifier_run"))
        issues.append(row)
    return EnvTable(
        env=canon["env"],
        canonical_hash=list_hash(canon),
        issues=issues,
        matches=rows,
        verify=canon.get("verify", "judge"),
    )


def _r(x: float) -> float:
    return round(float(x), 2)


def unscored_notes(ratings: Mapping[str, Any]) -> list[str]:
    """Why some run of this tournament has no score (its grade record is unscored), one line per
    reason; empty when every run that entered has one. `benchctl grade` and `python -m
    benchctl.tournament` print these and exit 1 when there are any: the one rule for every grader."""
    flags = ratings.get("flags") or {}
    out: list[str] = []
    if failed := list(flags.get("failed_envs") or []):
        out.append(
            f"the judge failed on {len(failed)} environment(s) ({_some(failed)}); their runs are unscored. "
            f"Re-run the same command to retry them."
        )
    if excluded := list(flags.get("excluded_runs") or []):
        out.append(
            f"{len(excluded)} run(s) left out because their issues could not be read ({_some(excluded)}); "
            f"reasons in grades/tournament/canonical/<env>.json excluded_runs"
        )
    unrated = list(flags.get("unrated_auditors") or [])
    if unrated:
        alone = len(ratings.get("leaderboard") or []) == 1
        out.append(
            f"{len(unrated)} auditor(s) played no match ({_some(unrated)}): "
            + (
                "a tournament needs at least two auditors on an environment. "
                if alone
                else "no run of another auditor shared their environments, or every match had nothing left after "
                "shared issues cancelled. "
            )
            + "Their Elo is not a measurement (no match to fit it to): no interval, no rank."
        )
    if unverified := list(flags.get("unverified_envs") or []):
        out.append(
            f"{len(unverified)} environment(s) have issues the verifier could not settle ({_some(unverified)}); "
            f"their runs are unscored. Reasons in grades/tournament/canonical/<env>.json (verification.reason); "
            f"re-run the same command to retry them."
        )
    if no_match := list(flags.get("no_match_runs") or []):
        out.append(f"{len(no_match)} run(s) played no match and are unscored ({_some(no_match)})")
    return out


def _some(names: Sequence[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f" ... (+{len(names) - limit})" if len(names) > limit else "")
