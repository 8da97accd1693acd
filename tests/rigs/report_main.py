"""The report tests' main results directory (its numbers computed by hand) and a tournament's ratings
for it, and the states the loader meets on disk: files old enough to be cached, a killed run."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.rigs.report import add_grade, add_run, coverage_items

A, B, OLD = "prov/model-a", "prov/model-b", "prov/model-old"
CLUSTER = {"F1": "operators", "F2": "operators", "F3": "timeline"}


def build_main(root: Path) -> None:
    """Model A 10m: 3 clean runs. Model B 10m: 2 fallbacks, one unscored. Model B 30m: error + refused."""
    for seed, (comb, cov, tl, cost, el) in enumerate(
        [(0.4, 0.3, 0.6, 1.0, 500), (0.5, 0.4, 0.8, 2.0, 550), (0.6, 0.5, 0.9, 3.0, 600)]
    ):
        rid = add_run(root, model=A, seed=seed, cost_usd=cost, elapsed_s=el)
        add_grade(root, "combined", rid, comb)
        add_grade(
            root,
            "coverage",
            rid,
            cov,
            by_cluster={"operators": cov + 0.1, "timeline": cov - 0.1},
            items=coverage_items({"F1": 1.0, "F2": 0.0 if seed else 0.4, "F3": None if seed == 2 else 0.0}, CLUSTER),
        )
        add_grade(root, "tldr", rid, tl)
    # follow-ups of A's seeds 0 and 1: gains 0.2 and 0.05
    add_grade(root, "coverage", add_run(root, model=A, seed=0, cost_usd=1.0, elapsed_s=500), 0.5, tag="followup-1")
    add_grade(root, "coverage", add_run(root, model=A, seed=1, cost_usd=2.0, elapsed_s=550), 0.45, tag="followup-1")
    fb = [{"t": 100.0, "from": B, "to": OLD, "reason": "refusal"}]
    r0 = add_run(root, model=B, seed=0, cost_usd=None)
    add_grade(root, "combined", r0, 0.2)
    r1 = add_run(root, model=B, seed=1, cost_usd=0.5, fallbacks=fb)
    add_grade(root, "combined", r1, 0.3)
    r2 = add_run(root, model=B, seed=2, cost_usd=0.5, fallbacks=fb)
    add_grade(root, "combined", r2, None)  # judge failed: unscored, not 0
    e0 = add_run(root, model=B, budget="30m", budget_s=1800, seed=0, status="error", error="sandbox died")
    add_grade(root, "combined", e0, 0.9)  # a grade of an error run is never averaged
    r4 = add_run(root, model=B, budget="30m", budget_s=1800, seed=1)
    add_grade(root, "combined", r4, 0.5)
    r5 = add_run(root, model=B, budget="30m", budget_s=1800, seed=2, status="refused")
    add_grade(root, "combined", r5, 0.0)


RATINGS = {
    "schema": 1,
    "grader": "tournament",
    "judge": "judge/dedup",
    "auditor_key": "model",
    "weighting": "points",
    "bootstrap_rounds": 200,
    "seed": 0,
    "ci": [2.5, 97.5],
    "leaderboard": [
        {
            "rank": 1,
            "auditor": A,
            "elo": 1100.0,
            "lo": 1050.0,
            "hi": 1160.0,
            "matches": 6,
            "environments": 2,
            "runs": 4,
            "mean_share": 0.64,
            "points_won": 20,
            "points_at_stake": 30,
            "cost_usd": 4.5,
        },
        {
            "rank": 2,
            "auditor": B,
            "elo": 900.0,
            "lo": 840.0,
            "hi": 950.0,
            "matches": 6,
            "environments": 2,
            "runs": 4,
            "mean_share": 0.36,
            "points_won": 10,
            "points_at_stake": 30,
            "cost_usd": None,
        },
    ],
    "overlap": {"auditors": [A, B], "values": [[None, 0.5], [0.75, None]]},
    "environments": [
        {
            "env": "envx",
            "canonical_hash": "c1",
            "issues": [],
            "matches": [
                {
                    "a": A,
                    "b": B,
                    "run_a": "r1",
                    "run_b": "r2",
                    "cancelled": ["I1"],
                    "a_only": ["I2", "I3"],
                    "b_only": ["I4"],
                    "points_a": 13.0,
                    "points_b": 6.0,
                    "share_a": 13 / 19,
                    "outcome": "split",
                    "weight": 19.0,
                }
            ],
        }
    ],
    "canonical_hashes": {"envx": "c1"},
    "flags": {
        "disconnected": False,
        "components": [[A, B]],
        "mle_exists": True,
        "prior_used": False,
        "prior_weight": 0.0,
        "bootstrap_rounds_with_prior": 0,
        "failed_envs": [],
        "no_issue_runs": [],
    },
    "created_at": 0.0,
}


def age_all(root: Path, seconds: float = 100) -> None:
    """Make every file old enough to be cached (fresh files are deliberately not cached)."""
    t = time.time() - seconds
    for p in root.rglob("*.json"):
        os.utime(p, (t, t))


def killed_run(root: Path, run_id: str, spec: dict | None) -> Path:
    """The state a SIGKILL leaves: a transcript (written live by the real writer), maybe artifacts, no meta.json."""
    from benchctl.transcript import TranscriptWriter

    d = root / "runs" / run_id
    (d / "artifacts").mkdir(parents=True)
    (d / "artifacts" / "report.md").write_text("half a report\n")
    with TranscriptWriter(d / "transcript.jsonl", redactor=None) as t:
        if spec is not None:
            t.emit("run_start", "runner", run_id=run_id, spec=spec, task_hash="sha256:task1", budget_s=spec["budget_s"])
        t.emit("model_call", "gateway", call_id="call-1")
    return d
