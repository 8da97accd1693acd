"""Comparisons, variants Δ, power and judge-noise statistics: exact values against scipy, statsmodels
and hand computation, and the tables they fill in every report format."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats import proportion as sm_proportion
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.grading.stats import krippendorff_alpha_interval
from benchctl.report import inference as inf
from benchctl.report.aggregate import Options
from benchctl.report.build import build_report
from benchctl.report.render_text import to_csv, to_json_obj, to_markdown
from benchctl.stats import wilson_interval
from tests.rigs.report import add_grade, add_run, write_ratings

A = [0.31, 0.42, 0.38, 0.35, 0.29]
B = [0.52, 0.61, 0.45, 0.70, 0.49, 0.58, 0.66]


def test_welch_matches_scipy() -> None:
    r = inf.t_results([inf.welch(A, B)], clip=None)[0]
    ref = stats.ttest_ind(B, A, equal_var=False)
    ci = ref.confidence_interval()
    assert r.diff == pytest.approx(np.mean(B) - np.mean(A), rel=1e-14)
    assert (r.lo, r.hi) == (pytest.approx(ci.low, rel=1e-12), pytest.approx(ci.high, rel=1e-12))
    assert r.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert (r.n_a, r.n_b, r.paired, r.method) == (5, 7, False, "welch")


def test_paired_t_matches_scipy_and_its_mde_statsmodels() -> None:
    pairs = list(zip(A, B[:5]))
    r = inf.t_results([inf.paired_t(pairs)], clip=None)[0]
    ref = stats.ttest_rel(B[:5], A)
    ci = ref.confidence_interval()
    assert (r.lo, r.hi, r.p) == (
        pytest.approx(ci.low, rel=1e-12),
        pytest.approx(ci.high, rel=1e-12),
        pytest.approx(ref.pvalue, rel=1e-12),
    )
    # one variance component: the exact noncentral-t MDE, as statsmodels' one-sample power solves it
    sd = float(np.std(np.subtract(B[:5], A), ddof=1))
    es = TTestPower().solve_power(nobs=5, alpha=0.05, power=0.8, alternative="two-sided")
    assert r.mde == pytest.approx(es * sd, rel=1e-6)


def test_newcombe_interval_matches_statsmodels_and_p_matches_scipys_boschloo() -> None:
    for ka, na, kb, nb in (
        (3, 16, 9, 16),
        (0, 16, 5, 16),
        (16, 16, 12, 16),
        (2, 10, 7, 12),
        (1, 3, 3, 3),
        (4, 7, 1, 5),
    ):
        r = inf.proportions([inf.Cell(ka, na, kb, nb)])
        lo, hi = sm_proportion.confint_proportions_2indep(kb, nb, ka, na, method="newcomb", compare="diff")
        if r.p is not None and r.p >= 0.05 and (lo > 0 or hi < 0):
            lo, hi = min(lo, 0.0), max(hi, 0.0)  # extended to 0 where the exact test does not reject
        assert (r.lo, r.hi) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
        ref = stats.boschloo_exact([[kb, ka], [nb - kb, na - ka]], alternative="two-sided").pvalue
        # scipy's supremum over the nuisance rate comes from a coarser search: ours is the same or a hair higher
        assert r.p == pytest.approx(ref, rel=1e-5) and r.p >= ref * (1 - 1e-9)
        assert r.method == "newcombe-boschloo"
    same = inf.proportions([inf.Cell(0, 16, 0, 16)])
    assert (same.diff, same.p) == (0.0, 1.0) and same.mde is not None and 0.3 < same.mde < 0.5


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # statsmodels' odds ratio at 2/2
def test_two_of_two_against_none_of_two_is_not_significant() -> None:
    """The score test said p = 0.0455 here (and rejected a true null 12.5 % of the time at 2 runs a side);
    Boschloo's exact p is 0.125, and Newcombe's interval [+0.07, +1.00] is extended to 0 so as not to
    contradict it. No table of 2 runs a side is significant, so the design has no MDE."""
    r = inf.proportions([inf.Cell(0, 2, 2, 2)])
    assert r.p == pytest.approx(0.125, rel=1e-6)
    assert r.lo == 0.0 and r.hi == 1.0 and r.mde is None
    sm_lo, _ = sm_proportion.confint_proportions_2indep(2, 2, 0, 2, method="newcomb", compare="diff")
    assert sm_lo > 0.05  # what Newcombe's interval alone would have printed


def test_significance_and_interval_agree_for_equal_sizes() -> None:
    """Every table of n runs against n (2..12, 16, 20): the printed interval excludes 0 exactly when p < 0.05."""
    for n in (*range(2, 13), 16, 20):
        for ka in range(n + 1):
            for kb in range(n + 1):
                r = inf.proportions([inf.Cell(ka, n, kb, n)])
                assert r.p is not None and r.lo is not None and r.hi is not None
                assert (r.p < 0.05) == (r.lo > 0 or r.hi < 0), (ka, kb, n, r)


def test_exact_power_matches_enumeration_and_the_mde_is_where_it_reaches_80_percent() -> None:
    """Boschloo's power from its rejection region, against a direct sum over all tables of scipy's
    p-values (8 runs a side)."""
    n = 8
    region = [
        (ka, kb)
        for ka in range(n + 1)
        for kb in range(n + 1)
        if stats.boschloo_exact([[kb, ka], [n - kb, n - ka]]).pvalue < 0.05
    ]
    for pa, pb in ((0.25, 0.75), (0.125, 0.625), (0.5, 0.5)):  # pooled rates k/8
        ref = sum(stats.binom.pmf(ka, n, pa) * stats.binom.pmf(kb, n, pb) for ka, kb in region)
        assert inf.proportion_power(pb - pa, [inf.Cell(round((pa + pb) / 2 * n), n, round((pa + pb) / 2 * n), n)]) == (
            pytest.approx(ref, abs=1e-9)
        )
    mde = inf.proportion_mde([inf.Cell(4, n, 4, n)])
    assert mde is not None
    assert (
        inf.proportion_power(mde, [inf.Cell(4, n, 4, n)])
        >= 0.8
        > inf.proportion_power(mde - 0.01, [inf.Cell(4, n, 4, n)])
    )


def test_stratified_proportions_interval_by_hand_and_exact_p_by_enumeration() -> None:
    """MOVER-Wilson for the mean of two cells' differences; the p of the exact conditional test
    against a brute-force sum over every pair of tables with the observed margins; one cell: Fisher."""
    import itertools

    cells = [inf.Cell(2, 10, 8, 10), inf.Cell(3, 8, 7, 8)]
    r = inf.proportions(cells)
    assert r.method == "stratified-newcombe-exact" and r.p is not None and r.p < 0.05
    d = [(0.8, 0.2), (7 / 8, 3 / 8)]
    assert r.diff == pytest.approx(((0.8 - 0.2) + (7 / 8 - 3 / 8)) / 2, rel=1e-15)
    low = high = 0.0
    for (pb, pa), c in zip(d, cells):
        la, ua = wilson_interval(c.k_a, c.n_a)
        lb, ub = wilson_interval(c.k_b, c.n_b)
        low += ((pb - lb) ** 2 + (ua - pa) ** 2) / 4
        high += ((ub - pb) ** 2 + (pa - la) ** 2) / 4
    assert r.lo == pytest.approx(r.diff - math.sqrt(low), rel=1e-12)
    assert r.hi == pytest.approx(r.diff + math.sqrt(high), rel=1e-12)
    # null distribution of b's total successes given each cell's total: product of hypergeometrics
    dists = [
        {xb: stats.hypergeom.pmf(xb, c.n_a + c.n_b, c.n_b, c.k_a + c.k_b) for xb in range(c.n_b + 1)} for c in cells
    ]
    t_obs = sum(c.k_b for c in cells)
    lower = upper = 0.0
    for combo in itertools.product(*[list(d.items()) for d in dists]):
        t = sum(x for x, _ in combo)
        prob = math.prod(q for _, q in combo)
        lower += prob if t <= t_obs else 0.0
        upper += prob if t >= t_obs else 0.0
    assert r.p == pytest.approx(min(1.0, 2 * min(lower, upper)), rel=1e-9)
    from benchctl.report.exact import stratified_exact

    for ka, na, kb, nb in ((2, 10, 8, 10), (1, 5, 4, 6), (0, 3, 3, 3)):
        fisher = min(
            1.0,
            2
            * min(
                stats.fisher_exact([[kb, ka], [nb - kb, na - ka]], alternative=alt).pvalue
                for alt in ("less", "greater")
            ),
        )
        assert stratified_exact([(ka, na, kb, nb)]) == pytest.approx(fisher, rel=1e-9)


def test_stratified_t_by_hand() -> None:
    """Across tasks: the mean of the per-task Welch differences, variance / K², Satterthwaite df."""
    t1, t2 = (A, B), ([0.8, 0.9, 0.85], [0.7, 0.95, 0.9, 0.99])
    parts = [inf.welch(a, b) for a, b in (t1, t2)]
    s = inf.stratified(parts)
    comps = [np.var(x, ddof=1) / len(x) / 4 for pair in (t1, t2) for x in pair]
    dfs = [len(x) - 1 for pair in (t1, t2) for x in pair]
    v = sum(comps)
    df = v * v / sum(c * c / d for c, d in zip(comps, dfs))
    r = inf.t_results([s], clip=None)[0]
    assert r.diff == pytest.approx(((np.mean(B) - np.mean(A)) + (np.mean(t2[1]) - np.mean(t2[0]))) / 2, rel=1e-14)
    half = stats.t.ppf(0.975, df) * math.sqrt(v)
    assert (r.lo, r.hi) == (pytest.approx(r.diff - half, rel=1e-12), pytest.approx(r.diff + half, rel=1e-12))
    assert r.p == pytest.approx(2 * stats.t.sf(abs(r.diff) / math.sqrt(v), df), rel=1e-10)
    assert r.method == "stratified-t" and not parts[0].paired


def test_holm_matches_statsmodels() -> None:
    ps = [0.01, 0.04, None, 0.03, 0.2, 0.005, 0.04]
    got = inf.holm(ps)
    ref = multipletests([p for p in ps if p is not None], method="holm")[1]
    assert [g for g in got if g is not None] == pytest.approx(list(ref), rel=1e-15)
    assert got[2] is None


def test_mde_grid_matches_a_direct_solve_and_plan_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    comps = [((float(rng.uniform(1e-3, 1e-2)), 2.0), (float(rng.uniform(1e-3, 1e-2)), 4.0)) for _ in range(30)]
    grid = np.array(inf.t_mde(comps))
    v = np.array([[c[0] for c in r] for r in comps])
    d = np.array([[c[1] for c in r] for r in comps])
    direct = inf._solve_delta(inf._critical_draws(v, d)) * np.sqrt(v.sum(axis=1))
    assert np.max(np.abs(grid / direct - 1)) < 2e-4
    # the t quantile shortcut used on the draws is scipy's own to 1e-6
    dfs = np.array([1.3, 2.0, 2.7, 5.5, 17.0, 400.0])
    assert np.max(np.abs(inf._t975(dfs) / stats.t.ppf(0.975, dfs) - 1)) < 1e-6
    # runs per configuration for d = Δ/σ = 1: statsmodels' pooled-t answer, or one more (Welch's df)
    need = inf.seeds_for_t(0.2, [0.2])
    ref = math.ceil(TTestIndPower().solve_power(effect_size=1.0, alpha=0.05, power=0.8))
    assert need in (ref, ref + 1)


def test_elo_pairwise_from_bootstrap_samples() -> None:
    from benchctl.tournament.bootstrap import pairwise

    rng = np.random.default_rng(0)
    samples = rng.normal([1000, 1050, 990], [20, 20, 20], size=(999, 3))
    rows = pairwise(samples, np.array([1001.0, 1049.0, 990.0]), ["b", "a", "c"], np.array([True, True, True]))
    assert [(r["a"], r["b"]) for r in rows] == [("a", "b"), ("a", "c"), ("b", "c")]
    ab = rows[0]
    d = samples[:, 0] - samples[:, 1]  # b − a
    assert ab["diff"] == round(1001.0 - 1049.0, 2)
    assert (ab["lo"], ab["hi"]) == (round(float(np.percentile(d, 2.5)), 2), round(float(np.percentile(d, 97.5)), 2))
    assert ab["p"] == min(1.0, 2 * (min(int((d <= 0).sum()), int((d >= 0).sum())) + 1) / 1000)
    none_rated = pairwise(samples, np.zeros(3), ["a", "b", "c"], np.array([True, False, True]))
    assert [(r["a"], r["b"]) for r in none_rated] == [("a", "c")]


def test_alpha_from_record_pieces_is_krippendorffs_alpha() -> None:
    from benchctl.grading.panel import agreement_stats
    from benchctl.report.judge_noise import alpha

    units_1 = [[0.2, 0.3], [0.8, 0.6], [0.5, 0.5]]
    units_2 = [[0.9, 1.0], [0.1, 0.4]]
    pieces = [
        agreement_stats([{"id": str(i), "judge_scores": u} for i, u in enumerate(units)], ["j1", "j2"], 1)  # type: ignore[misc]
        for units in (units_1, units_2)
    ]
    assert alpha(pieces) == pytest.approx(krippendorff_alpha_interval(units_1 + units_2), rel=1e-12)


def test_panel_merge_means_strict_and_jackknife() -> None:
    from benchctl.grading.judge import Tally
    from benchctl.grading.panel import merge

    def cov(scores: list[float]) -> dict:
        items = [
            {"id": f"F{i}", "score": s, "strict": max(2 * s - 1, 0), "cluster": None} for i, s in enumerate(scores)
        ]
        return {"grader": "coverage", "items": items, "score": None, "status": "scored"}

    subs = [cov([0.9, 0.4]), cov([0.7, 0.8]), cov([0.8, 0.3])]
    rec = merge("coverage", subs, ["j"], 3, Tally())
    it = rec["items"]
    assert it[0]["judge_scores"] == [0.9, 0.7, 0.8] and it[0]["score"] == pytest.approx(0.8)
    assert it[0]["strict"] == pytest.approx(0.6) and it[1]["strict"] == pytest.approx(2 * 0.5 - 1 + 1e-16, abs=1e-12)
    assert rec["score"] == pytest.approx((0.6 + 0.0) / 2)
    assert rec["repeats"] == 3 and rec["judge"] == "j" and rec["status"] == "scored"
    # tldr (the score is a plain mean): the jackknife variance is s²/m exactly
    tl = [{"grader": "tldr", "items": [{"id": "holistic", "score": s}], "score": s} for s in (0.5, 0.7, 0.6, 0.9)]
    rec = merge("tldr", tl, ["j"], 4, Tally())
    assert rec["judge_noise"]["var"] == pytest.approx(np.var([0.5, 0.7, 0.6, 0.9], ddof=1) / 4, rel=1e-12)
    tl[1]["items"][0]["score"] = None  # a failed answer: the item keeps the mean of the rest; retried later
    rec = merge("tldr", tl, ["j"], 4, Tally())
    assert rec["score"] == pytest.approx((0.5 + 0.6 + 0.9) / 3) and rec["status"] == "partial"


# ---------------------------------------------------------------- the tables


def _study(root: Path) -> None:
    """Two tasks x two models x two budgets x two variants, 4 seeds; model b better by 0.1 on both tasks."""
    rng = np.random.default_rng(7)
    for task, base in (("wiki", 0.2), ("logs", 0.6)):
        for model, m in (("a", 0.0), ("b", 0.1)):
            for budget, bs in (("10m", 600), ("2h", 7200)):
                for variant in (None, "swap"):
                    for seed in range(4):
                        rid = add_run(
                            root, model=model, budget=budget, budget_s=bs, seed=seed, task=task, variant=variant
                        )
                        add_grade(root, "combined", rid, float(np.clip(base + m + rng.normal(0, 0.03), 0, 1)))


KEYS = [
    "dimension",
    "a",
    "b",
    "task",
    "grader",
    "diff",
    "lo",
    "hi",
    "p",
    "p_holm",
    "mde",
    "n_a",
    "n_b",
    "paired",
    "method",
]


def test_comparisons_table_rows_and_keys(tmp_path: Path) -> None:
    _study(tmp_path)
    rep = build_report(tmp_path)
    t = rep.table("comparisons")
    assert t is not None and [c.key for c in t.columns] == KEYS
    per_task = [r for r in t.rows if r["task"] == "wiki" and r["dimension"] == "model"]
    # model a vs b within wiki for each (budget, variant): 4 rows, Welch over independent runs
    assert len(per_task) == 4 and all(r["method"] == "welch" and not r["paired"] for r in per_task)
    r = next(r for r in per_task if r["a"]["budget"] == "10m" and r["a"]["variant"] == "original")
    assert r["a"] == {"model": "a", "budget": "10m", "budget_s": 600.0, "variant": "original", "fell_back": False}
    assert r["b"]["model"] == "b" and r["grader"] == "combined"
    res = build_report(tmp_path, cache=False).table("comparisons")
    assert res is not None and res.rows[0]["diff"] == t.rows[0]["diff"]
    # the row is Welch on exactly those runs' scores
    from benchctl.report.load import load_results

    runs = load_results(tmp_path).runs

    def scores(model: str) -> list[float]:
        return [
            x.score("combined")  # type: ignore[misc]
            for x in runs
            if x.meta["task"] == "wiki"
            and x.meta["model"] == model
            and x.meta["budget"] == "10m"
            and not x.meta["variant"]
        ]

    ref = stats.ttest_ind(scores("b"), scores("a"), equal_var=False)
    assert r["p"] == pytest.approx(ref.pvalue, rel=1e-12) and r["n_a"] == r["n_b"] == 4
    # variants within a task: paired by seed (the same seeds on both sides)
    var_rows = [r for r in t.rows if r["dimension"] == "variant" and r["task"] is not None]
    assert var_rows and all(r["paired"] and r["method"] == "paired-t" for r in var_rows)
    # across tasks: model pairs pooled over (task, variant) cells, paired by task
    across = [r for r in t.rows if r["task"] is None and r["dimension"] == "model"]
    assert len(across) == 2 and all(r["method"] == "stratified-t" and r["n_a"] == 16 for r in across)
    assert all("variant" not in r["a"] and "task" not in r["a"] for r in across)
    assert all(r["lo"] > 0.05 and r["p_holm"] < 0.05 for r in across)
    # Holm over the whole table
    assert [r["p_holm"] for r in t.rows] == inf.holm([r["p"] for r in t.rows])


def test_comparisons_in_every_format_and_terminal_shows_the_significant(tmp_path: Path) -> None:
    _study(tmp_path)
    rep = build_report(tmp_path)
    t = rep.table("comparisons")
    assert t is not None
    n_sig = sum(1 for r in t.rows if r["p_holm"] is not None and r["p_holm"] < 0.05)
    assert 0 < n_sig < len(t.rows)
    js = to_json_obj(rep)["tables"]["comparisons"]
    assert js["columns"] == KEYS and len(js["rows"]) == len(t.rows)
    json.dumps(js)  # plain JSON values
    rows = list(
        csv.DictReader(
            io.StringIO("".join(line for line in to_csv(rep, "comparisons").splitlines(True) if line[0] != "#"))
        )
    )
    assert len(rows) == len(t.rows) and json.loads(rows[0]["a"])["model"] in ("a", "b")
    md = to_markdown(rep)
    assert "## Comparisons (b − a)" in md and md.count("| wiki |") >= sum(1 for r in t.rows if r["task"] == "wiki")
    from benchctl.report.html import to_html

    assert 'id="comparisons"' in to_html(rep)
    out = CliRunner().invoke(app, ["report", str(tmp_path)], env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    section = out.output.split("Comparisons (b − a)")[1]
    assert f"{n_sig} of {len(t.rows)} comparisons significant after Holm" in section
    body = section.split(f"{n_sig} of {len(t.rows)}")[0]
    assert body.count("│ wiki") + body.count("│ logs") + body.count("│ all (") == n_sig


def test_any_of_n_comparisons_are_proportions(tmp_path: Path) -> None:
    for model, k in (("a", 3), ("b", 11)):
        for seed in range(16):
            rid = add_run(tmp_path, model=model, seed=seed, task="audit")
            add_grade(tmp_path, "any_of_n", rid, 1.0 if seed < k else 0.0)
    t = build_report(tmp_path).table("comparisons")
    assert t is not None and len(t.rows) == 1
    r = t.rows[0]
    lo, hi = sm_proportion.confint_proportions_2indep(11, 16, 3, 16, method="newcomb", compare="diff")
    assert r["method"] == "newcombe-boschloo" and (r["lo"], r["hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert r["diff"] == pytest.approx(0.5)


def test_elo_rows_come_from_ratings(tmp_path: Path) -> None:
    add_grade(tmp_path, "combined", add_run(tmp_path, model="a"), 0.5)
    write_ratings(
        tmp_path,
        {
            "auditor_key": "model",
            "leaderboard": [{"auditor": "x", "elo": 1050, "matches": 4}, {"auditor": "y", "elo": 950, "matches": 4}],
            "pairwise": [{"a": "x", "b": "y", "diff": -100.0, "lo": -180.0, "hi": -30.0, "se": 38.0, "p": 0.004}],
            "flags": {},
        },
    )
    t = build_report(tmp_path).table("comparisons")
    assert t is not None
    (r,) = t.rows
    assert (r["dimension"], r["a"], r["b"], r["grader"], r["method"]) == (
        "auditor",
        {"auditor": "x"},
        {"auditor": "y"},
        "tournament",
        "elo-bootstrap",
    )
    assert r["diff"] == -100.0 and r["mde"] == pytest.approx((inf.Z975 + inf.Z80) * 38.0) and r["p_holm"] == 0.004


def test_variants_delta_with_interval_paired_by_seed(tmp_path: Path) -> None:
    orig = {0: 0.5, 1: 0.6, 2: 0.55, 3: 0.7}
    swap = {0: 0.45, 1: 0.5, 2: 0.52, 3: 0.6}
    for seed in range(4):
        add_grade(tmp_path, "combined", add_run(tmp_path, model="m", seed=seed), orig[seed])
        add_grade(tmp_path, "combined", add_run(tmp_path, model="m", seed=seed, variant="swap"), swap[seed])
    for seed in (0, 1, 2):  # model n: the variant has other seeds, so no pairing: Welch
        add_grade(tmp_path, "combined", add_run(tmp_path, model="n", seed=seed), 0.4 + 0.05 * seed)
        add_grade(tmp_path, "combined", add_run(tmp_path, model="n", seed=seed + 5, variant="swap"), 0.3 + 0.04 * seed)
    t = build_report(tmp_path).table("variants")
    assert t is not None
    m = next(r for r in t.rows if r["config"].startswith("m "))
    ref = stats.ttest_rel(list(swap.values()), list(orig.values()))
    assert m["swap:p"] == pytest.approx(ref.pvalue, rel=1e-12) and m["swap:method"] == "paired-t"
    assert (m["swap:delta_lo"], m["swap:delta_hi"]) == (
        pytest.approx(ref.confidence_interval().low, rel=1e-12),
        pytest.approx(ref.confidence_interval().high, rel=1e-12),
    )
    n = next(r for r in t.rows if r["config"].startswith("n "))
    assert n["swap:method"] == "welch"
    pooled = next(r for r in t.rows if r["config"].startswith("all rows"))
    assert pooled["swap:delta"] == pytest.approx((m["swap:delta"] + n["swap:delta"]) / 2)
    assert pooled["swap:method"] == "stratified-t"


def test_plan_table(tmp_path: Path) -> None:
    _study(tmp_path)
    with pytest.raises(ValueError, match="--plan"):
        build_report(tmp_path, Options(plan=2.0))
    t = build_report(tmp_path, Options(plan=0.05)).table("plan")
    assert t is not None
    wiki = next(r for r in t.rows if r["task"] == "wiki")
    need = wiki["n_needed"]
    sd = wiki["sd"]
    assert 0.02 < sd < 0.04  # the study's noise is 0.03
    comps = lambda n: [(sd * sd / n, n - 1.0)] * 2  # noqa: E731
    assert inf.t_test_power(0.05, comps(need)) >= 0.8 > inf.t_test_power(0.05, comps(need - 1))
    assert any(r["task"] is None for r in t.rows)  # across tasks, paired by task
    out = CliRunner().invoke(app, ["report", str(tmp_path), "--plan", "0.05", "--format", "json"])
    assert out.exit_code == 0
    rows = json.loads(out.output)["tables"]["plan"]["rows"]
    assert next(r for r in rows if r["task"] == "wiki")["n_needed"] == need


# ---------------------------------------------------------------- judge repeats and panels


def test_grade_repeats_judge_share_panels_and_validate(tmp_path: Path) -> None:
    from benchctl.jsonio import read_json
    from benchctl.layout import grade_path
    from tests.rigs.grading import GOOD_REPORT, WEAK_REPORT, make_rubric_task, make_run

    noisy = "scripted/py:benchctl.grading.fake_judge:noisy_judge"
    plain = "scripted/py:benchctl.grading.fake_judge:judge"
    task = make_rubric_task(tmp_path)
    results = tmp_path / "results"
    for i in range(4):
        make_run(results, f"demo__react__m__2m__s{i}", task, {"report.md": GOOD_REPORT if i % 2 else WEAK_REPORT})
    r = CliRunner().invoke(app, ["grade", str(results), "--judge", noisy, "--repeats", "3"])
    assert r.exit_code == 0, r.output
    rec = read_json(grade_path(results, "coverage", "demo__react__m__2m__s1"))
    assert rec["repeats"] == 3 and all(len(it["judge_scores"]) == 3 for it in rec["items"])
    assert all(it["score"] == pytest.approx(sum(it["judge_scores"]) / 3) for it in rec["items"])
    assert isinstance(rec["judge_noise"]["var"], float)
    assert "judge calls: 36" in r.output  # 4 runs x 3 repeats x (2 coverage batches + 1 tldr)
    again = CliRunner().invoke(app, ["grade", str(results), "--judge", noisy, "--repeats", "3"])
    assert "judge calls: 0" in again.output  # cached like any grade
    more = CliRunner().invoke(app, ["grade", str(results), "--judge", noisy, "--repeats", "2"])
    assert "judge calls: 24" in more.output  # another K is another grade
    lb = build_report(results).table("leaderboard")
    assert lb is not None and lb.rows[0]["judge_share"] is not None and 0 <= lb.rows[0]["judge_share"] <= 1
    # validate compares the human score with the mean of the answers
    rec = read_json(grade_path(results, "tldr", "demo__react__m__2m__s1"))
    human = tmp_path / "h.csv"
    human.write_text(f"run_id,grader,item,score\ndemo__react__m__2m__s1,tldr,holistic,{rec['score']}\n")
    v = CliRunner().invoke(
        app, ["grade", "validate", "--human", str(human), "--grades", str(results), "--json", str(tmp_path / "v.json")]
    )
    assert v.exit_code == 0 and read_json(tmp_path / "v.json")["groups"][0]["mae"] == pytest.approx(0.0, abs=1e-12)
    # a panel: both judges answer, the items take the mean, the report shows their agreement
    p = CliRunner().invoke(app, ["grade", str(results), "--judge", plain, "--judge", noisy, "--grader", "tldr"])
    assert p.exit_code == 0, p.output
    rec = read_json(grade_path(results, "tldr", "demo__react__m__2m__s1"))
    assert rec["judges"] == [plain, noisy] and rec["judge"] == f"{plain} + {noisy}"
    jt = build_report(results).table("judges")
    assert jt is not None
    row = next(r for r in jt.rows if r["grader"] == "tldr")
    assert row["alpha"] == pytest.approx(1.0) and set(row["judge_means"]) == {plain, noisy}
    bad = CliRunner().invoke(app, ["grade", str(results), "--judge", plain, "--judge", plain])
    assert bad.exit_code == 2 and "--repeats" in bad.output


def test_elo_rows_count_runs_not_matches(tmp_path: Path) -> None:
    """The row's n_a / n_b ("runs a / b") are each auditor's runs: 3 runs against 3 play 9 matches."""
    add_grade(tmp_path, "combined", add_run(tmp_path, model="a"), 0.5)
    write_ratings(
        tmp_path,
        {
            "auditor_key": "model",
            "leaderboard": [
                {"auditor": "x", "elo": 1050, "matches": 9, "runs": 3},
                {"auditor": "y", "elo": 950, "matches": 9, "runs": 3},
            ],
            "pairwise": [{"a": "x", "b": "y", "diff": -100.0, "lo": -180.0, "hi": -30.0, "se": 38.0, "p": 0.004}],
            "flags": {},
        },
    )
    t = build_report(tmp_path).table("comparisons")
    assert t is not None
    (r,) = t.rows
    assert (r["n_a"], r["n_b"]) == (3, 3)


def test_elo_rows_without_a_bootstrap_keep_the_difference_and_claim_nothing(tmp_path: Path) -> None:
    """ratings.json from one environment: the pairwise row has a difference but no interval or p;
    the comparison shows the difference, is not tested and not counted significant."""
    add_grade(tmp_path, "combined", add_run(tmp_path, model="a"), 0.5)
    write_ratings(
        tmp_path,
        {
            "auditor_key": "model",
            "leaderboard": [{"auditor": "x", "elo": 1050, "matches": 1}, {"auditor": "y", "elo": 950, "matches": 1}],
            "pairwise": [{"a": "x", "b": "y", "diff": -100.0, "lo": None, "hi": None, "se": None, "p": None}],
            "flags": {},
        },
    )
    t = build_report(tmp_path).table("comparisons")
    assert t is not None
    (r,) = t.rows
    assert r["diff"] == -100.0 and (r["lo"], r["hi"], r["p"], r["p_holm"], r["mde"]) == (None,) * 5
    assert "0 with a p-value" in " ".join(t.notes)
