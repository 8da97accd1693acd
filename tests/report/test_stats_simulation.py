"""The comparison statistics proven by simulation: many synthetic studies drawn from known
distributions (seeded), checked against the truth.

- nominal 95 % intervals cover the true difference 93.5-96.5 % of the time (4,000 studies: the
  binomial standard error of a 95 % rate is 0.34 %, so the band is > 4 standard errors wide);
- p < 0.05 in about 5 % of null comparisons (success rates: at most 5 %, at every number of runs
  from 2 a side: their tests are exact);
- a true difference equal to the printed MDE is found about 80 % of the time;
- Holm's adjustment keeps the family-wise error rate of a table of null comparisons at or below 5 %;
- across tasks, pairing by task gives a markedly narrower interval than pooling the runs when
  tasks differ a lot in difficulty;
- judge_share rises with the judge's noise and estimates the true share.

The statistics are drawn through the same functions the report uses (benchctl.report.inference),
and one test checks that the comparisons table computes exactly those functions on a results
directory. `scripts/stats_simulation.py` runs the same checks through whole results directories.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest

from benchctl.report import inference as inf

N = 4000
BAND = (0.935, 0.965)


def _covered(results: list[inf.Result], truth: float) -> float:
    return float(np.mean([r.lo is not None and r.lo <= truth <= r.hi for r in results]))  # type: ignore[operator]


def _rejects(results: list[inf.Result]) -> float:
    return float(np.mean([r.p is not None and r.p < 0.05 for r in results]))


def test_welch_interval_coverage_and_false_positive_rate() -> None:
    rng = np.random.default_rng(1)
    # unequal variances and sizes (3 seeds against 5): the case Welch exists for
    res = inf.t_results(
        [inf.welch(list(rng.normal(0.4, 0.05, 3)), list(rng.normal(0.5, 0.15, 5))) for _ in range(N)], clip=None
    )
    assert BAND[0] <= _covered(res, 0.1) <= BAND[1]
    null = inf.t_results(
        [inf.welch(list(rng.normal(0.4, 0.1, 5)), list(rng.normal(0.4, 0.1, 5))) for _ in range(N)], clip=None
    )
    assert 0.035 <= _rejects(null) <= 0.065


def test_paired_by_seed_coverage() -> None:
    rng = np.random.default_rng(2)
    rows = []
    for _ in range(N):
        shared = rng.normal(0, 0.1, 4)  # seed effect both variants share
        a = 0.5 + shared + rng.normal(0, 0.03, 4)
        b = 0.45 + shared + rng.normal(0, 0.03, 4)
        rows.append(inf.paired_t(list(zip(a, b))))
    res = inf.t_results(rows, clip=None)
    assert BAND[0] <= _covered(res, -0.05) <= BAND[1]


def test_across_tasks_coverage_and_narrower_than_unpaired() -> None:
    """3 tasks whose difficulties differ by a standard deviation of 0.25, 4 seeds each, noise 0.05:
    the task-paired interval covers and is a fraction of the width of a Welch test on all runs pooled."""
    rng = np.random.default_rng(3)
    paired, pooled = [], []
    for _ in range(N):
        task = rng.normal(0, 0.25, 3)
        a = [rng.normal(0.3 + t, 0.05, 4) for t in task]
        b = [rng.normal(0.35 + t, 0.05, 4) for t in task]
        paired.append(inf.stratified([inf.welch(list(x), list(y)) for x, y in zip(a, b)]))
        pooled.append(inf.welch(list(np.concatenate(a)), list(np.concatenate(b))))
    res, flat = inf.t_results(paired, clip=None, mde=False), inf.t_results(pooled, clip=None, mde=False)
    assert BAND[0] <= _covered(res, 0.05) <= BAND[1]
    width = np.mean([r.hi - r.lo for r in res])  # type: ignore[operator]
    width_pooled = np.mean([r.hi - r.lo for r in flat])  # type: ignore[operator]
    assert width < 0.3 * width_pooled


@pytest.mark.parametrize(("n", "sd_a", "sd_b"), [(3, 0.1, 0.1), (5, 0.05, 0.15)])
def test_a_true_difference_of_the_mde_is_found_80_percent_of_the_time(n: int, sd_a: float, sd_b: float) -> None:
    rng = np.random.default_rng(4)
    mde = inf.t_mde([((sd_a**2 / n, n - 1.0), (sd_b**2 / n, n - 1.0))])[0]
    res = inf.t_results(
        [inf.welch(list(rng.normal(0, sd_a, n)), list(rng.normal(mde, sd_b, n))) for _ in range(N)], clip=None
    )
    assert 0.775 <= _rejects(res) <= 0.825


def test_across_tasks_mde() -> None:
    rng = np.random.default_rng(5)
    k, n, sd = 3, 3, 0.1
    mde = inf.t_mde([[(sd * sd / n / k / k, n - 1.0)] * (2 * k)])[0]
    rows = [
        inf.stratified([inf.welch(list(rng.normal(0, sd, n)), list(rng.normal(mde, sd, n))) for _ in range(k)])
        for _ in range(N)
    ]
    assert 0.775 <= _rejects(inf.t_results(rows, clip=None, mde=False)) <= 0.825


def test_holm_keeps_the_family_wise_error_rate() -> None:
    """Six configurations of one task with the same true score, 4 seeds each: 15 comparisons per study."""
    rng = np.random.default_rng(6)
    studies = 1000
    family_raw = family_holm = 0
    for _ in range(studies):
        groups = [list(rng.normal(0.5, 0.1, 4)) for _ in range(6)]
        rows = [inf.welch(groups[i], groups[j]) for i in range(6) for j in range(i + 1, 6)]
        ps = [r.p for r in inf.t_results(rows, clip=None, mde=False)]
        family_raw += any(p is not None and p < 0.05 for p in ps)
        family_holm += any(p is not None and p < 0.05 for p in inf.holm(ps))
    assert family_raw / studies > 0.2  # why the adjustment matters
    assert family_holm / studies <= 0.05 + 0.015  # 0.015 = 2 binomial standard errors at 1,000 studies


def _by_table(n: int, tables: Iterable[tuple[int, int]]) -> list[inf.Result]:
    """inf.proportions for each (k_a, k_b) of n runs a side, computed once per distinct table."""
    done: dict[tuple[int, int], inf.Result] = {}
    out = []
    for t in tables:
        if t not in done:
            done[t] = inf.proportions([inf.Cell(t[0], n, t[1], n)])
        out.append(done[t])
    return out


def test_success_rates_newcombe_coverage() -> None:
    rng = np.random.default_rng(7)
    ka, kb = rng.binomial(16, 0.3, N), rng.binomial(16, 0.5, N)
    res = _by_table(16, zip(ka.tolist(), kb.tolist()))
    assert BAND[0] <= _covered(res, 0.2) <= BAND[1]


SMALL_N = (2, 3, 5, 10)
BASE_RATES = (0.1, 0.3, 0.5, 0.8)
SLACK = 2 * (0.05 * 0.95 / N) ** 0.5  # two Monte-Carlo standard errors at a true 5 %


@pytest.mark.parametrize("n", SMALL_N)
def test_success_rate_p_keeps_its_size_at_small_n(n: int) -> None:
    """A null pair (same true success rate) at n runs a side: p < 0.05 in at most 5 % of studies
    (+ Monte-Carlo slack) at every base rate. The score test this replaced rejected 12.5 % of the
    time at 2 against 2 (rate 0.5: 2/2 against 0/2 or 0/2 against 2/2 gave p = 0.0455)."""
    rng = np.random.default_rng(70 + n)
    for rate in BASE_RATES:
        ka, kb = rng.binomial(n, rate, N), rng.binomial(n, rate, N)
        res = _by_table(n, zip(ka.tolist(), kb.tolist()))
        assert _rejects(res) <= 0.05 + SLACK, (n, rate, _rejects(res))


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # statsmodels' odds ratio at 2/2
def test_success_rate_size_is_at_most_5_percent_at_every_base_rate() -> None:
    """Not sampled but summed: for n runs a side (2..20) the probability, under a common rate π, of a
    table with p < 0.05, on a fine grid of π — at most 5 % everywhere; the score test's exceeds it."""
    from scipy import stats
    from statsmodels.stats.proportion import test_proportions_2indep

    grid = np.linspace(0.005, 0.995, 199)
    for n in range(2, 13):
        rejected = [
            (a, b)
            for a in range(n + 1)
            for b in range(n + 1)
            if (p := inf.proportions([inf.Cell(a, n, b, n)]).p) and p < 0.05
        ]
        pmf = stats.binom.pmf(np.arange(n + 1)[:, None], n, grid[None, :])
        size = sum(pmf[a] * pmf[b] for a, b in rejected) if rejected else np.zeros_like(grid)
        assert float(np.max(size)) <= 0.05 + 1e-9, n
    score = test_proportions_2indep(2, 2, 0, 2, method="score", compare="diff", correction=False).pvalue
    assert score < 0.05  # what the report used to print for 2/2 against 0/2; at π = 0.5 that table and its
    # mirror image have probability 2/16 = 12.5 %


