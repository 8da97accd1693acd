"""Exact p-values and power for success rates (any-of-N: 0/1 per run), valid at any number of runs.

The score test (Pearson χ² without continuity correction) is a large-sample test: with two runs a
side it gives p = 0.0455 for 2/2 against 0/2 and rejects a true null 12.5 % of the time at nominal
5 %. benchctl's comparisons have 2 to ~100 runs a side, so their p-values are exact instead:

- One task: Boschloo's exact unconditional test. Each possible table (x_a of n_a, x_b of n_b) is
  ordered by its one-sided Fisher p (the hypergeometric tail given the table's total successes);
  the one-sided p is the largest probability, over the common success rate π of the null, of a
  table at least as extreme: sup_π Σ_s c_s·Binom(s; N, π), where c_s is the share of the tables
  with s successes in all that are at least as extreme. The two-sided p is twice the smaller
  one-sided p (capped at 1), as `scipy.stats.boschloo_exact` defines it. The supremum is taken on
  a grid of π and refined by golden-section search around the best grid point.
- Across tasks: the exact conditional test of no difference in any task (the exact form of the
  Cochran–Mantel–Haenszel test): given each task's total successes, b's successes in a task are
  hypergeometric with no unknown parameter, so the null distribution of their sum over the tasks
  is the convolution of those hypergeometrics; two-sided p twice the smaller tail. One task: Fisher's
  exact test.

Cost: one p is O(n_a·n_b + N·GRID) — about a millisecond at 100 runs a side, so no switch to an
approximation is needed. Exact power (for the MDE and the plan) needs the rejection region, every
table's p: O(n_a·n_b·N·GRID), done once per pair of sizes (cached) up to EXACT_POWER_MAX runs a
side; beyond it the score test's normal power stands in (the two agree closely there).

numpy and `scipy.special` only, imported when a success-rate row needs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

ALPHA = 0.05
GRID = 200  # grid of π for the supremum; each peak of Σ c_s·Binom(s; N, π) is ≥ 1/sqrt(N) wide
GOLDEN_STEPS = 40
TIES = 1 + 1e-13  # tables whose Fisher p equals the observed one to rounding are as extreme (as scipy)
EXACT_POWER_MAX = 100


@lru_cache(maxsize=512)
def _log_comb(n: int) -> Any:
    """log C(n, k) for k = 0..n (read-only: cached)."""
    import numpy as np
    from scipy import special

    k = np.arange(n + 1, dtype=float)
    out = special.gammaln(n + 1.0) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    out.setflags(write=False)
    return out


def _conditional(n_a: int, n_b: int) -> tuple[Any, Any, Any]:
    """For every table (x_a, x_b) as (n_a+1, n_b+1) arrays: its total s = x_a + x_b, its probability
    given s (C(n_a, x_a)·C(n_b, x_b) / C(N, s), the same under every π), and P(X_a ≤ x_a | s), the
    one-sided Fisher p in the direction p_a < p_b."""
    import numpy as np

    n = n_a + n_b
    s = np.add.outer(np.arange(n_a + 1), np.arange(n_b + 1))
    pmf = np.exp(np.add.outer(_log_comb(n_a), _log_comb(n_b)) - _log_comb(n)[s])
    less = np.empty_like(pmf)
    for t in range(n + 1):  # along each anti-diagonal (one total), x_a ascending
        xa = np.arange(max(0, t - n_b), min(t, n_a) + 1)
        less[xa, t - xa] = np.cumsum(pmf[xa, t - xa])
    return s, pmf, less


def _binom(n: int, pi: Any) -> Any:
    """Binom(s; n, π) for s = 0..n: an (n+1, len(π)) array (π a 1-d array)."""
    import numpy as np
    from scipy import special

    s = np.arange(n + 1, dtype=float)[:, None]
    return np.exp(_log_comb(n)[:, None] + special.xlogy(s, pi) + special.xlog1py(n - s, -pi))


def _sup(coef: Any, refine: Any = None) -> Any:
    """sup over π in [0, 1] of coef @ Binom(·; N, π) for each row of coef (R, N+1): the grid's maximum,
    refined by golden-section search between the best grid point's neighbours (rows in `refine`,
    a boolean mask; all rows by default)."""
    import numpy as np

    n = coef.shape[1] - 1
    grid = np.linspace(0.0, 1.0, GRID + 1)
    vals = coef @ _binom(n, grid)
    best = vals.max(axis=1)
    rows = np.arange(len(coef)) if refine is None else np.flatnonzero(refine)
    if len(rows) == 0:
        return best
    g = vals[rows].argmax(axis=1)
    lo, hi = grid[np.maximum(g - 1, 0)], grid[np.minimum(g + 1, GRID)]
    c = coef[rows]

    def f(pi: Any) -> Any:
        return np.einsum("rs,sr->r", c, _binom(n, pi))

    r = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - r * (hi - lo), lo + r * (hi - lo)
    f1, f2 = f(x1), f(x2)
    top = np.maximum(f1, f2)
    for _ in range(GOLDEN_STEPS):
        left = f1 > f2  # the maximum lies in [lo, x2]
        hi = np.where(left, x2, hi)
        lo = np.where(left, lo, x1)
        x1n, x2n = hi - r * (hi - lo), lo + r * (hi - lo)
        f1, f2 = f(x1n), f(x2n)
        x1, x2 = x1n, x2n
        top = np.maximum(top, np.maximum(f1, f2))
    best[rows] = np.maximum(best[rows], top)
    return np.minimum(best, 1.0)


def _region_coef(s: Any, pmf: Any, stat: Any, observed: float) -> Any:
    """c_s: for each total s, the conditional probability of the tables with that total that are at
    least as extreme as the observed one (Fisher p ≤ the observed)."""
    import numpy as np

    inside = stat <= observed * TIES
    return np.bincount(s[inside], weights=pmf[inside], minlength=s.max() + 1)


def boschloo(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """Two-sided p of Boschloo's exact unconditional test of p_a = p_b."""
    import numpy as np

    if (k_a + k_b) in (0, n_a + n_b):
        return 1.0  # every run failed (or succeeded) on both sides: every table is as extreme
    s, pmf, less = _conditional(n_a, n_b)
    greater = np.empty_like(less)  # P(X_b ≤ x_b | s): the direction p_b < p_a
    greater[:] = _conditional(n_b, n_a)[2].T
    coef = np.stack(
        [
            _region_coef(s, pmf, less, float(less[k_a, k_b])),
            _region_coef(s, pmf, greater, float(greater[k_a, k_b])),
        ]
    )
    return float(min(1.0, 2 * _sup(coef).min()))


