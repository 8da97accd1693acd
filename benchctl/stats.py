"""The statistics every layer shares, below grading, report, scan and the target studies: the one
mean and the one Wilson interval.

`math.fsum` rather than `sum`: the exactly rounded sum, so a mean does not depend on the order
the values arrive in (runs are read in directory order, grades in completion order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean_or_none(values: Sequence[float]) -> float | None:
    """The arithmetic mean; None for no values (shown as "n/a", never as a misleading 0)."""
    return math.fsum(values) / len(values) if values else None


# The two-sided 95 % normal quantile Φ⁻¹(0.975) = 1.95996398454005423552..., as the nearest
# double (equal to scipy.stats.norm.ppf(0.975); tested). Not the rounded 1.96: a published
# interval must be reproducible to the last digit.
Z975 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z975) -> tuple[float, float]:
    """Wilson score interval for k successes out of n (95 % with the default z = Φ⁻¹(0.975)).

    n == 0 gives the uninformative (0.0, 1.0). Unlike the normal approximation it never leaves
    [0, 1] and stays sensible at k = 0 or k = n, which is what small per-configuration counts
    (e.g. 16 runs) need.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson_interval needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))
