"""`benchctl report` numbers from hand-built results directories (expected values computed by hand)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

from benchctl.report.aggregate import Options
from benchctl.report.build import build_report
from benchctl.report.stats import mean_ci, t975
from benchctl.stats import wilson_interval
from tests.rigs.report import add_grade, add_run, coverage_items, write_ratings
from tests.rigs.report_main import OLD, RATINGS, A, B, build_main


def row(report, **key):
    rows = [r for r in report.table("leaderboard").rows if all(r.get(k) == v for k, v in key.items())]
    assert len(rows) == 1, rows
    return rows[0]


def test_leaderboard_numbers(tmp_path: Path) -> None:
    build_main(tmp_path)
    rep = build_report(tmp_path)
    a = row(rep, model=A, budget="10m")
    assert a["n_runs"] == 3 and a["n_scored"] == 3
    half = _t975_closed_form(2) * 0.1 / math.sqrt(3)  # t(0.975, 2) * sd / sqrt(n)
    assert a["score_mean"] == pytest.approx(0.5)
    assert a["score_lo"] == pytest.approx(0.5 - half) and a["score_hi"] == pytest.approx(0.5 + half)
    assert a["score_best"] == pytest.approx(0.6)
    assert a["coverage_mean"] == pytest.approx(0.4) and a["tldr_mean"] == pytest.approx((0.6 + 0.8 + 0.9) / 3)
    assert a["cost_mean_usd"] == pytest.approx(2.0) and a["n_priced"] == 3
    assert a["cost_per_point_usd"] == pytest.approx(6.0 / 150)
    assert a["tokens_mean"] == pytest.approx(1100)
    assert a["elapsed_mean_s"] == pytest.approx(550) and a["budget_used"] == pytest.approx(550 / 600)
    assert a["fallback_label"] == "" and a["errors"] == 0

    b = row(rep, model=B, budget="10m")
    assert (b["n_runs"], b["n_scored"]) == (3, 2)  # the unscored grade is not a 0
    assert b["score_mean"] == pytest.approx(0.25)
    half_b = _t975_closed_form(1) * (0.1 / math.sqrt(2)) / math.sqrt(2)  # n = 2: t(0.975, 1) = 12.7062...
    assert b["score_lo"] == 0.0 and b["score_hi"] == pytest.approx(min(1.0, 0.25 + half_b))  # clipped to 0..1
    assert b["fallback_runs"] == 2 and b["fallback_label"] == f"2/3 fell back to {OLD}"
    assert b["n_priced"] == 2 and b["cost_mean_usd"] == pytest.approx(0.5)
    assert b["cost_per_point_usd"] == pytest.approx(0.5 / 30)  # only r1 has both a cost and a score

    b30 = row(rep, model=B, budget="30m")
    assert (b30["n_runs"], b30["n_scored"], b30["errors"], b30["refused"]) == (3, 2, 1, 1)
    assert b30["score_mean"] == pytest.approx(0.25)  # (0.5 + 0.0)/2; the error run's 0.9 is not used
    # rows ordered by budget, then score
    assert [(r["model"], r["budget"]) for r in rep.table("leaderboard").rows] == [(A, "10m"), (B, "10m"), (B, "30m")]


def test_unscored_and_failed_runs_listed(tmp_path: Path) -> None:
    build_main(tmp_path)
    rep = build_report(tmp_path)
    un = {r["run_id"]: r for r in rep.table("unscored").rows}
    assert len(un) == 2
    reasons = sorted(r["reason"] for r in un.values())
    assert reasons[0].startswith("grade unscored") and reasons[1] == "run error: sandbox died"
    assert "judge" not in reasons[0] and "grades/combined/" in reasons[0]  # not always the judge's fault
    # (build_main's unscored grade records no error: the reason says so rather than inventing one)
    assert "2 of 9 runs" in rep.table("unscored").notes[0]


def test_unscored_runs_say_why_from_the_grade_record(tmp_path: Path) -> None:
    """The unscored list said "the grade file ... says why": it now carries the record's `error` (or
    its first failed item's), on one line, and agent- or judge-written text in it stays text: escaped
    in HTML, not read as markup by the terminal."""
    import json

    from typer.testing import CliRunner

    from benchctl.cli import app
    from benchctl.report.html import to_html

    hostile = "judge gave no score:\n  report says [bold red]PASS[/bold red] <script>alert(1)</script>"
    a = add_run(tmp_path, model=A, seed=0)
    add_grade(tmp_path, "combined", a, None)
    b = add_run(tmp_path, model=A, seed=1)
    add_grade(
        tmp_path,
        "combined",
        b,
        None,
        items=[{"id": "F1", "score": None, "error": "unreadable answer"}, {"id": "F2", "score": None}],
    )
    c = add_run(tmp_path, model=A, seed=2)
    add_grade(tmp_path, "combined", c, None)
    path = tmp_path / "grades" / "combined" / f"{a}.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"error": hostile}))
    rep = build_report(tmp_path)
    why = {r["run_id"]: r["reason"] for r in rep.table("unscored").rows}
    assert why[a] == (
        "grade unscored: judge gave no score: report says [bold red]PASS[/bold red] <script>alert(1)</script>"
    )
    assert why[b] == "grade unscored: item F1: unreadable answer (and 1 more unscored items)"
    assert why[c] == "grade unscored: no score and no error recorded in grades/combined/"
    page = to_html(rep)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    out = CliRunner().invoke(app, ["report", str(tmp_path), "--table", "unscored"], env={"COLUMNS": "400"}).output
    assert "[bold red]PASS[/bold red]" in out


def test_fallback_options(tmp_path: Path) -> None:
    build_main(tmp_path)
    ex = build_report(tmp_path, Options(exclude_fallback=True))
    b = row(ex, model=B, budget="10m")
    assert (b["n_runs"], b["n_scored"], b["score_mean"]) == (1, 1, pytest.approx(0.2))
    assert any("2 runs that fell back" in n for n in ex.table("leaderboard").notes)
    sep = build_report(tmp_path, Options(separate_fallback=True))
    fb = row(sep, model=B, budget="10m", fell_back=True)
    clean = row(sep, model=B, budget="10m", fell_back=False)
    assert (fb["n_runs"], fb["n_scored"], fb["score_mean"]) == (2, 1, pytest.approx(0.3))
    assert fb["fallback_label"] == f"2/2 fell back to {OLD}" and clean["fallback_label"] == ""
    with pytest.raises(ValueError, match="contradict"):
        build_report(tmp_path, Options(exclude_fallback=True, separate_fallback=True))


def test_breakdowns(tmp_path: Path) -> None:
    build_main(tmp_path)
    rep = build_report(tmp_path)
    cl = rep.table("clusters").rows
    assert len(cl) == 1 and cl[0]["n_scored"] == 3
    assert cl[0]["operators"] == pytest.approx(0.5) and cl[0]["timeline"] == pytest.approx(0.3)
    f = {r["finding"]: r for r in rep.table("findings").rows}
    assert f["F1"]["hit_rate"] == 1.0 and f["F1"]["n_scored"] == 3
    assert f["F2"]["hit_rate"] == pytest.approx(1 / 3) and f["F2"]["mean_strict"] == pytest.approx(0.4 / 3)
    assert f["F3"]["n_scored"] == 2 and f["F3"]["hit_rate"] == 0.0  # the unscored item is skipped
    assert f["F2"][f"hit:{A}"] == pytest.approx(1 / 3) and f["F1"]["cluster"] == "operators"
    fu = rep.table("followups").rows
    assert len(fu) == 1 and fu[0]["n_pairs"] == 2 and fu[0]["artifact"] == "followup-1"
    assert fu[0]["main_mean"] == pytest.approx(0.35) and fu[0]["followup_mean"] == pytest.approx(0.475)
    assert fu[0]["gain_mean"] == pytest.approx(0.125)
    half = _t975_closed_form(1) * math.sqrt(((0.2 - 0.125) ** 2 + (0.05 - 0.125) ** 2) / 1) / math.sqrt(2)
    assert fu[0]["gain_lo"] == pytest.approx(0.125 - half) and fu[0]["gain_hi"] == 1.0  # clipped to the gain's range


def test_cluster_labels_leave_out_an_empty_tool_configuration(tmp_path: Path) -> None:
    """Runs without a tool configuration beside runs with one: the former's label ended in " · "."""
    for tools in (None, "probe"):
        rid = add_run(tmp_path, model=A, tools=tools)
        add_grade(tmp_path, "coverage", rid, 0.5, by_cluster={"operators": 0.5})
    labels = sorted(r["config"] for r in build_report(tmp_path).table("clusters").rows)
    assert labels == sorted([f"{A} · 10m", f"{A} · 10m · probe"]), labels
    assert not any(label.endswith(("·", "· ")) for label in labels)


