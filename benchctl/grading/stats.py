"""Small statistics for grading and judge validation, in plain Python.

Every function returns None instead of a number when the statistic is undefined (too few
values, zero variance), so callers show "n/a" rather than a misleading 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchctl.stats import mean_or_none


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) != len(ys):
        raise ValueError("pearson needs two sequences of equal length")
    mx, my = mean_or_none(xs), mean_or_none(ys)
    if len(xs) < 2 or mx is None or my is None:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None  # a constant series has no correlation
    return sxy / math.sqrt(sxx * syy)


def ranks(xs: Sequence[float]) -> list[float]:
    """1-based ranks, ties get the average of the ranks they span."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        avg = (i + j) / 2 + 1
        for t in range(i, j + 1):
            out[order[t]] = avg
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho = Pearson correlation of the (tie-averaged) ranks."""
    if len(xs) != len(ys):
        raise ValueError("spearman needs two sequences of equal length")
    return pearson(ranks(xs), ranks(ys))


@dataclass(frozen=True)
class PairCounts:
    """Judge vs human over pairs the human scored at least `min_gap` apart: how many the judge put
    in the same order, scored equal (tied), or put in reverse order."""

    same: int = 0
    tied: int = 0
    reversed: int = 0

    @property
    def pairs(self) -> int:
        return self.same + self.tied + self.reversed

    @property
    def accuracy(self) -> float | None:
        """Same order = 1, judge tie = 1/2, reversed = 0; None when no pair qualifies."""
        return (self.same + self.tied / 2) / self.pairs if self.pairs else None

    def __add__(self, other: PairCounts) -> PairCounts:
        return PairCounts(self.same + other.same, self.tied + other.tied, self.reversed + other.reversed)


def pair_counts(human: Sequence[float], judge: Sequence[float], *, min_gap: float = 0.2) -> PairCounts:
    """Same / tied / reversed counts over pairs the human scored >= min_gap apart. A tiny epsilon
    keeps 0.7 vs 0.5 (float 0.19999...) a pair."""
    if len(human) != len(judge):
        raise ValueError("pair_counts needs two sequences of equal length")
    same = tied = rev = 0
    for i in range(len(human)):
        for j in range(i + 1, len(human)):
            dh = human[i] - human[j]
            if abs(dh) + 1e-9 < min_gap:
                continue
            dj = judge[i] - judge[j]
            if abs(dj) < 1e-12:
                tied += 1
            elif (dj > 0) == (dh > 0):
                same += 1
            else:
                rev += 1
    return PairCounts(same, tied, rev)


def pairwise_accuracy(
    human: Sequence[float], judge: Sequence[float], *, min_gap: float = 0.2
) -> tuple[float | None, int]:
    """Share of pairs the judge orders like the human, over pairs the human scored >= min_gap apart
    (same order = 1, judge tie = 1/2, reversed = 0), and the number of pairs; accuracy is None when
    no pair qualifies."""
    c = pair_counts(human, judge, min_gap=min_gap)
    return c.accuracy, c.pairs


def krippendorff_alpha_interval(units: Sequence[Sequence[float | None]]) -> float | None:
    """Krippendorff's alpha with the interval (squared difference) metric.

    `units` holds one sequence per unit (item) with one value per rater, None where that rater
    gave no value. Units with fewer than two values are not pairable and are dropped.
    alpha = 1 - D_o / D_e with D_o from within-unit pairs (each unit weighted 1/(m_u - 1)) and
    D_e from all pairs of pairable values. None when undefined (fewer than two pairable values,
    or no variation at all).
    """
    pairable = [[float(v) for v in u if v is not None] for u in units]
    pairable = [u for u in pairable if len(u) >= 2]
    values = [v for u in pairable for v in u]
    n = len(values)
    if n < 2:
        return None
    d_o = 0.0
    for u in pairable:
        m = len(u)
        s = sum((a - b) ** 2 for i, a in enumerate(u) for j, b in enumerate(u) if i != j)
        d_o += s / (m - 1)
    d_o /= n
    # sum over ordered pairs k != l of (v_k - v_l)^2 = 2 * (n * sum(v^2) - (sum v)^2)
    total = sum(values)
    d_e = 2 * (n * sum(v * v for v in values) - total * total) / (n * (n - 1))
    if d_e <= 0:
        return None
    return 1.0 - d_o / d_e
