"""Statistics against known values, and judge validation against hand-computed small cases."""

from __future__ import annotations

import pytest

from benchctl.grading.stats import (
    krippendorff_alpha_interval,
    pairwise_accuracy,
    pearson,
    ranks,
    spearman,
)
from benchctl.grading.validate import HumanScoresError, load_human, validate, validate_files
from benchctl.jsonio import write_json_atomic
from benchctl.layout import grade_path
from benchctl.stats import wilson_interval


@pytest.mark.parametrize(
    "k,n,lo,hi",
    [
        (8, 10, 0.4902, 0.9433),  # textbook example
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (5, 16, 0.1416, 0.5560),  # hand-computed
        (0, 0, 0.0, 1.0),
    ],
)
def test_wilson_interval_known_values(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson_interval(k, n)
    assert got[0] == pytest.approx(lo, abs=1e-4) and got[1] == pytest.approx(hi, abs=1e-4)


def test_wilson_z_is_the_exact_normal_quantile() -> None:
    """z = Φ⁻¹(0.975) to the last digit (not 1.96): erf(z/√2) = 0.95, scipy's norm.ppf agrees, and
    the bounds solve Wilson's defining equation (p̂ − p)² = z²·p(1 − p)/n with that z."""
    import math

    from scipy import stats as sps

    from benchctl.stats import Z975

    assert math.erf(Z975 / math.sqrt(2)) == pytest.approx(0.95, abs=2e-16)
    assert Z975 == float(sps.norm.ppf(0.975))
    for k, n in ((8, 10), (5, 16), (1, 3), (15, 16)):
        for bound in wilson_interval(k, n):
            assert (k / n - bound) ** 2 == pytest.approx(Z975**2 * bound * (1 - bound) / n, abs=1e-15)


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_pearson_spearman() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    # monotone but not linear: Spearman 1, Pearson < 1
    assert spearman([1, 2, 3, 4], [1, 4, 9, 100]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [1, 4, 9, 100]) < 0.99
    assert ranks([10, 20, 20, 30]) == [1.0, 2.5, 2.5, 4.0]
    # hand-computed: x=[1,2,3], y=[1,3,2] -> r = 0.5
    assert pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)


def test_pairwise_accuracy_hand_computed() -> None:
    human = [0.9, 0.5, 0.4, 0.1]
    judge = [0.8, 0.8, 0.2, 0.3]
    # pairs with human gap >= 0.2: (0,1) tie -> .5, (0,2) ok, (0,3) ok, (1,3) ok, (2,3) reversed; (1,2) gap .1 skipped
    acc, n = pairwise_accuracy(human, judge)
    assert n == 5 and acc == pytest.approx(3.5 / 5)
    assert pairwise_accuracy([0.5, 0.6], [0.1, 0.9]) == (None, 0)
    assert pairwise_accuracy([0.7, 0.5], [0.9, 0.1])[1] == 1  # 0.7-0.5 is 0.1999... in floats


def test_krippendorff_alpha_interval_reference_example() -> None:
    # Krippendorff's canonical reliability data (4 observers, 12 units); interval alpha = 0.849
    nan = None
    a = [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan]
    b = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3]
    c = [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan]
    d = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]
    assert krippendorff_alpha_interval(list(zip(a, b, c, d))) == pytest.approx(0.849, abs=1e-3)
    assert krippendorff_alpha_interval([[1, 1], [2, 2], [3, 3]]) == pytest.approx(1.0)
    assert krippendorff_alpha_interval([[1, None], [2, None]]) is None


def _write_grades(tmp_path, recs):
    for rec in recs:
        write_json_atomic(grade_path(tmp_path, rec["grader"], rec["run_id"], rec.get("artifact_tag")), rec)