def test_finding_mean_strict_is_exactly_rounded(tmp_path: Path) -> None:
    """mean_strict is the exact mean rounded once, whatever the order of the runs: adding 0.1, 0.2
    and 0.7 one run at a time drifts in the last digits (it did, before the findings table counted
    the distinct scores)."""
    strict = [0.1, 0.2, 0.7, 0.3] * 250
    for seed, v in enumerate(strict):
        rid = add_run(tmp_path, model=A, seed=seed)
        add_grade(tmp_path, "coverage", rid, v, items=coverage_items({"F1": v}, {"F1": "c"}))
    rows = {r["finding"]: r for r in build_report(tmp_path).table("findings").rows}
    exact = float(sum(map(Fraction, strict)) / len(strict))
    running = 0.0
    for v in strict:
        running += v
    assert running / len(strict) != exact  # the drift this test is about exists
    assert rows["F1"]["mean_strict"] == exact and rows["F1"]["n_scored"] == 1000


def test_cost_sums_are_exactly_rounded(tmp_path: Path) -> None:
    """$ / point and the grading cost are exactly rounded sums (math.fsum), not running sums that
    drift with the number and order of the runs: ten grades of $0.1 cost $1.0, not 0.9999999999999999."""
    for seed in range(10):
        rid = add_run(tmp_path, model=A, seed=seed, cost_usd=0.7)
        add_grade(tmp_path, "coverage", rid, 0.1, cost_usd=0.1)
    rep = build_report(tmp_path)
    assert sum([0.1] * 10) != 1.0 and sum([0.7] * 10) / (sum([0.1] * 10) * 100) != 0.07  # the drift exists
    assert rep.provenance["grading_cost_usd"] == 1.0
    assert row(rep, model=A, budget="10m")["cost_per_point_usd"] == math.fsum([0.7] * 10) / (
        math.fsum([0.1] * 10) * 100
    )


