"""Differences between two configurations: estimate, 95 % interval, two-sided p, and the minimum
detectable effect (MDE) of the design — the statistics of the `comparisons` table.

Scores (0..1, continuous):
- Within one task the runs of two configurations are independent samples, with variances that
  need not be equal (a stronger model is often also a steadier one): Welch's t (the difference of
  means, its standard error sqrt(s_a²/n_a + s_b²/n_b), Welch–Satterthwaite degrees of freedom) —
  what `scipy.stats.ttest_ind(equal_var=False)` computes.
- Runs of the same model, harness, budget and seed that differ only in the data variant may share
  their randomness (a seeded sampler, a scripted model): when both sides have exactly the same
  seeds they are paired by seed — a one-sample t on the per-seed differences, as
  `scipy.stats.ttest_rel`. A paired t is valid whether or not the pairs are correlated; it only
  spends degrees of freedom.
- Across tasks: the mean over the tasks of the per-task differences, each task weighted equally
  (the benchmark's score is a mean over its tasks), with the variance the sum of the per-task
  variances / K² and Satterthwaite degrees of freedom over all the variance components. Each task's
  difficulty cancels inside its own difference — this is what "paired by task" buys: a spread of
  task difficulties never widens the interval, as it would in one pooled, unpaired t.
  The estimand is the mean over the tasks that were run (they are the benchmark), with seeds as
  the random part; with one run per cell there is no within-task variance and so no interval.

Success rates (any-of-N, 0/1 per run):
- Interval: Newcombe's hybrid score interval for p_b − p_a (method 10 of Newcombe 1998), built
  from the two Wilson intervals; across tasks its MOVER generalisation (Zou & Donner 2008) to the
  equally weighted mean of the per-task differences (for one task it is Newcombe's interval).
  Both stay inside [−1, 1] and behave at 0/16 and 16/16, where a Wald interval collapses.
- p: exact, valid at any number of runs (`exact`): Boschloo's exact unconditional test for one task,
  the exact conditional test of no difference in any task across tasks. The score test (Pearson χ²)
  they replace rejects a true null 12.5 % of the time at 2 runs a side. Significance is decided
  by p; an interval that excludes 0 while p ≥ 0.05 is extended to reach 0.
- MDE: the smallest δ that this test detects with 80 % power, for rates p̄ ∓ δ/2 around the
  observed pooled rate (moved inside [0, 1] when needed): Boschloo's exact power for one task (up to
  100 runs a side), else the score test's normal approximation.

MDE for t-based rows: the δ at which the two-sided t-test at α = 0.05 has 80 % power, with the
observed variances taken as the truth: exact from the noncentral t for a paired t, and for Welch
and the across-task test averaged over the sampling distribution of their variance estimates
(see "power of the t-test" below: their estimated degrees of freedom make the noncentral-t answer
optimistic at 3 runs a side).

scipy is imported only here and only when a t-based row needs it (`scipy.special`: the functions
behind `scipy.stats.t` and `scipy.stats.nct`, a fifth of `scipy.stats`' import time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from benchctl.stats import mean_or_none

ALPHA = 0.05
POWER = 0.8
# Φ⁻¹(0.975) and Φ⁻¹(0.8) as the nearest doubles (equal to scipy.stats.norm.ppf; tested)
Z975 = 1.959963984540054
Z80 = 0.8416212335729143


@dataclass(frozen=True)
class Result:
    """One difference b − a with its interval, p and MDE; None where the data cannot give one."""

    diff: float | None
    lo: float | None
    hi: float | None
    p: float | None
    mde: float | None
    n_a: int
    n_b: int
    paired: bool
    method: str


@dataclass(frozen=True)
class TDiff:
    """A t-based difference before its quantiles: the estimate and its variance as a sum of
    independent components (variance, degrees of freedom), for Welch–Satterthwaite."""

    diff: float | None
    components: tuple[tuple[float, float], ...] | None  # None: variance not estimable (a side with n < 2)
    n_a: int
    n_b: int
    paired: bool
    method: str
    why: str = ""  # why there is no interval

    @property
    def var(self) -> float | None:
        return None if self.components is None else math.fsum(v for v, _ in self.components)

    @property
    def df(self) -> float | None:
        """Welch–Satterthwaite: (Σ v)² / Σ v²/df; components with no variance add nothing."""
        if self.components is None:
            return None
        den = math.fsum(v * v / d for v, d in self.components if v > 0)
        return (self.var or 0.0) ** 2 / den if den > 0 else None


def sample_var(xs: Sequence[float]) -> float:
    m = math.fsum(xs) / len(xs)
    return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


@dataclass(frozen=True)
class Summary:
    """A sample's size, mean and variance (None below 2 values): all Welch needs of it."""

    n: int
    mean: float | None
    var: float | None


