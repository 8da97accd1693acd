"""Shared by the scripts/bench_*.py benchmarks (run as `python scripts/bench_<area>.py`, so this
directory is on sys.path)."""

from __future__ import annotations


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: the sorted value p % of the way through the list (p in 0..100)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]
