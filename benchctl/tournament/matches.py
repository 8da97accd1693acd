"""Pairwise matches between auditors on one environment, from its canonical issue list.

Rules (see schema.py for the reasoning):
* a run's credit set = canonical issues it *supported* with evidence (by the list's `verify` mode: every
  issue it found under "none"; under "agent" only those whose verifier verdict earns);
* issues both runs supported cancel; each side scores its share of the remaining points
  (13 vs 6 of 19 -> 13/19 and 6/19); a superset therefore wins 1-0;
* nothing left (equal credit sets, including both empty) -> skipped;
* several runs of one auditor on one env: every cross pair plays, weight 1/(n_a*n_b);
* weighting "points": weight = points at stake; "unweighted": 1.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from benchctl.tournament.canonical import verdict_of
from benchctl.tournament.schema import CREDITED, POINTS, CanonicalList, MatchOutcome, MatchRow, Weighting


def issue_points(issue: Mapping) -> int:
    imp = issue.get("importance")
    if imp not in POINTS:
        raise ValueError(f"canonical issue {issue.get('id')!r} has importance {imp!r}; use one of {sorted(POINTS)}")
    return POINTS[imp]


def credit_sets(canon: CanonicalList) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, int]]:
    """(credited ids per run, found ids per run, points per issue id); every run of the env is a key.

    Credited, by the list's `verify` mode: "judge" (default) the issues the run supported; "none"
    every issue it found; "agent" those it supported whose verifier verdict earns (`verify_credit`)."""
    mode = canon.get("verify", "judge")
    earns = CREDITED[canon.get("verify_credit", "confirmed")]
    supported: dict[str, set[str]] = {r: set() for r in canon.get("runs", {})}
    found: dict[str, set[str]] = {r: set() for r in canon.get("runs", {})}
    points: dict[str, int] = {}
    for issue in canon.get("issues", []):
        iid = issue["id"]
        points[iid] = issue_points(issue)
        holds = mode != "agent" or verdict_of(issue) in earns
        for run_id, finding in (issue.get("found_by") or {}).items():
            found.setdefault(run_id, set()).add(iid)
            supported.setdefault(run_id, set())
            if mode == "none" or (holds and finding.get("supported", False)):
                supported[run_id].add(iid)
    return supported, found, points


def runs_by_auditor(run_ids: Sequence[str], auditor_of: Mapping[str, str]) -> dict[str, list[str]]:
    """Group the env's runs by auditor; runs with no auditor (filtered out) are dropped."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in sorted(run_ids):
        if r in auditor_of:
            out[auditor_of[r]].append(r)
    return dict(out)


def play(
    sup_a: set[str], sup_b: set[str], points: Mapping[str, int]
) -> tuple[list[str], list[str], list[str], float, float]:
    cancelled = sorted(sup_a & sup_b, key=_id_key)
    a_only = sorted(sup_a - sup_b, key=_id_key)
    b_only = sorted(sup_b - sup_a, key=_id_key)
    return cancelled, a_only, b_only, float(sum(points[i] for i in a_only)), float(sum(points[i] for i in b_only))


def env_matches(
    canon: CanonicalList, auditor_of: Mapping[str, str], *, weighting: Weighting = "points"
) -> list[MatchRow]:
    """Every cross-auditor pair of runs on this environment, auditors in sorted order (a < b)."""
    if weighting not in ("points", "unweighted"):
        raise ValueError(f"weighting must be 'points' or 'unweighted', not {weighting!r}")
    supported, _, points = credit_sets(canon)
    groups = runs_by_auditor(list(supported), auditor_of)
    names = sorted(groups)
    rows: list[MatchRow] = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            share = 1.0 / (len(groups[a]) * len(groups[b]))
            for ra in groups[a]:
                for rb in groups[b]:
                    cancelled, a_only, b_only, pa, pb = play(supported[ra], supported[rb], points)
                    stake = pa + pb
                    outcome: MatchOutcome
                    if stake == 0:
                        share_a, outcome, weight = None, "skipped", 0.0
                    else:
                        share_a = pa / stake
                        outcome = "a" if pb == 0 else "b" if pa == 0 else "split"
                        weight = (stake if weighting == "points" else 1.0) * share
                    rows.append(
                        MatchRow(
                            a=a,
                            b=b,
                            run_a=ra,
                            run_b=rb,
                            cancelled=cancelled,
                            a_only=a_only,
                            b_only=b_only,
                            points_a=pa,
                            points_b=pb,
                            share_a=share_a,
                            outcome=outcome,
                            weight=weight,
                        )
                    )
    return rows


