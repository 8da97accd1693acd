"""Interval statistics used by the report (pure, stdlib only: no scipy in the environment).

Mean over seeds: a Student-t 95 % interval, mean ± t(0.975, n−1)·s/√n. With 3 seeds per
configuration (the published protocol) a bootstrap would have only 10 distinct resamples and
understate the spread; the t-interval is the honest small-sample choice. It is wide (t = 4.30
for n = 3) — that is the point. n = 1 gives no interval.

Success rates (any-of-N): the Wilson score interval from `benchctl.grading.stats` (re-exported
here), which behaves at 0/16 and 16/16 where the normal approximation collapses.
"""
from __future__ import annotations

import math
from typing import Sequence

# Two-sided 95 % critical values of Student's t, df 1..30 (standard table values).
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
_T975_LARGE = [(40, 2.021), (60, 2.000), (120, 1.980)]
Z975 = 1.959964


def t975(df: int) -> float:
    """Two-sided 95 % t critical value; table for df ≤ 30, linear in 1/df beyond (error < 0.002)."""
    if df < 1:
        raise ValueError("t-interval needs at least 2 observations (df >= 1)")
    if df <= 30:
        return _T975[df - 1]
    prev_df, prev_t = 30, _T975[-1]
    for d, t in _T975_LARGE + [(math.inf, Z975)]:
        if df <= d:
            x0, x1, x = 1 / prev_df, (0.0 if d == math.inf else 1 / d), 1 / df
            return prev_t + (t - prev_t) * (x0 - x) / (x0 - x1)
        prev_df, prev_t = d, t
    return Z975


def mean_ci(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """(mean, lo, hi) with a 95 % t-interval; (None, None, None) for no values, no interval for one."""
    n = len(values)
    if n == 0:
        return None, None, None
    m = math.fsum(values) / n
    if n == 1:
        return m, None, None
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    half = t975(n - 1) * math.sqrt(var / n)
    return m, m - half, m + half


def mean_or_none(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


# One definition of the Wilson interval for the whole tool: the grading engineer's.
from benchctl.grading.stats import wilson_interval  # noqa: E402  (re-exported for report modules)
