"""Interval statistics used by the report.

Mean over seeds: a Student-t 95 % interval, mean ± t(0.975, n−1)·s/√n, with the exact quantile
(`scipy.special.stdtrit`, the function behind `scipy.stats.t.ppf`; not a rounded table). For up to
256 degrees of freedom its values come from `t975_table` (scipy's own output, to the last bit),
because importing scipy.special would cost each report ~0.4 s of CPU; beyond that scipy computes
it. With 3 seeds
per configuration (the published protocol) a bootstrap would have only 10 distinct resamples and
understate the spread; the t-interval is the honest small-sample choice. It is wide (t = 4.3027
for n = 3) — that is the point. n = 1 gives no interval.

Success rates (any-of-N): the Wilson score interval of `benchctl.stats`, with z = Φ⁻¹(0.975) exactly; it behaves at 0/16 and 16/16 where the normal
approximation collapses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from benchctl.report.t975_table import T975
from benchctl.stats import mean_or_none


@lru_cache(maxsize=256)
def t975(df: int) -> float:
    """Two-sided 95 % Student-t critical value, the exact 0.975 quantile with `df` degrees of freedom."""
    if df < 1:
        raise ValueError("t-interval needs at least 2 observations (df >= 1)")
    if isinstance(df, int) and df <= len(T975):
        return T975[df - 1]
    # scipy.special rather than scipy.stats: the same quantile, a fifth of the import time
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.975))


def mean_ci(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """(mean, lo, hi) with a 95 % t-interval; (None, None, None) for no values, no interval for one
    value or for values all equal: their zero-width interval would claim a certainty that a sample
    without spread cannot give (scores in 0.1 steps, or at 0 or 1, tie often)."""
    m = mean_or_none(values)
    if m is None:
        return None, None, None
    n = len(values)
    if n == 1 or all(v == values[0] for v in values):
        return m, None, None
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    half = t975(n - 1) * math.sqrt(var / n)
    return m, m - half, m + half