@lru_cache(maxsize=32)
def _rejects(n_a: int, n_b: int) -> Any:
    """The rejection region of the two-sided Boschloo test at α = 0.05: an (n_a+1, n_b+1) boolean array."""
    return (_one_sided_all(n_a, n_b) < ALPHA / 2) | (_one_sided_all(n_b, n_a).T < ALPHA / 2)


def _one_sided_all(n_a: int, n_b: int) -> Any:
    """Every table's one-sided Boschloo p in the direction p_a < p_b (exact where it decides
    rejection at α / 2: rows within 20 % below the threshold on the grid are refined)."""
    import numpy as np

    s, pmf, less = _conditional(n_a, n_b)
    flat_s, flat_pmf, flat_stat = s.ravel(), pmf.ravel(), less.ravel()
    order = np.argsort(flat_stat, kind="stable")
    sorted_stat = flat_stat[order]
    onehot = np.zeros((len(order), n_a + n_b + 1))
    onehot[np.arange(len(order)), flat_s[order]] = flat_pmf[order]
    cum = np.cumsum(onehot, axis=0)
    # a table's region holds every table with a Fisher p up to its own (ties included)
    last = np.searchsorted(sorted_stat, sorted_stat * TIES, side="right") - 1
    coef = cum[last]
    grid_p = _sup(coef, refine=np.zeros(len(coef), bool))
    p_sorted = _sup(coef, refine=(grid_p < ALPHA / 2) & (grid_p > 0.8 * ALPHA / 2))
    p = np.empty_like(p_sorted)
    p[order] = p_sorted
    return p.reshape(s.shape)


def boschloo_power(p_a: float, n_a: int, p_b: float, n_b: int) -> float:
    """Probability that the two-sided Boschloo test rejects at α = 0.05 when the true rates are p_a, p_b."""
    import numpy as np

    w = np.outer(_binom(n_a, np.array([p_a]))[:, 0], _binom(n_b, np.array([p_b]))[:, 0])
    return float(w[_rejects(n_a, n_b)].sum())


def stratified_exact(cells: Sequence[tuple[int, int, int, int]]) -> float:
    """Two-sided p of the exact conditional test of no difference in any stratum, for cells
    (k_a, n_a, k_b, n_b): the sum of b's successes against the convolution of the strata's
    hypergeometric distributions given their total successes."""
    import numpy as np

    dist = np.ones(1)
    lowest = observed = 0
    for k_a, n_a, k_b, n_b in cells:
        m = k_a + k_b
        xb = np.arange(max(0, m - n_a), min(m, n_b) + 1)
        pmf = np.exp(_log_comb(n_b)[xb] + _log_comb(n_a)[m - xb] - _log_comb(n_a + n_b)[m])
        dist = np.convolve(dist, pmf / pmf.sum())
        lowest += int(xb[0])
        observed += k_b
    i = observed - lowest
    return float(min(1.0, 2 * min(math.fsum(dist[: i + 1]), math.fsum(dist[i:]))))


def stratified_min_p(cells: Sequence[tuple[int, int]]) -> float:
    """The smallest p the stratified exact test can give for strata of (n_a, n_b) runs: every run of
    one side succeeding and none of the other's, in every stratum (Π 1 / C(N, n_b), doubled)."""
    return min(1.0, 2 * math.prod(1 / math.comb(n_a + n_b, n_b) for n_a, n_b in cells))
