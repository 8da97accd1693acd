"""`python -m benchctl.tournament` -- judge and/or rate a results directory without the full CLI.

    python -m benchctl.tournament grade results/my-sweep --judge anthropic/claude-x [--force]
    python -m benchctl.tournament rate  results/my-sweep [--auditor-key model+harness] [--unweighted]

`rate` refits from grades/tournament/canonical/*.json (after hand edits) and prints the leaderboard;
it never calls a judge.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


def _print_board(ratings: dict) -> None:
    flags = ratings["flags"]
    print(f"{'rank':>4}  {'auditor':<40} {'elo':>7}  {'95% interval':<15} {'matches':>7} {'cost $':>8}")
    for row in ratings["leaderboard"]:
        cost = "-" if row["cost_usd"] is None else f"{row['cost_usd']:.2f}"
        # no interval without bootstrap rounds (NaN in memory, null once read back from ratings.json)
        known = all(isinstance(row[k], (int, float)) and math.isfinite(row[k]) for k in ("lo", "hi"))
        interval = f"({row['lo']:.0f}-{row['hi']:.0f})" if known else "(no interval)"
        print(f"{row['rank']:>4}  {row['auditor']:<40} {row['elo']:>7.0f}  "
              f"{interval:<15} {row['matches']:>7} {cost:>8}")
    if flags["prior_used"] or flags["disconnected"]:
        print(f"note: prior used (disconnected={flags['disconnected']}, mle_exists={flags['mle_exists']}); "
              f"ratings across components are not comparable")
    if flags["failed_envs"]:
        print(f"note: judge failed on {len(flags['failed_envs'])} environment(s): {', '.join(flags['failed_envs'])}")
    if flags.get("excluded_runs"):
        print(f"note: {len(flags['excluded_runs'])} run(s) excluded (issues could not be read; see canonical "
              f"lists' excluded_runs): {', '.join(flags['excluded_runs'])}")
    if flags.get("match_rows_omitted"):
        print("note: per-match rows omitted from ratings.json (too many matches); the ratings use every match")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchctl.tournament", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("grade", "rate"):
        p = sub.add_parser(name)
        p.add_argument("results", type=Path)
        p.add_argument("--auditor-key", default="model", help="meta.json fields joined by '+' (default: model)")
        p.add_argument("--unweighted", action="store_true", help="every match weighs 1 instead of its points")
        p.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds (default 1000)")
        p.add_argument("--seed", type=int, default=0)
        if name == "grade":
            p.add_argument("--judge", required=True, help="judge model id, e.g. anthropic/claude-x")
            p.add_argument("--force", action="store_true", help="re-extract and re-judge (loses hand edits)")
            p.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args(argv)
    from benchctl.tournament.grader import grade_tournament, rate_from_canonical
    weighting = "unweighted" if args.unweighted else "points"
    try:
        if args.cmd == "grade":
            ratings = grade_tournament(args.results, args.judge, force=args.force, concurrency=args.concurrency,
                                       auditor_key=args.auditor_key, weighting=weighting, rounds=args.rounds,
                                       seed=args.seed)
        else:
            ratings = rate_from_canonical(args.results, auditor_key=args.auditor_key, weighting=weighting,
                                          rounds=args.rounds, seed=args.seed)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _print_board(ratings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