def test_variants_side_by_side(tmp_path: Path) -> None:
    for seed, s in enumerate([0.4, 0.6]):
        add_grade(tmp_path, "combined", add_run(tmp_path, model=A, seed=seed), s)
    for seed, s in enumerate([0.3, 0.5]):
        add_grade(
            tmp_path, "combined", add_run(tmp_path, model=A, seed=seed, variant="swapped", task_hash="sha256:task2"), s
        )
    add_run(tmp_path, model=A, seed=2, variant="swapped", task_hash="sha256:task2", status="error")
    rep = build_report(tmp_path)
    v = rep.table("variants").rows
    assert len(v) == 1
    assert v[0]["original:mean"] == pytest.approx(0.5) and v[0]["swapped:mean"] == pytest.approx(0.4)
    assert v[0]["swapped:delta"] == pytest.approx(-0.1) and v[0]["swapped:n"] == 2
    assert v[0]["swapped:runs"] == 3  # the error run is counted, not averaged
    header, cells = rep.table("variants").view()
    assert dict(zip(header, cells[0]))["swapped"] == "0.400 (2 of 3)"
    assert {r["variant"] for r in rep.table("leaderboard").rows} == {"original", "swapped"}
    assert rep.provenance["task_hashes"] == {"wiki": {"sha256:task1": 2}, "wiki~swapped": {"sha256:task2": 3}}
    assert not rep.warnings  # different hashes per variant are expected