def summary(xs: Sequence[float]) -> Summary:
    return Summary(len(xs), mean_or_none(xs), sample_var(xs) if len(xs) > 1 else None)


def welch(a: Sequence[float] | Summary, b: Sequence[float] | Summary) -> TDiff:
    """b − a for two independent samples (Welch), given as values or as their summaries."""
    sa = a if isinstance(a, Summary) else summary(a)
    sb = b if isinstance(b, Summary) else summary(b)
    diff = None if sa.mean is None or sb.mean is None else sb.mean - sa.mean
    if sa.var is None or sb.var is None:
        return TDiff(diff, None, sa.n, sb.n, False, "welch", "fewer than 2 runs on a side")
    comps = ((sa.var / sa.n, sa.n - 1.0), (sb.var / sb.n, sb.n - 1.0))
    return TDiff(diff, comps, sa.n, sb.n, False, "welch")


def paired_t(pairs: Sequence[tuple[float, float]]) -> TDiff:
    """b − a over (a, b) pairs (same seed): a one-sample t on the differences."""
    d = [b - a for a, b in pairs]
    diff = mean_or_none(d)
    n = len(d)
    if n < 2:
        return TDiff(diff, None, n, n, True, "paired-t", "fewer than 2 pairs")
    return TDiff(diff, ((sample_var(d) / n, n - 1.0),), n, n, True, "paired-t")


def by_seed(a: Sequence[tuple[Any, float]], b: Sequence[tuple[Any, float]]) -> list[tuple[float, float]] | None:
    """(a, b) score pairs by seed when both sides have the same seeds, each once; else None."""
    da, db = dict(a), dict(b)
    if len(da) != len(a) or len(db) != len(b) or set(da) != set(db) or None in da:
        return None
    return [(da[s], db[s]) for s in sorted(da, key=str)]


def stratified(parts: Sequence[TDiff]) -> TDiff:
    """The equally weighted mean over strata (tasks) of their differences."""
    k = len(parts)
    n_a, n_b = sum(p.n_a for p in parts), sum(p.n_b for p in parts)
    paired = all(p.paired for p in parts)
    diffs = [p.diff for p in parts]
    if k == 0 or any(d is None for d in diffs):
        return TDiff(None, None, n_a, n_b, True, "stratified-t", "a stratum has no scores")
    diff = math.fsum(diffs) / k  # type: ignore[arg-type]
    if any(p.components is None for p in parts):
        return TDiff(diff, None, n_a, n_b, True, "stratified-t", "a task has fewer than 2 runs on a side")
    w2 = 1.0 / (k * k)
    comps = tuple((w2 * v, d) for p in parts for v, d in p.components)  # type: ignore[union-attr]
    return TDiff(diff, comps, n_a, n_b, True, "stratified-paired-t" if paired else "stratified-t")


def t_results(rows: Sequence[TDiff], clip: tuple[float, float] | None = (-1.0, 1.0), mde: bool = True) -> list[Result]:
    """Intervals, p-values and (unless `mde` is False) MDEs for many t-based differences, scipy
    called once per quantity over all rows (vectorised)."""
    out: list[Result | None] = [None] * len(rows)
    todo: list[tuple[int, float, float, float]] = []  # (index, diff, se, df)
    for i, r in enumerate(rows):
        var, df = r.var, r.df
        if r.diff is None or var is None or var <= 0 or df is None:
            why = r.why or ("no spread within the groups: no test" if var == 0 else "")
            out[i] = Result(r.diff, None, None, None, None, r.n_a, r.n_b, r.paired, _method(r.method, why))
        else:
            todo.append((i, r.diff, math.sqrt(var), df))
    if todo:
        import numpy as np
        from scipy import special

        diffs = np.array([t[1] for t in todo])
        ses = np.array([t[2] for t in todo])
        dfs = np.array([t[3] for t in todo])
        q = special.stdtrit(dfs, 1 - ALPHA / 2)
        p = 2 * special.stdtr(dfs, -np.abs(diffs / ses))
        mdes = t_mde([rows[t[0]].components or () for t in todo]) if mde else [None] * len(todo)
        for (i, d, s, _), qi, pi, mi in zip(todo, q.tolist(), p.tolist(), mdes):
            r = rows[i]
            lo, hi = d - qi * s, d + qi * s
            if clip is not None:
                lo, hi = max(clip[0], lo), min(clip[1], hi)
            out[i] = Result(d, lo, hi, min(1.0, pi), mi, r.n_a, r.n_b, r.paired, r.method)
    return [r for r in out if r is not None]