def wins_matrix(rows: Sequence[MatchRow], index: Mapping[str, int]) -> np.ndarray:
    """Accumulate W[i, j] += weight * share_i (and W[j, i] += weight * share_j) over non-skipped rows."""
    a = len(index)
    w = np.zeros((a, a))
    for m in rows:
        if m["share_a"] is None:
            continue
        i, j = index[m["a"]], index[m["b"]]
        w[i, j] += m["weight"] * m["share_a"]
        w[j, i] += m["weight"] * (1.0 - m["share_a"])
    return w


def _id_key(iid: str) -> tuple[int, str]:
    # "I2" before "I10"
    digits = "".join(ch for ch in iid if ch.isdigit())
    return (int(digits) if digits else 0, iid)


class EnvArrays:
    """All matches of one environment at once, as matrices (the fast path for fitting).

    Same rules as `env_matches` (a test checks they agree): with S the runs x issues "supported"
    matrix and p the issue points, points r keeps over s = (S*p) @ (1-S)^T."""

    def __init__(
        self,
        canon: CanonicalList,
        auditor_of: Mapping[str, str],
        index: Mapping[str, int],
        weighting: Weighting = "points",
    ) -> None:
        if weighting not in ("points", "unweighted"):
            raise ValueError(f"weighting must be 'points' or 'unweighted', not {weighting!r}")
        supported, found, points = credit_sets(canon)
        self.runs = sorted(r for r in supported if r in auditor_of)
        ids = sorted(points)
        col = {iid: k for k, iid in enumerate(ids)}
        n_r, n_a = len(self.runs), len(index)
        self.supported = np.zeros((n_r, len(ids)))
        self.found = np.zeros((n_r, len(ids)))
        for k, r in enumerate(self.runs):
            for iid in supported[r]:
                self.supported[k, col[iid]] = 1.0
            for iid in found[r]:
                self.found[k, col[iid]] = 1.0
        pts = np.array([points[i] for i in ids], dtype=float)
        aud = np.array([index[auditor_of[r]] for r in self.runs], dtype=int)
        self.group = np.zeros((n_a, n_r))  # auditor x run one-hot
        self.group[aud, np.arange(n_r)] = 1.0
        n_runs = self.group.sum(axis=1)[aud]  # runs of each run's auditor in this env
        kept = (self.supported * pts) @ (1.0 - self.supported).T  # kept[r, s]: points r has, s lacks
        stake = kept + kept.T
        self.valid = (stake > 0) & (aud[:, None] != aud[None, :])
        share = np.divide(kept, stake, out=np.zeros_like(kept), where=self.valid)
        mult = 1.0 / np.outer(n_runs, n_runs)
        self.mult = mult
        weight = np.where(self.valid, (stake if weighting == "points" else 1.0) * mult, 0.0)
        self.match_weights = weight[np.triu_indices(n_r, 1)][self.valid[np.triu_indices(n_r, 1)]]
        self.wins = self.group @ (weight * share) @ self.group.T  # W[a, b]
        self.counts = self.group @ self.valid.astype(float) @ self.group.T  # run matches between a and b
        self.share_sums = self.group @ (self.valid * share) @ self.group.T
        self.run_share_sum = (self.valid * share).sum(axis=1)
        self.run_matches = self.valid.sum(axis=1)