def test_mixed_judges_and_rubrics_warn(tmp_path: Path) -> None:
    add_grade(tmp_path, "coverage", add_run(tmp_path, model=A, seed=0), 0.5, judge="judge/one")
    add_grade(tmp_path, "coverage", add_run(tmp_path, model=A, seed=1), 0.5, judge="judge/two", rubric_hash="rub2")
    add_grade(
        tmp_path, "coverage", add_run(tmp_path, model=A, seed=2, task_hash="sha256:other"), 0.5, judge="judge/two"
    )
    rep = build_report(tmp_path)
    w = " ".join(rep.warnings)
    assert "Mixed judges in `coverage`" in w and "judge/one (1)" in w and "judge/two (2)" in w
    assert "Mixed rubric versions in `coverage`" in w
    assert "Task `wiki` was run on different contents" in w
    assert rep.provenance["judges"] == {"coverage": {"judge/two": 2, "judge/one": 1}}


def test_one_judge_no_warning(tmp_path: Path) -> None:
    build_main(tmp_path)
    assert build_report(tmp_path).warnings == []


def test_any_of_n_wilson(tmp_path: Path) -> None:
    verdicts = [1.0] * 5 + [0.0] * 10 + [None]
    for seed, v in enumerate(verdicts):
        add_grade(tmp_path, "any_of_n", add_run(tmp_path, model=A, seed=seed, tools="chat"), v)
    add_run(tmp_path, model=A, seed=99, tools="chat", status="error", error="boom")
    for seed in range(4):
        add_grade(tmp_path, "any_of_n", add_run(tmp_path, model=A, seed=seed, tools="scaffold"), 1.0)
    rep = build_report(tmp_path)
    rows = {r["tools"]: r for r in rep.table("any_of_n").rows}
    chat = rows["chat"]
    assert (chat["successes"], chat["n_scored"], chat["n_runs"], chat["n_unscored"], chat["n_not_averaged"]) == (
        5,
        15,
        17,
        1,
        1,
    )
    assert chat["rate"] == pytest.approx(1 / 3)
    # Wilson by hand: p=1/3, n=15, z=1.96
    z, n, p = 1.96, 15, 1 / 3
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert chat["rate_lo"] == pytest.approx(c - h, abs=1e-4) and chat["rate_hi"] == pytest.approx(c + h, abs=1e-4)
    assert rows["scaffold"]["rate"] == 1.0 and rows["scaffold"]["rate_hi"] == pytest.approx(1.0)
    assert rows["scaffold"]["rate_lo"] < 1.0


def _target_tools(target_cost: float | None, aux_cost: float | None) -> dict:
    """meta.json target_tools in the shape benchctl.targets.tools.TargetTools.summary() writes."""

    def tally(cost: float | None) -> dict:
        return {"calls": 3, "errors": 0, "usage": {"input_tokens": 300, "output_tokens": 60}, "cost_usd": cost}

    return {
        "tool_config": "scaffold",
        "tools": ["chat", "scaffold_prefill"],
        "tool_calls": {"chat": 2},
        "conversations": 1,
        "target_model": "openai-compatible/prism-4",
        "auxiliary_model": "anthropic/aux",
        "target": tally(target_cost),
        "auxiliary": tally(aux_cost),
    }