def _method(method: str, why: str) -> str:
    return f"{method} ({why})" if why else method


# ---------------------------------------------------------------- power of the t-test
#
# When the degrees of freedom are fixed (a paired t: one variance component), the t statistic is
# noncentral t under an alternative and power is exact from `nctdtr`. Welch's test and the
# across-task test estimate their degrees of freedom from the same sample variances, and at 3 runs a
# side the estimate is low and noisy: plugging the Satterthwaite df into the noncentral t promises
# 80 % power where the test has 69 % (simulated). So for two or more variance components the power
# is computed as the test behaves: the difference of means is normal with the (plug-in) standard
# error σ, independent of the variance estimates, which are drawn as scaled χ² (MDE_DRAWS seeded
# draws, the same for every report); for each draw the test's own critical value c·S is computed
# (Satterthwaite df, t quantile to 1e-6) and the power is the mean of Φ((δ − cS)/σ) + Φ((−δ − cS)/σ).

MDE_DRAWS = 2000
# From this many degrees of freedom in every component on, the estimated df hardly varies and the
# noncentral t with Satterthwaite's df gives the test's power (simulated: 79.6-80.0 % at 7 df)
NCT_DF = 10
MDE_SEED = 20240101


def t_mde(components: Sequence[Sequence[tuple[float, float]]]) -> list[float]:
    """The MDE (δ with 80 % power at α = 0.05) for each row's variance components."""
    import numpy as np

    out = [0.0] * len(components)
    groups: dict[tuple[float, ...] | int, list[int]] = {}
    for i, comps in enumerate(components):
        live = [c for c in comps if c[0] > 0]
        # two components (Welch, the bulk of a table): MDE/σ depends only on the dfs and the share
        # of the first variance, so it is computed once per pair of dfs on a grid of shares and
        # interpolated (a table of 1,000 rows costs what a handful does)
        if min((c[1] for c in live), default=0) >= NCT_DF:
            key: tuple[float, ...] | int = 0  # the noncentral t with Satterthwaite's df is accurate there
        else:
            key = (live[0][1], live[1][1]) if len(live) == 2 else len(live)
        groups.setdefault(key, []).append(i)
    for key, idx in groups.items():
        comps_arr = [[c for c in components[i] if c[0] > 0] for i in idx]
        v = np.array([[c[0] for c in cs] for cs in comps_arr])
        sigma = np.sqrt(v.sum(axis=1))
        if isinstance(key, tuple):
            share, per_sigma = _share_grid(*key)
            mde = np.interp(v[:, 0] / v.sum(axis=1), share, per_sigma) * sigma
        elif key in (0, 1):
            from scipy import special

            df = np.array([TDiff(None, tuple(cs), 0, 0, False, "").df for cs in comps_arr])
            mde = noncentrality(df, special.stdtrit(df, 1 - ALPHA / 2)) * sigma
        else:
            d = np.array([[c[1] for c in cs] for cs in comps_arr])
            # in chunks: each row holds (components × MDE_DRAWS) floats
            mde = (
                np.concatenate(
                    [_solve_delta(_critical_draws(v[i : i + 64], d[i : i + 64])) for i in range(0, len(v), 64)]
                )
                * sigma
            )
        for i, m in zip(idx, mde.tolist()):
            out[i] = m
    return out


