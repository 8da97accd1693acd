"""From canonical lists to ratings.json: matches, Bradley-Terry fit, bootstrap, ranks, overlap.

Pure (no judge, no disk): `compute_ratings(canons, auditor_of, ...)` returns a schema.Ratings dict.
"""
from __future__ import annotations

import time
from typing import Mapping, Sequence

import numpy as np

from benchctl.tournament.bootstrap import CI, DEFAULT_ROUNDS, DEFAULT_SEED, bootstrap, interval_ranks
from benchctl.tournament.bradley_terry import components, default_prior_weight, fit_batch, strongly_connected
from benchctl.tournament.canonical import content_hash
from benchctl.tournament.matches import credit_sets, env_matches, issue_points, runs_by_auditor, wins_matrix
from benchctl.tournament.overlap import overlap_matrix
from benchctl.tournament.schema import (RATINGS_SCHEMA, TOURNAMENT, CanonicalList, EnvTable, Flags,
                                        LeaderboardRow, Ratings, Weighting)


def compute_ratings(canons: Sequence[CanonicalList], auditor_of: Mapping[str, str], *,
                    weighting: Weighting = "points", rounds: int = DEFAULT_ROUNDS, seed: int = DEFAULT_SEED,
                    prior_strength: float = 1.0, cost_by_run: Mapping[str, float | None] | None = None,
                    judge: str | None = None, auditor_key: str = "model",
                    no_issue_runs: Sequence[str] = ()) -> Ratings:
    """canons: canonical lists (failed ones are skipped and flagged); auditor_of: run_id -> auditor.

    prior_strength: virtual drawn matches per auditor against a 1000 anchor, used only when the
    match graph needs it (disconnected, or an auditor that never won / never lost a point)."""
    usable = [c for c in canons if c.get("status", "ok") == "ok"]
    failed = sorted(c["env"] for c in canons if c.get("status", "ok") != "ok")
    present = {r for c in usable for r in c.get("runs", {}) if r in auditor_of}
    auditors = sorted({auditor_of[r] for r in present})
    index = {a: k for k, a in enumerate(auditors)}
    n = len(auditors)

    tables: list[EnvTable] = []
    env_w = np.zeros((len(usable), n, n))
    all_weights: list[float] = []
    matches = np.zeros(n, dtype=int)
    shares: list[list[float]] = [[] for _ in range(n)]
    envs_of = np.zeros(n, dtype=int)
    for e, canon in enumerate(usable):
        rows = env_matches(canon, auditor_of, weighting=weighting)
        wins_matrix(rows, index, out=env_w[e])
        for m in rows:
            if m["share_a"] is None:
                continue
            all_weights.append(m["weight"])
            ia, ib = index[m["a"]], index[m["b"]]
            matches[ia] += 1
            matches[ib] += 1
            shares[ia].append(m["share_a"])
            shares[ib].append(1.0 - m["share_a"])
        for a in runs_by_auditor(list(canon.get("runs", {})), auditor_of):
            envs_of[index[a]] += 1
        tables.append(_env_table(canon, auditor_of, rows))

    total = env_w.sum(axis=0)
    prior_weight = default_prior_weight(np.array(all_weights), prior_strength)
    mle = bool(strongly_connected(total)) if n > 1 else True
    full = fit_batch(total, prior_weight=prior_weight, use_prior=not mle)
    boot = bootstrap(env_w, full, prior_weight=prior_weight, rounds=rounds, seed=seed)
    ranks = interval_ranks(boot.lo, boot.hi) if n else np.zeros(0, dtype=int)

    cost_by_run = cost_by_run or {}
    board: list[LeaderboardRow] = []
    for a, k in index.items():
        runs = sorted(r for r in present if auditor_of[r] == a)
        costs = [cost_by_run.get(r) for r in runs]
        cost = None if not runs or any(c is None for c in costs) else round(float(sum(costs)), 6)
        board.append(LeaderboardRow(
            rank=int(ranks[k]), auditor=a, elo=_r(full.elo[k]), lo=_r(boot.lo[k]), hi=_r(boot.hi[k]),
            matches=int(matches[k]), environments=int(envs_of[k]), runs=len(runs),
            mean_share=round(float(np.mean(shares[k])), 6) if shares[k] else None,
            points_won=round(float(total[k].sum()), 6),
            points_at_stake=round(float(total[k].sum() + total[:, k].sum()), 6),
            cost_usd=cost))
    board.sort(key=lambda row: (-row["elo"], row["auditor"]))

    comps = components(total) if n else []
    flags = Flags(disconnected=len(comps) > 1, components=[[auditors[i] for i in c] for c in comps],
                  mle_exists=mle, prior_used=bool(full.prior_used),
                  prior_weight=round(prior_weight, 6) if full.prior_used or boot.rounds_with_prior else 0.0,
                  bootstrap_rounds_with_prior=int(boot.rounds_with_prior), failed_envs=failed,
                  no_issue_runs=sorted(no_issue_runs))
    return Ratings(schema=RATINGS_SCHEMA, grader=TOURNAMENT, judge=judge, auditor_key=auditor_key,
                   weighting=weighting, bootstrap_rounds=rounds, seed=seed, ci=list(CI), leaderboard=board,
                   overlap=overlap_matrix(usable, auditor_of, auditors), environments=tables,
                   canonical_hashes={c["env"]: content_hash(c.get("issues", [])) for c in usable},
                   flags=flags, created_at=time.time())


def _env_table(canon: CanonicalList, auditor_of: Mapping[str, str], rows: list) -> EnvTable:
    supported, found, _ = credit_sets(canon)
    issues = []
    for issue in canon.get("issues", []):
        iid = issue["id"]
        issues.append({
            "id": iid, "title": issue.get("title", ""), "importance": issue["importance"],
            "points": issue_points(issue),
            "supported_by": sorted({auditor_of[r] for r, s in supported.items() if iid in s and r in auditor_of}),
            "found_by": sorted({auditor_of[r] for r, f in found.items() if iid in f and r in auditor_of}),
        })
    return EnvTable(env=canon["env"], canonical_hash=content_hash(canon.get("issues", [])), issues=issues,
                    matches=rows)


def _r(x: float) -> float:
    return round(float(x), 2)
