"""`python -m benchctl.tournament` -- judge and/or rate a results directory without the full CLI.

    python -m benchctl.tournament grade results/my-sweep --judge anthropic/claude-x [--verifier M] [--force]
    python -m benchctl.tournament rate  results/my-sweep [--auditor-key model+harness] [--unweighted]

`rate` refits from grades/tournament/canonical/*.json (after hand edits) and prints the leaderboard;
it never calls a judge. Exit status: 0 when every run has a score, 1 when some run's tournament
grade is unscored (judge failure, unreadable issues, no match played; the notes say which),
2 for bad input -- the same rule as `benchctl grade`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchctl.tournament.schema import Ratings, Weighting


def _print_board(ratings: Ratings) -> list[str]:
    """Print the leaderboard and its notes; returns the reasons some run is unscored (exit 1 if any)."""
    from benchctl.tournament.ratings import unscored_notes

    flags = ratings["flags"]
    print(f"{'rank':>4}  {'auditor':<40} {'elo':>7}  {'95% interval':<15} {'matches':>7} {'cost $':>8}")
    for row in ratings["leaderboard"]:
        cost = "-" if row["cost_usd"] is None else f"{row['cost_usd']:.2f}"
        # no interval without bootstrap rounds (NaN in memory, null once read back from ratings.json)
        known = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (row["lo"], row["hi"]))
        if not row["matches"]:
            interval = "–"  # unrated: it played no match (see the note below)
        else:
            interval = f"({row['lo']:.0f}-{row['hi']:.0f})" if known else "(no interval)"
        rank = "–" if row["rank"] is None else row["rank"]
        print(f"{rank:>4}  {row['auditor']:<40} {row['elo']:>7.0f}  {interval:<15} {row['matches']:>7} {cost:>8}")
    if flags["prior_used"] or flags["disconnected"]:
        print(
            f"note: prior used (disconnected={flags['disconnected']}, mle_exists={flags['mle_exists']}); "
            f"ratings across components are not comparable"
        )
    v = ratings.get("verify") or {}
    if v.get("mode") in ("agent", "mixed"):
        print(
            f"verification ({v['mode']}, credit: {v['credit']}): {v['confirmed']} confirmed, {v['refuted']} refuted, "
            f"{v['unverifiable']} unverifiable, {v['unverified']} not verified"
        )
    if flags.get("match_rows_omitted"):
        print("note: per-match rows omitted from ratings.json (too many matches); the ratings use every match")
    unscored = unscored_notes(ratings)
    for line in unscored:
        print(f"note: {line}")
    return unscored


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchctl.tournament", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
            p.add_argument("--verifier", help='verify = "agent" tasks: the verifier model (default: the judge)')
            p.add_argument("--force", action="store_true", help="re-extract and re-judge (loses hand edits)")
            p.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args(argv)
    from benchctl.tournament.grader import grade_tournament, rate_from_canonical

    weighting: Weighting = "unweighted" if args.unweighted else "points"
    try:
        if args.cmd == "grade":
            ratings = grade_tournament(
                args.results,
                args.judge,
                force=args.force,
                concurrency=args.concurrency,
                auditor_key=args.auditor_key,
                weighting=weighting,
                rounds=args.rounds,
                seed=args.seed,
                verifier=args.verifier,
            )
        else:
            ratings = rate_from_canonical(
                args.results, auditor_key=args.auditor_key, weighting=weighting, rounds=args.rounds, seed=args.seed
            )
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # exit 1 when any run's tournament grade is unscored: the rule of `benchctl grade` for every grader
    return 1 if _print_board(ratings) else 0


if __name__ == "__main__":
    sys.exit(main())