@lru_cache(maxsize=64)
def _share_grid(df_a: float, df_b: float) -> tuple[Any, Any]:
    """MDE/σ of a two-component row on a grid of the first component's share of the variance."""
    import numpy as np

    share = np.linspace(0.0, 1.0, SHARE_GRID)
    grid_d = np.tile(np.array([df_a, df_b]), (SHARE_GRID, 1))
    return share, _solve_delta(_critical_draws(np.stack([share, 1 - share], axis=1), grid_d))


SHARE_GRID = 65  # MDE/σ is smooth in the share: linear interpolation is within 1e-4 of a direct solve (tested)


def _critical_draws(v: Any, d: Any) -> Any:
    """(rows, MDE_DRAWS) draws of the test's critical difference c·S under the rows' variances,
    in units of the rows' standard errors σ."""
    import numpy as np
    from scipy import special

    # χ²_k / k draws by inverting the gamma(k/2) CDF at one seeded set of uniforms per component
    # slot: the same draws for every row with those degrees of freedom (and every report)
    u = np.random.default_rng(MDE_SEED).random((v.shape[1], MDE_DRAWS))
    cache: dict[tuple[int, float], Any] = {}

    def chi2(slot: int, k: float) -> Any:
        if (slot, k) not in cache:
            cache[(slot, k)] = special.gammaincinv(k / 2, u[slot]) / (k / 2)
        return cache[(slot, k)]

    w = v / v.sum(axis=1, keepdims=True)
    ws = w[:, :, None] * np.array([[chi2(j, k) for j, k in enumerate(row)] for row in d.tolist()])
    total = ws.sum(axis=1)  # (S/σ)²
    df = total**2 / (ws**2 / d[:, :, None]).sum(axis=1)
    return _t975(df) * np.sqrt(total)


def _t975(df: Any) -> Any:
    """t(0.975, df) over a large array: scipy's exact quantile on a fine grid in log df, linear in
    between (relative error below 1e-6, tested) — a tenth of the time of `stdtrit` on every draw."""
    import numpy as np
    from scipy import special

    lo, hi = np.log(df.min()), np.log(df.max())
    grid = np.linspace(lo, hi, 2049) if hi > lo else np.array([lo, lo + 1e-9])
    return np.interp(np.log(df), grid, special.stdtrit(np.exp(grid), 1 - ALPHA / 2))


def _power(delta: Any, crit: Any) -> Any:
    """Mean power over the draws for differences `delta` (rows,), all in units of σ."""
    from scipy import special

    d = delta[:, None]
    return (special.ndtr(d - crit) + special.ndtr(-d - crit)).mean(axis=1)


def _solve_delta(crit: Any) -> Any:
    """δ/σ per row with power POWER: Newton's method from below, where power is concave in δ, so
    every step stays below the root and the iteration cannot overshoot."""
    import numpy as np
    from scipy import special

    delta = np.median(crit, axis=1)  # power ≈ 1/2 there: below the root
    for _ in range(30):
        d = delta[:, None]
        g = (special.ndtr(d - crit) + special.ndtr(-d - crit)).mean(axis=1) - POWER
        slope = (np.exp(-0.5 * (d - crit) ** 2) - np.exp(-0.5 * (d + crit) ** 2)).mean(axis=1) / math.sqrt(2 * math.pi)
        step = -g / slope
        delta = delta + step
        if np.all(np.abs(step) <= 1e-10 * np.maximum(1.0, delta)):
            break
    return delta


def t_test_power(delta: float, components: Sequence[tuple[float, float]]) -> float:
    """Power of the two-sided t-test at α = 0.05 (as `t_mde` computes it) for a true difference `delta`."""
    import numpy as np
    from scipy import special

    comps = [c for c in components if c[0] > 0]
    sigma = math.sqrt(math.fsum(c[0] for c in comps))
    if len(comps) == 1:
        q = float(special.stdtrit(comps[0][1], 1 - ALPHA / 2))
        lam = delta / sigma
        return float(1 - special.nctdtr(comps[0][1], lam, q) + special.nctdtr(comps[0][1], lam, -q))
    v = np.array([[c[0] for c in comps]])
    d = np.array([[c[1] for c in comps]])
    return float(_power(np.array([delta / sigma]), _critical_draws(v, d))[0])