def test_validate_hand_computed(tmp_path) -> None:
    _write_grades(
        tmp_path,
        [
            {
                "grader": "coverage",
                "run_id": "r1",
                "artifact_tag": None,
                "score": 0.5,
                "status": "scored",
                "items": [{"id": "F1", "score": 0.8}, {"id": "F2", "score": 0.2}, {"id": "F3", "score": None}],
            },
            {"grader": "tldr", "run_id": "r1", "artifact_tag": None, "score": 0.9, "status": "scored", "items": []},
            {"grader": "tldr", "run_id": "r2", "artifact_tag": None, "score": 0.3, "status": "scored", "items": []},
            {"grader": "tldr", "run_id": "r3", "artifact_tag": None, "score": 0.3, "status": "scored", "items": []},
        ],
    )
    human = tmp_path / "human.csv"
    human.write_text(
        "run_id,grader,item,score,rater\n"
        "r1,coverage,F1,0.6,ann\nr1,coverage,F2,0.2,ann\nr1,coverage,F3,0.5,ann\n"
        "r1,tldr,holistic,1.0,ann\nr2,tldr,holistic,0.5,ann\nr3,tldr,holistic,0.2,ann\n"
    )
    report = validate_files(human, tmp_path)
    groups = {(g["grader"], g["level"]): g for g in report["groups"]}
    cov = groups[("coverage", "item")]
    # diffs judge-human: F1 +0.2, F2 0.0; F3 has no judge score
    assert cov["n"] == 2 and cov["missing_judge"] == 1
    assert cov["mae"] == pytest.approx(0.1) and cov["bias"] == pytest.approx(0.1)
    assert cov["within_0_1"] == pytest.approx(0.5)
    t = groups[("tldr", "holistic")]
    # diffs: -0.1, -0.2, +0.1 -> MAE 0.1333, bias -0.0667, within 0.1: 2 of 3
    assert t["mae"] == pytest.approx(0.4 / 3) and t["bias"] == pytest.approx(-0.2 / 3)
    assert t["within_0_1"] == pytest.approx(2 / 3)
    # human pairs >= 0.2 apart: (r1,r2) ok, (r1,r3) ok, (r2,r3) judge tie -> 2.5 / 3
    assert t["pairs"] == 3 and t["pairwise_accuracy"] == pytest.approx(2.5 / 3)
    assert t["spearman"] == pytest.approx(pearson([3, 2, 1], [3, 1.5, 1.5]))
    assert t["alpha"] is not None and t["alpha_humans"] is None


def test_validate_averages_raters_and_gives_alpha_among_humans() -> None:
    rows = [
        {"grader": "tldr", "run_id": r, "artifact_tag": None, "item": "holistic", "score": s, "rater": who}
        for r, s, who in [("a", 0.8, "x"), ("a", 0.6, "y"), ("b", 0.2, "x"), ("b", 0.2, "y")]
    ]
    judge = {("tldr", "a", None, "holistic"): 0.7, ("tldr", "b", None, "holistic"): 0.2}
    g = validate(rows, judge)["groups"][0]
    assert g["mae"] == pytest.approx(0.0) and g["raters"] == ["x", "y"]
    assert g["alpha_humans"] is not None and g["alpha"] is not None


def test_human_file_errors_are_clear(tmp_path) -> None:
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"run_id": "r1", "grader": "tldr", "score": 0.5}\n')
    with pytest.raises(HumanScoresError, match="item"):
        load_human(bad)
    bad.write_text('{"run_id": "r1", "grader": "tldr", "item": "holistic", "score": 5}\n')
    with pytest.raises(HumanScoresError, match="outside 0..1"):
        load_human(bad)


def test_unreadable_grade_file_is_a_clear_error(tmp_path) -> None:
    _write_grades(tmp_path, [{"grader": "tldr", "run_id": "r1", "artifact_tag": None, "score": 0.9, "items": []}])
    (tmp_path / "grades" / "tldr" / "r2.json").write_text("{not json")
    human = tmp_path / "human.csv"
    human.write_text("run_id,grader,item,score\nr1,tldr,holistic,0.8\n")
    with pytest.raises(HumanScoresError, match=r"r2\.json: unreadable grade file"):
        validate_files(human, tmp_path)


def test_validate_json_splits_pairs_into_same_tied_reversed(tmp_path) -> None:
    """`grade validate --json` gives the pair split, so a published "343 / 46 / 14" can be checked
    with the tool: here 3 same, 1 tied, 1 reversed (hand-computed), accuracy (3 + 1/2) / 5."""
    import json

    from typer.testing import CliRunner

    from benchctl.cli import app

    human_scores = {"r1": 0.9, "r2": 0.5, "r3": 0.4, "r4": 0.1}
    judge_scores = {"r1": 0.8, "r2": 0.8, "r3": 0.2, "r4": 0.3}
    _write_grades(
        tmp_path,
        [
            {"grader": "tldr", "run_id": r, "artifact_tag": None, "score": s, "status": "scored", "items": []}
            for r, s in judge_scores.items()
        ],
    )
    human = tmp_path / "human.csv"
    human.write_text(
        "run_id,grader,item,score\n" + "".join(f"{r},tldr,holistic,{s}\n" for r, s in human_scores.items())
    )
    out = tmp_path / "v.json"
    r = CliRunner().invoke(
        app, ["grade", "validate", "--human", str(human), "--grades", str(tmp_path), "--json", str(out)]
    )
    assert r.exit_code == 0, r.output
    (g,) = json.loads(out.read_text())["groups"]
    # (r1,r2) judge tie; (r1,r3), (r1,r4), (r2,r4) same order; (r3,r4) reversed; (r2,r3) only 0.1 apart
    assert (g["pairs_same"], g["pairs_tied"], g["pairs_reversed"], g["pairs"]) == (3, 1, 1, 5)
    assert g["pairwise_accuracy"] == pytest.approx(3.5 / 5)
    assert "3 / 1 / 1" in r.output