def test_any_of_n_costs_investigator_and_target_apart(tmp_path: Path) -> None:
    """Target + auxiliary cost (meta target_tools) is shown next to the investigator's own cost;
    an unknown cost (None, or no target_tools) is left out of the mean and counted, never read as 0."""
    priced = [(1.0, _target_tools(0.2, 0.0)), (2.0, _target_tools(0.3, 0.1)), (None, _target_tools(None, 0.1))]
    for seed, (inv, tt) in enumerate(priced):
        add_grade(
            tmp_path,
            "any_of_n",
            add_run(tmp_path, model=A, seed=seed, tools="scaffold", cost_usd=inv, target_tools=tt),
            1.0,
        )
    add_run(
        tmp_path,
        model=A,
        seed=9,
        tools="scaffold",
        status="error",
        cost_usd=50.0,
        target_tools=_target_tools(50.0, 0.0),
    )  # error runs are not costed
    for seed in range(2):  # no target_tools record at all
        add_grade(tmp_path, "any_of_n", add_run(tmp_path, model=A, seed=seed, tools="chat", cost_usd=0.5), 0.0)
    t = build_report(tmp_path).table("any_of_n")
    rows = {r["tools"]: r for r in t.rows}
    sc = rows["scaffold"]
    assert sc["investigator_cost_mean_usd"] == pytest.approx(1.5) and sc["n_investigator_priced"] == 2
    assert sc["target_cost_mean_usd"] == pytest.approx(0.3) and sc["n_target_priced"] == 2
    assert sc["target_only_cost_mean_usd"] == pytest.approx(0.25) and sc["auxiliary_cost_mean_usd"] == pytest.approx(
        0.2 / 3
    )
    ch = rows["chat"]
    assert ch["investigator_cost_mean_usd"] == pytest.approx(0.5)
    assert ch["target_cost_mean_usd"] is None and ch["n_target_priced"] == 0
    header, cells = t.view()
    by_tools = {row[header.index("tools")]: dict(zip(header, row)) for row in cells}
    assert by_tools["scaffold"]["investigator cost"] == "$1.50 (2 of 3 priced)"
    assert by_tools["scaffold"]["target+aux cost"] == "$0.3000 (2 of 3 priced)"
    assert by_tools["chat"]["investigator cost"] == "$0.5000" and by_tools["chat"]["target+aux cost"] == "–"
    assert sc["target"] == "openai-compatible/prism-4" and by_tools["scaffold"]["target"] == "openai-compatible/prism-4"
    assert ch["target"] is None and by_tools["chat"]["target"] == "–"


def test_tournament_tables(tmp_path: Path) -> None:
    rid = add_run(tmp_path, model=A, task="envx")
    add_grade(tmp_path, "tournament", rid, 0.64, judge="judge/dedup")
    write_ratings(tmp_path, RATINGS)
    (tmp_path / "grades" / "tournament" / "canonical").mkdir()  # sub-dirs are not grades
    rep = build_report(tmp_path)
    t = rep.table("tournament")
    assert [r["auditor"] for r in t.rows] == [A, B] and t.rows[0]["elo"] == 1100.0
    header, cells = t.view()
    assert "1100 (1050–1160)" in cells[0] and "$4.50" in cells[0] and "–" in cells[1]
    assert cells[0][header.index("total cost")] == "$4.50"  # a sum over the auditor's runs, labelled so
    ov = rep.table("overlap").rows
    assert ov[0][B] == 0.5 and ov[1][A] == 0.75 and ov[0][A] is None
    m = rep.table("matches").rows[0]
    assert (m["cancelled"], m["points_a"], m["share_a"]) == (1, 13.0, pytest.approx(13 / 19))
    assert rep.provenance["tournament_canonical_hashes"] == {"envx": "c1"}
    assert not any("unknown run" in w for w in rep.warnings)
    flagged = RATINGS | {
        "flags": RATINGS["flags"]
        | {"disconnected": True, "components": [[A], [B]], "match_rows_omitted": True, "excluded_runs": ["rx"]}
    }
    write_ratings(tmp_path, flagged)
    notes = " ".join(build_report(tmp_path).table("tournament").notes)
    assert "disconnected" in notes and f"{A} | {B}" in notes and "omitted" in notes and "rx" in notes
    assert "could not be read" in notes and "ratings use every match" in notes


def test_tournament_on_one_environment_says_why_it_has_no_interval(tmp_path: Path) -> None:
    """The table's note promises bootstrap intervals over environments; with one environment the
    rated auditors have none, and the table says why instead of leaving bare Elos."""
    add_grade(tmp_path, "tournament", add_run(tmp_path, model=A, task="envx"), 0.64, judge="judge/dedup")
    one = RATINGS | {"leaderboard": [r | {"lo": None, "hi": None, "rank": 1} for r in RATINGS["leaderboard"]]}
    write_ratings(tmp_path, one)
    assert "played on one environment" in " ".join(build_report(tmp_path).table("tournament").notes)
    write_ratings(tmp_path, RATINGS)
    assert "played on one environment" not in " ".join(build_report(tmp_path).table("tournament").notes)


def test_not_a_results_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a results directory"):
        build_report(tmp_path)