def noncentrality(df: Any, q: Any) -> Any:
    """λ with P(T' > q) + P(T' < −q) = POWER for T' ~ noncentral t(df, λ), elementwise over numpy
    arrays. `nctdtrinc` inverts the upper tail; the lower tail (≈1e-11 at these λ) is folded in by
    fixed-point iteration, which settles in one or two steps."""
    import numpy as np
    from scipy import special

    lam = special.nctdtrinc(df, 1 - POWER, q)
    for _ in range(20):
        nxt = special.nctdtrinc(df, 1 - POWER + special.nctdtr(df, lam, -q), q)
        done = np.all(np.abs(nxt - lam) <= 1e-12 * np.maximum(1.0, np.abs(lam)))
        lam = nxt
        if done:
            break
    return lam


# ---------------------------------------------------------------- proportions


@dataclass(frozen=True)
class Cell:
    """Successes and scored runs of the two sides in one stratum (task)."""

    k_a: int
    n_a: int
    k_b: int
    n_b: int


def phi(z: float) -> float:
    """Standard normal CDF."""
    return 0.5 * math.erfc(-z / math.sqrt(2))


NEWCOMBE = "newcombe-boschloo"
STRATIFIED_NEWCOMBE = "stratified-newcombe-exact"


def proportions(cells: Sequence[Cell]) -> Result:
    """p_b − p_a (the equally weighted mean over cells): Newcombe / MOVER-Wilson interval, exact p
    (`exact`: Boschloo's test for one cell, the exact conditional test across several), MDE from the
    test's power. One cell is the plain two-sample case.

    The interval and p come from different constructions and could disagree at small n (2/2 against
    0/2: Newcombe [+0.07, +1.00], exact p = 0.125); significance is decided by p, and an interval
    that excludes 0 while p ≥ 0.05 is extended to reach 0, so that the printed interval never
    claims what the test does not (a wider interval: coverage can only rise)."""
    from benchctl.report import exact
    from benchctl.stats import wilson_interval

    method = NEWCOMBE if len(cells) == 1 else STRATIFIED_NEWCOMBE
    n_a, n_b = sum(c.n_a for c in cells), sum(c.n_b for c in cells)
    if not cells or any(c.n_a == 0 or c.n_b == 0 for c in cells):
        return Result(None, None, None, None, None, n_a, n_b, len(cells) > 1, _method(method, "no scored runs"))
    w = 1.0 / len(cells)
    diff = w * math.fsum(c.k_b / c.n_b - c.k_a / c.n_a for c in cells)
    low, high = [], []
    for c in cells:
        pa, pb = c.k_a / c.n_a, c.k_b / c.n_b
        la, ua = wilson_interval(c.k_a, c.n_a)
        lb, ub = wilson_interval(c.k_b, c.n_b)
        low.append(w * w * ((pb - lb) ** 2 + (ua - pa) ** 2))
        high.append(w * w * ((ub - pb) ** 2 + (pa - la) ** 2))
    lo = max(-1.0, diff - math.sqrt(math.fsum(low)))
    hi = min(1.0, diff + math.sqrt(math.fsum(high)))
    if len(cells) == 1:
        c = cells[0]
        p = exact.boschloo(c.k_a, c.n_a, c.k_b, c.n_b)
    else:
        p = exact.stratified_exact([(c.k_a, c.n_a, c.k_b, c.n_b) for c in cells])
    if p >= ALPHA:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return Result(diff, lo, hi, p, proportion_mde(cells), n_a, n_b, len(cells) > 1, method)


def proportion_power(delta: float, cells: Sequence[Cell]) -> float:
    """Power of the comparison's test when each cell's rates are c ∓ δ/2 around its pooled observed
    rate c (moved so that both stay inside [0, 1]). One cell of at most `exact.EXACT_POWER_MAX` runs
    a side: Boschloo's test's exact power. Otherwise the score test's normal approximation — close to
    the exact test's power at larger n; across tasks at small n it is optimistic, and 0 when the exact
    test cannot reach p < 0.05 at all with these numbers of runs."""
    from benchctl.report import exact

    if len(cells) == 1 and max(cells[0].n_a, cells[0].n_b) <= exact.EXACT_POWER_MAX:
        c = cells[0]
        pa, pb = _rates(delta, (c.k_a + c.k_b) / (c.n_a + c.n_b))
        return exact.boschloo_power(pa, int(c.n_a), pb, int(c.n_b))
    if exact.stratified_min_p([(int(c.n_a), int(c.n_b)) for c in cells]) >= ALPHA:
        return 0.0
    w = 1.0 / len(cells)
    v0 = v1 = 0.0
    for c in cells:
        pool = (c.k_a + c.k_b) / (c.n_a + c.n_b)
        pa, pb = _rates(delta, pool)
        mid = (pa + pb) / 2
        v0 += w * w * mid * (1 - mid) * (1 / c.n_a + 1 / c.n_b)
        v1 += w * w * (pa * (1 - pa) / c.n_a + pb * (1 - pb) / c.n_b)
    if v1 <= 0:
        return 1.0
    s0, s1 = math.sqrt(v0), math.sqrt(v1)
    return phi((delta - Z975 * s0) / s1) + phi((-delta - Z975 * s0) / s1)