@pytest.mark.parametrize("n", SMALL_N)
def test_across_task_success_rate_p_keeps_its_size_at_small_n(n: int) -> None:
    """Three tasks with different base rates, the same rate on both sides within a task (the null of
    the exact conditional test), n runs a side per task: p < 0.05 in at most 5 % of studies."""
    rng = np.random.default_rng(80 + n)
    studies = 1500
    slack = 2 * (0.05 * 0.95 / studies) ** 0.5
    for rates in ((0.1, 0.5, 0.8), (0.3, 0.3, 0.3), (0.5, 0.8, 0.95)):
        res = []
        for _ in range(studies):
            cells = [inf.Cell(int(rng.binomial(n, r)), n, int(rng.binomial(n, r)), n) for r in rates]
            res.append(inf.proportions(cells))
        assert all(r.method == "stratified-newcombe-exact" for r in res)
        assert _rejects(res) <= 0.05 + slack, (n, rates, _rejects(res))


def test_judge_share_rises_with_judge_noise() -> None:
    """Runs whose true TLDR score varies with SD 0.1, graded by a judge with noise σ_j, 3 repeats, 20
    runs per configuration: judge_share from the real merge (grading.panel) estimates
    σ_j²/3 / (0.1² + σ_j²/3), within the upward bias of a ratio over an estimated variance
    (E[1/s²] = σ⁻²·df/(df − 2): 12 % at 19 degrees of freedom)."""
    from benchctl.grading.judge import Tally
    from benchctl.grading.panel import merge
    from benchctl.report.judge_noise import judge_share

    rng = np.random.default_rng(8)
    means = []
    for sigma in (0.02, 0.08, 0.2):
        shares = []
        for _ in range(100):
            scores, variances = [], []
            for _run in range(20):
                q = rng.normal(0.5, 0.1)
                subs = [
                    {"grader": "tldr", "items": [{"id": "holistic", "score": float(q + rng.normal(0, sigma))}]}
                    for _ in range(3)
                ]
                rec = merge("tldr", subs, ["j"], 3, Tally())
                scores.append(rec["score"])
                variances.append(rec["judge_noise"]["var"])
            shares.append(judge_share(scores, variances))
        mean = float(np.mean(shares))
        truth = sigma**2 / 3 / (0.1**2 + sigma**2 / 3)
        assert truth * 0.95 <= mean <= min(1.0, truth * 19 / 17 * 1.1), sigma
        means.append(mean)
    assert means[0] < means[1] < means[2]