def _t975_closed_form(df: int) -> float:
    """The Student-t 0.975 quantile from its closed forms (Hill 1970), independent of scipy."""
    p = 0.975
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    a = 4 * p * (1 - p)  # df == 4
    return 2 * math.sqrt(math.cos(math.acos(math.sqrt(a)) / 3) / math.sqrt(a) - 1)


@pytest.mark.parametrize("df", [1, 2, 4])
def test_t_quantile_is_exact(df: int) -> None:
    assert t975(df) == pytest.approx(_t975_closed_form(df), rel=1e-13)


def test_t_interval_bounds_are_exact() -> None:
    """Two seeds scoring 0.2 and 0.6: half-width = t(0.975, 1) * s / sqrt(2), to float precision
    (a 3-decimal table put the bounds 1e-4 off while CSV and JSON present them as exact)."""
    mean, lo, hi = mean_ci([0.2, 0.6])
    half = _t975_closed_form(1) * math.sqrt(0.08) / math.sqrt(2)
    assert mean == pytest.approx(0.4, abs=1e-15)
    assert lo == pytest.approx(0.4 - half, abs=1e-12) and hi == pytest.approx(0.4 + half, abs=1e-12)
    # three seeds, df = 2, closed form again
    _, lo3, hi3 = mean_ci([0.1, 0.4, 0.4])
    half3 = _t975_closed_form(2) * math.sqrt(0.03 / 3)
    assert lo3 == pytest.approx(0.3 - half3, abs=1e-12) and hi3 == pytest.approx(0.3 + half3, abs=1e-12)


def test_stats_helpers() -> None:
    from scipy import stats as sps

    for df in (3, 7, 29, 31, 45, 119, 1000):  # the library's own t.ppf, over the old table's range
        assert t975(df) == pytest.approx(float(sps.t.ppf(0.975, df)), rel=1e-13)
    assert mean_ci([]) == (None, None, None) and mean_ci([0.3]) == (0.3, None, None)
    assert wilson_interval(0, 16)[0] == 0.0 and wilson_interval(0, 16)[1] > 0.1


def test_leaderboard_gives_no_zero_width_interval(tmp_path: Path) -> None:
    """Three seeds with the same score: the t-interval would be [0.6, 0.6], a certainty three runs
    cannot give; the row has the mean and no interval (as one run has), the next row keeps its own."""
    for seed in range(3):
        add_grade(tmp_path, "combined", add_run(tmp_path, model="same", seed=seed), 0.6)
        add_grade(tmp_path, "combined", add_run(tmp_path, model="spread", seed=seed), 0.3 + 0.1 * seed)
    rows = {r["model"]: r for r in build_report(tmp_path).table("leaderboard").rows}
    assert (rows["same"]["score_mean"], rows["same"]["score_lo"], rows["same"]["score_hi"]) == (0.6, None, None)
    assert rows["spread"]["score_lo"] < 0.4 < rows["spread"]["score_hi"]
    assert mean_ci([0.6, 0.6, 0.6]) == (0.6, None, None)


def test_leaderboard_success_rate_has_the_wilson_interval(tmp_path: Path) -> None:
    """An any-of-N row is a success rate: 2 of 2 gets the any-of-N table's Wilson interval
    [0.34, 1], not the t-interval [1, 1] of two equal 0/1 scores."""
    for seed in range(2):
        add_grade(tmp_path, "any_of_n", add_run(tmp_path, model="m", task="hb", seed=seed), 1.0)
    rep = build_report(tmp_path)
    (row,) = rep.table("leaderboard").rows
    assert (row["score_lo"], row["score_hi"]) == pytest.approx(wilson_interval(2, 2))
    (aon,) = rep.table("any_of_n").rows
    assert (row["score_lo"], row["score_hi"]) == (aon["rate_lo"], aon["rate_hi"])