def _rates(delta: float, pool: float) -> tuple[float, float]:
    """Rates mid ∓ δ/2 around the pooled rate, moved so that both stay inside [0, 1]."""
    mid = min(max(pool, delta / 2), 1 - delta / 2)
    return mid - delta / 2, mid + delta / 2


def proportion_mde(cells: Sequence[Cell]) -> float | None:
    """The smallest δ in (0, 1] with power ≥ 0.8 (bisection); None when even δ = 1 falls short."""
    return _proportion_mde(tuple(cells))


@lru_cache(maxsize=4096)
def _proportion_mde(cells: tuple[Cell, ...]) -> float | None:
    # cached: a table has many rows with the same counts, and each bisection step is an exact power
    if proportion_power(1.0, cells) < POWER:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if proportion_power(mid, cells) >= POWER:
            hi = mid
        else:
            lo = mid
    return hi


# ---------------------------------------------------------------- multiplicity


def holm(ps: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values over the non-None entries (the family); None stays None.
    p_(i) adjusted = max over j ≤ i of min(1, (m − j + 1)·p_(j)), in ascending order of p."""
    idx = sorted((i for i, p in enumerate(ps) if p is not None), key=lambda i: ps[i])  # type: ignore[arg-type,return-value]
    m = len(idx)
    out: list[float | None] = [None] * len(ps)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * ps[i]))  # type: ignore[operator]
        out[i] = running
    return out


# ---------------------------------------------------------------- sample size


MAX_PLAN = 100_000


def seeds_for_t(delta: float, sds: Sequence[float]) -> int | None:
    """Runs per configuration (equal on both sides, every stratum alike) for which a true difference
    `delta` of the equally weighted mean over the strata, whose within-configuration standard
    deviations are `sds`, is found by the two-sided t-test at α = 0.05 with 80 % power.
    Degrees of freedom as Welch–Satterthwaite gives them for those n: K·(2n − 2) when the SDs are equal."""
    if delta <= 0 or not sds or any(s < 0 for s in sds):
        return None
    if all(s == 0 for s in sds):
        return 2
    k = len(sds)

    def power(n: int) -> float:
        return t_test_power(delta, [(s * s / n / (k * k), n - 1.0) for s in sds for _ in (0, 1)])

    return _smallest_n(power)


def seeds_for_proportions(delta: float, rates: Sequence[float]) -> int | None:
    """Runs per configuration for the score test to find a difference `delta` in success rate around
    each stratum's observed rate with 80 % power."""
    if not 0 < delta <= 1 or not rates:
        return None

    def power(n: int) -> float:
        return proportion_power(delta, [_rate_cell(r, n) for r in rates])

    return _smallest_n(power)


def _rate_cell(rate: float, n: int) -> Cell:
    """A cell whose pooled rate is exactly `rate` (k may be fractional: only the rate matters here)."""
    return Cell(rate * n, n, rate * n, n)  # type: ignore[arg-type]


def _smallest_n(power: Any) -> int | None:
    """The smallest n ≥ 2 with power(n) ≥ 0.8, by doubling then bisection (power rises with n)."""
    if power(2) >= POWER:
        return 2
    lo, hi = 2, 4  # power(lo) < POWER throughout
    while power(hi) < POWER:
        lo, hi = hi, hi * 2
        if hi > MAX_PLAN:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power(mid) >= POWER:
            hi = mid
        else:
            lo = mid
    return hi