def test_the_table_computes_these_functions(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The comparisons table's per-task and across-task rows are exactly inference.welch / stratified
    on the scores of the runs, so the simulations above hold for the table."""
    from benchctl.report.build import build_report
    from tests.rigs.report import add_grade, add_run

    rng = np.random.default_rng(9)
    data: dict[tuple[str, str], list[float]] = {}
    for task, base in (("t1", 0.2), ("t2", 0.7)):
        for model in ("a", "b"):
            data[(task, model)] = [float(x) for x in rng.normal(base + (model == "b") * 0.05, 0.04, 4)]
            for seed, s in enumerate(data[(task, model)]):
                add_grade(tmp_path, "combined", add_run(tmp_path, model=model, seed=seed, task=task), s)
    t = build_report(tmp_path).table("comparisons")
    assert t is not None
    parts = [inf.welch(data[(task, "a")], data[(task, "b")]) for task in ("t1", "t2")]
    want = inf.t_results([*parts, inf.stratified(parts)])
    got = {r["task"]: r for r in t.rows}
    for key, w in zip(("t1", "t2", None), want):
        assert (got[key]["diff"], got[key]["lo"], got[key]["hi"], got[key]["p"], got[key]["mde"]) == (
            w.diff,
            w.lo,
            w.hi,
            w.p,
            w.mde,
        )
