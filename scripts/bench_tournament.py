#!/usr/bin/env python3
"""Time the tournament rating step on synthetic tournaments and print a table.

Goal (issue 7): Bradley-Terry fit + 1,000 bootstrap rounds for 50 auditors x 500 environments in
under 5 s. Also timed: building the match matrices from canonical lists, the per-match table rows, and the whole
`compute_ratings` (matches + fit + bootstrap + overlap + tables).

`--rate-command SIZE` (issue 12) times the whole `python -m benchctl.tournament rate RESULTS` command,
as a user runs it, on a results directory written for that size (one meta.json per run, one
canonical list per environment): process start and imports, reading every canonical list and
meta.json, the fit, writing ratings.json and one grade file per run, and the final sync. Run
twice: the first pass writes every grade file, the second finds them unchanged. cpu_s is the
child's user + system CPU time: on a shared machine it moves less than the wall time.

    python scripts/bench_tournament.py                 # default sizes
    python scripts/bench_tournament.py --sizes 50x500 --rounds 1000
    python scripts/bench_tournament.py --rate-command 50x500 [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchctl import jsonio
from benchctl.tournament.bootstrap import bootstrap
from benchctl.tournament.bradley_terry import default_prior_weight, fit_batch
from benchctl.tournament.matches import EnvArrays, env_matches
from benchctl.tournament.ratings import compute_ratings


def synthetic(n_aud: int, n_env: int, seed: int = 0) -> tuple[list[dict], dict[str, str]]:
    """Every auditor runs every env once. Each env has 5-15 canonical issues; auditor k finds each with a probability set by its strength,
    and supports 90 % of what it finds."""
    rng = np.random.default_rng(seed)
    p_find = 1 / (1 + np.exp(-rng.normal(0, 1, n_aud)))
    imps = np.array(["low", "medium", "high"])
    canons, auditor_of = [], {}
    for e in range(n_env):
        runs = [f"e{e}__a{k}" for k in range(n_aud)]
        for k, r in enumerate(runs):
            auditor_of[r] = f"aud{k:03d}"
        n_iss = int(rng.integers(5, 16))
        found = rng.random((n_iss, n_aud)) < p_find[None, :]
        sup = rng.random((n_iss, n_aud)) < 0.9
        issues = [
            {
                "id": f"I{i + 1}",
                "importance": str(imps[rng.integers(0, 3)]),
                "found_by": {runs[k]: {"supported": bool(sup[i, k])} for k in np.flatnonzero(found[i])},
            }
            for i in range(n_iss)
        ]
        canons.append({"env": f"env{e:04d}", "status": "ok", "runs": {r: {} for r in runs}, "issues": issues})
    return canons, auditor_of


def bench(n_aud: int, n_env: int, rounds: int, full_pipeline: bool) -> dict[str, float | str]:
    canons, auditor_of = synthetic(n_aud, n_env)
    names = sorted(set(auditor_of.values()))
    index = {a: k for k, a in enumerate(names)}

    t0 = time.perf_counter()
    envs = [EnvArrays(c, auditor_of, index) for c in canons]  # the matrix path used for fitting
    env_w = np.stack([e.wins for e in envs])
    weights = np.concatenate([e.match_weights for e in envs])
    t_matches = time.perf_counter() - t0
    t0 = time.perf_counter()
    sum(len(env_matches(c, auditor_of)) for c in canons)  # the per-match rows of the tables
    t_rows = time.perf_counter() - t0

    prior = default_prior_weight(weights)
    t0 = time.perf_counter()
    full = fit_batch(env_w.sum(0), prior_weight=prior)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    boot = bootstrap(env_w, full, prior_weight=prior, rounds=rounds, seed=0)
    t_boot = time.perf_counter() - t0

    row: dict[str, float | str] = {
        "size": f"{n_aud}x{n_env}",
        "matches": len(weights),
        "build_s": t_matches,
        "rows_s": t_rows,
        "fit_s": t_fit,
        "fit_iter": full.iterations,
        "boot_s": t_boot,
        "fit+boot_s": t_fit + t_boot,
        "ci_width": float(np.mean(boot.hi - boot.lo)),
        "pipeline_s": float("nan"),
        "json_mb": float("nan"),
    }
    if full_pipeline:
        t0 = time.perf_counter()
        ratings = compute_ratings(canons, auditor_of, rounds=rounds)
        row["pipeline_s"] = time.perf_counter() - t0
        row["json_mb"] = len(jsonio.dumps(ratings)) / 1e6
    return row


def write_results(root: Path, canons: list[dict], auditor_of: dict[str, str]) -> None:
    """A results directory as `benchctl run` + the tournament judge leave it (plain writes: throwaway)."""
    from benchctl.tournament.canonical import canonical_path

    for c in canons:
        for r in c["runs"]:
            c["runs"][r] = {
                "task": c["env"],
                "harness": "react",
                "model": auditor_of[r],
                "budget": "10m",
                "variant": None,
                "seed": 0,
                "source": "issues.json",
                "n_issues": 1,
            }
            meta = {
                "schema": 1,
                "run_id": r,
                "status": "completed",
                "task": c["env"],
                "harness": "react",
                "model": auditor_of[r],
                "budget": "10m",
                "seed": 0,
                "cost_usd": 0.25,
            }
            d = root / "runs" / r
            d.mkdir(parents=True)
            (d / "meta.json").write_bytes(jsonio.dumps(meta))
        for i in c["issues"]:
            i["title"] = f"issue {i['id']}"
        p = canonical_path(root, c["env"])
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(jsonio.dumps(c, pretty=True))


def bench_rate_command(size: str, rounds: int, keep: str | None) -> None:
    n_aud, n_env = (int(x) for x in size.lower().split("x"))
    canons, auditor_of = synthetic(n_aud, n_env)
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="bench-rate-"))
    try:
        t0 = time.perf_counter()
        write_results(root, canons, auditor_of)
        print(
            f"results dir for {size}: {len(auditor_of):,} runs, {len(canons)} canonical lists "
            f"(written in {time.perf_counter() - t0:.1f} s) at {root}"
        )
        env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")}
        print(f"{'pass':>32} {'wall_s':>8} {'cpu_s':>7} {'exit':>5}")
        for label in ("first (every grade file new)", "second (grade files unchanged)"):
            t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            p = subprocess.run(
                [sys.executable, "-m", "benchctl.tournament", "rate", str(root), "--rounds", str(rounds)],
                env=env,
                capture_output=True,
                text=True,
            )
            wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            print(f"{label:>32} {wall:>8.2f} {cpu:>7.2f} {p.returncode:>5}", flush=True)
            if p.returncode not in (0, 1):
                print(p.stderr, file=sys.stderr)
                break
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="5x20,10x50,20x200,50x500", help="comma-separated AUDITORSxENVS")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--no-pipeline", action="store_true", help="skip the whole compute_ratings timing")
    ap.add_argument(
        "--rate-command",
        metavar="AxE",
        help="time the whole `python -m benchctl.tournament rate` command on a results directory of this size instead",
    )
    ap.add_argument("--keep", metavar="DIR", help="with --rate-command: build the results directory here and keep it")
    args = ap.parse_args()
    if args.rate_command:
        bench_rate_command(args.rate_command, args.rounds, args.keep)
        return
    cols = [
        "size",
        "matches",
        "build_s",
        "rows_s",
        "fit_s",
        "fit_iter",
        "boot_s",
        "fit+boot_s",
        "ci_width",
        "pipeline_s",
        "json_mb",
    ]
    print(f"bootstrap rounds: {args.rounds}; cores: {os.cpu_count()}; numpy {np.__version__}")
    print(" ".join(f"{c:>11}" for c in cols))
    for size in args.sizes.split(","):
        a, e = (int(x) for x in size.lower().split("x"))
        row = bench(a, e, args.rounds, not args.no_pipeline)
        print(" ".join(f"{row[c]:>11.3f}" if isinstance(row[c], float) else f"{row[c]:>11}" for c in cols), flush=True)
    print(
        "build_s: match matrices from canonical lists (numpy, the fitting path); rows_s: per-match table rows "
        "(Python;\nonly built up to ratings.MAX_TABLE_MATCHES); fit_s: full Bradley-Terry fit; boot_s: all bootstrap "
        "rounds;\nci_width: mean 95 % interval width (Elo); pipeline_s: compute_ratings end to end; json_mb: size "
        "of ratings.json"
    )


if __name__ == "__main__":
    main()