def test_tournament_from_the_real_writer(tmp_path: Path) -> None:
    """ratings.json and per-run tournament grades written by benchctl.tournament, read back."""
    from benchctl.tournament.canonical import save_canonical
    from benchctl.tournament.grader import rate_from_canonical

    for env, found in (("env1", {A: True, B: False}), ("env2", {A: True, B: True})):
        ids = {m: add_run(tmp_path, model=m, task=env, cost_usd=1.0) for m in (A, B)}
        runs = {
            rid: {"task": env, "harness": "react", "model": m, "budget": "10m", "variant": None, "seed": 0}
            for m, rid in ids.items()
        }
        issues = [
            {
                "id": "I1",
                "title": "shared",
                "importance": "high",
                "found_by": {rid: {"supported": True} for rid in ids.values()},
            },
            {"id": "I2", "title": "only A", "importance": "medium", "found_by": {ids[A]: {"supported": True}}},
            {"id": "I3", "title": "B maybe", "importance": "low", "found_by": {ids[B]: {"supported": found[B]}}},
        ]
        save_canonical(
            tmp_path,
            {
                "schema": 1,
                "env": env,
                "status": "ok",
                "judge": "judge/dedup",
                "runs": runs,
                "issues": issues,
                "cost_usd": 0.2,
            },
        )
    ratings = rate_from_canonical(tmp_path, rounds=50)
    rep = build_report(tmp_path)
    t = rep.table("tournament")
    assert [r["auditor"] for r in t.rows] == [r["auditor"] for r in ratings["leaderboard"]]
    assert t.rows[0]["elo"] == pytest.approx(ratings["leaderboard"][0]["elo"]) and t.rows[0]["auditor"] == A
    assert t.rows[0]["cost_usd"] == pytest.approx(2.0)
    assert rep.table("matches") is not None and rep.table("overlap") is not None
    # per-env canonical hashes differ: that is not a "mixed rubric" within a task
    assert not any("rubric" in w for w in rep.warnings), rep.warnings
    assert rep.provenance["judges"]["tournament"] == {"judge/dedup": 4}


def test_by_harness_and_tokens(tmp_path: Path) -> None:
    usage = {
        "input_tokens": 100,
        "cached_input_tokens": 900,
        "cache_write_tokens": 50,
        "output_tokens": 40,
        "reasoning_tokens": 30,
    }
    add_grade(tmp_path, "combined", add_run(tmp_path, model=A, harness="react", usage=usage), 0.2)
    add_grade(tmp_path, "combined", add_run(tmp_path, model=A, harness="codex", usage=usage), 0.6)
    auto = build_report(tmp_path).table("leaderboard")
    assert {(r["harness"], r["score_mean"]) for r in auto.rows} == {("react", 0.2), ("codex", 0.6)}
    assert auto.rows[0]["tokens_mean"] == 1090 and auto.rows[0]["input_tokens_mean"] == 1050
    assert auto.rows[0]["output_tokens_mean"] == 40  # reasoning is part of output, not added
    merged = build_report(tmp_path, Options(by="model")).table("leaderboard")
    assert len(merged.rows) == 1 and "harness" not in merged.rows[0]
    assert merged.rows[0]["score_mean"] == pytest.approx(0.4) and merged.rows[0]["n_runs"] == 2


def test_component_means_say_how_many_runs(tmp_path: Path) -> None:
    for seed, cov in enumerate([0.4, None, 0.6]):
        rid = add_run(tmp_path, model=A, seed=seed)
        add_grade(tmp_path, "coverage", rid, cov, by_cluster={} if cov is None else {"ops": cov})
    rep = build_report(tmp_path)
    header, cells = rep.table("leaderboard").view()
    row = dict(zip(header, cells[0]))
    assert row["coverage (95% CI)"].startswith("0.500 [") and row["scored"] == "2 of 3"
    assert row["coverage"] == "0.500 (2 of 3)"
    header, cells = rep.table("clusters").view()
    assert dict(zip(header, cells[0]))["scored"] == "2 of 3"


def test_grading_cost_unknown_is_said_not_hidden(tmp_path: Path) -> None:
    """Grades whose judge cost is unknown: the provenance line says so rather than disappearing
    (a total of $0 known must not read as "free")."""
    from benchctl.report.provenance import provenance_lines

    rid = add_run(tmp_path, model=A)
    add_grade(tmp_path, "tldr", rid, 0.5, cost_usd=None)
    lines = provenance_lines(build_report(tmp_path).provenance)
    assert "grading cost: $0.0000 (+1 grades of unknown cost)" in lines
