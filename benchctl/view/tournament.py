"""The tournament page's data, from grades/tournament/ratings.json (schema in
benchctl/tournament/schema.py): interval bars for the leaderboard and heat classes for the
overlap matrix. Auditor names and issue titles are judge/agent text: the template escapes them."""

from __future__ import annotations

from typing import Any

from benchctl.report.contests import ONE_ENVIRONMENT_NOTE, one_environment


def leaderboard(ratings: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Rows plus each row's interval as x positions on a shared 0-300 scale."""
    rows = [r for r in ratings.get("leaderboard") or [] if isinstance(r, dict)]
    nums = [v for r in rows for v in (r.get("lo"), r.get("hi"), r.get("elo")) if isinstance(v, (int, float))]
    lo, hi = (min(nums), max(nums)) if nums else (0.0, 1.0)
    pad = max(1.0, (hi - lo) * 0.05)
    lo, hi = lo - pad, hi + pad

    def x(v: Any) -> float | None:
        return round((v - lo) / (hi - lo) * 300, 1) if isinstance(v, (int, float)) else None

    out = [{**r, "x_lo": x(r.get("lo")), "x_hi": x(r.get("hi")), "x_elo": x(r.get("elo"))} for r in rows]
    return out, {"lo": lo, "hi": hi, "x_1000": x(1000.0) or 0.0}


def one_environment_note(ratings: dict[str, Any]) -> str | None:
    """Why the leaderboard draws no interval bars, when it is because of one environment."""
    return ONE_ENVIRONMENT_NOTE if one_environment(ratings) else None


def overlap(ratings: dict[str, Any]) -> dict[str, Any]:
    ov = ratings.get("overlap") or {}
    names = [str(a) for a in ov.get("auditors") or []]
    cells = []
    for row in ov.get("values") or []:
        cells.append(
            [
                (None, "na") if not isinstance(v, (int, float)) else (v, f"h{min(10, max(0, round(v * 10)))}")
                for v in row
            ]
        )
    return {"auditors": names, "rows": list(zip(names, cells))}


def environments(ratings: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in ratings.get("environments") or [] if isinstance(e, dict)]
