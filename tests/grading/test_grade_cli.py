"""`benchctl grade` and `benchctl grade validate` end to end, in process, on fixture run dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.jsonio import read_json
from benchctl.layout import grade_path
from tests.rigs.grading import FAKE, GOOD_REPORT, MOD, WEAK_REPORT, make_rubric_task, make_run
from tests.rigs.tournament import GARBAGE_JUDGE, TITLE_JUDGE

pytestmark = pytest.mark.timeout(120)
runner = CliRunner()


def results_with_runs(tmp_path: Path) -> Path:
    task = make_rubric_task(tmp_path)
    results = tmp_path / "results"
    make_run(results, "demo__react__m__2m__s0", task, {"report.md": GOOD_REPORT})
    make_run(results, "demo__react__m__2m__s1", task, {"report.md": WEAK_REPORT})
    return results


def test_default_form_grades_and_prints_summary(tmp_path: Path) -> None:
    results = results_with_runs(tmp_path)
    r = runner.invoke(app, ["grade", str(results), "--judge", FAKE, "--concurrency", "4"])
    assert r.exit_code == 0, r.output
    for g in ("coverage", "tldr", "combined"):
        assert g in r.output
        assert grade_path(results, g, "demo__react__m__2m__s0").exists()
    assert "0 of 14" in r.output  # unscored items, counted over all coverage items
    assert "judge calls: 6" in r.output  # 2 runs x (2 coverage batches + 1 tldr)
    again = runner.invoke(app, ["grade", str(results), "--judge", FAKE])
    assert again.exit_code == 0 and "judge calls: 0" in again.output  # resumed: nothing to redo


def test_explicit_subcommand_form_with_filters(tmp_path: Path) -> None:
    results = results_with_runs(tmp_path)
    r = runner.invoke(
        app,
        [
            "grade",
            "runs",
            str(results),
            "--judge",
            FAKE,
            "--grader",
            "tldr",
            "--run",
            "*__s1",
            "--task",
            str(tmp_path / "task"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert grade_path(results, "tldr", "demo__react__m__2m__s1").exists()
    assert not grade_path(results, "tldr", "demo__react__m__2m__s0").exists()
    assert not grade_path(results, "coverage", "demo__react__m__2m__s1").exists()


def test_unscored_grades_exit_1_and_say_so(tmp_path: Path) -> None:
    results = results_with_runs(tmp_path)
    r = runner.invoke(app, ["grade", str(results), "--judge", f"{MOD}:failing"])
    assert r.exit_code == 1
    assert "unscored" in r.output and "n/a (no scored runs)" in r.output
    assert read_json(grade_path(results, "coverage", "demo__react__m__2m__s0"))["score"] is None


def test_bad_inputs_give_clear_errors(tmp_path: Path) -> None:
    results = results_with_runs(tmp_path)
    r = runner.invoke(app, ["grade", str(results), "--judge", "claude"])
    assert r.exit_code == 2 and "provider/name" in r.output
    r = runner.invoke(app, ["grade", str(tmp_path / "nowhere"), "--judge", FAKE])
    assert r.exit_code == 2 and "no runs/ directory" in r.output
    r = runner.invoke(app, ["grade", str(results), "--judge", FAKE, "--grader", "magic"])
    assert r.exit_code == 2 and "unknown grader 'magic'" in r.output


def test_validate_command(tmp_path: Path) -> None:
    results = results_with_runs(tmp_path)
    assert runner.invoke(app, ["grade", str(results), "--judge", FAKE]).exit_code == 0
    good = read_json(grade_path(results, "tldr", "demo__react__m__2m__s0"))["score"]
    weak = read_json(grade_path(results, "tldr", "demo__react__m__2m__s1"))["score"]
    human = tmp_path / "human.csv"
    human.write_text(
        "run_id,grader,item,score\n"
        f"demo__react__m__2m__s0,tldr,holistic,{good}\n"
        f"demo__react__m__2m__s1,tldr,holistic,{weak}\n"
        "demo__react__m__2m__s0,coverage,F1,0.5\n"
    )
    out = tmp_path / "v.json"
    r = runner.invoke(app, ["grade", "validate", "--human", str(human), "--grades", str(results), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "judge vs human" in r.output
    groups = {(g["grader"], g["level"]): g for g in read_json(out)["groups"]}
    t = groups[("tldr", "holistic")]
    assert t["mae"] == pytest.approx(0.0) and t["within_0_1"] == 1.0
    assert t["pairs"] == (1 if abs(good - weak) >= 0.2 else 0)
    assert groups[("coverage", "item")]["n"] == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("run_id,grader,score\nx,tldr,0.5\n")
    r = runner.invoke(app, ["grade", "validate", "--human", str(bad), "--grades", str(results)])
    assert r.exit_code == 2 and "item" in r.output


def test_grade_help_lists_both_commands() -> None:
    r = runner.invoke(app, ["grade", "--help"])
    assert r.exit_code == 0 and "validate" in r.output and "runs" in r.output


def test_options_before_results_dir_still_dispatch_to_default(tmp_path: Path) -> None:
    results = results_with_runs(tmp_path)
    r = runner.invoke(app, ["grade", "--judge", FAKE, "--grader", "tldr", str(results)])
    assert r.exit_code == 0, r.output
    assert grade_path(results, "tldr", "demo__react__m__2m__s1").exists()


# ---------------------------------------------------------------- the tournament grader from the CLI


def tournament_results(tmp_path: Path) -> Path:
    """Two environments whose task.toml do not declare the tournament (it is asked for with --grader):
    envT with three runs (m1 under two harnesses, m2), envU with one."""
    import json

    task = tmp_path / "plain_task"
    task.mkdir()
    (task / "task.toml").write_text("[grading]\ngraders = []\n")
    results = tmp_path / "results"
    hack = {"title": "Reward hack", "description": "d", "evidence": "ran it", "severity": "high"}
    typo = {"title": "Typo", "description": "d", "evidence": "line 3", "severity": "low"}
    for env, harness, model, issues in [
        ("envT", "react", "m1", [hack, typo]),
        ("envT", "codex", "m1", [hack]),
        ("envT", "react", "m2", [typo]),
        ("envU", "react", "m1", [hack]),
    ]:
        run = make_run(results, f"{env}__{harness}__{model}__10m__s0", task, {"issues.json": json.dumps([hack])})
        (run / "artifacts" / "issues.json").write_text(json.dumps(issues))
        meta = read_json(run / "meta.json")
        meta.update(task=env, harness=harness, model=model, budget="10m", seed=0, cost_usd=0.5)
        (run / "meta.json").write_text(json.dumps(meta))
    return results


def test_auditor_key_groups_tournament_auditors(tmp_path: Path) -> None:
    results = tournament_results(tmp_path)
    r = runner.invoke(
        app, ["grade", str(results), "--judge", TITLE_JUDGE, "--grader", "tournament", "--auditor-key", "model+harness"]
    )
    # envU's lone run plays no match, so its tournament grade is unscored: exit 1, like any unscored grade
    assert r.exit_code == 1, r.output
    assert "1 run(s) played no match and are unscored (envU__react__m1__10m__s0)" in " ".join(r.output.split())
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    assert ratings["auditor_key"] == "model+harness"
    assert sorted(row["auditor"] for row in ratings["leaderboard"]) == ["m1 + codex", "m1 + react", "m2 + react"]
    # envU has one auditor: its run plays no match, is unscored, and the record says why
    lone = read_json(grade_path(results, "tournament", "envU__react__m1__10m__s0"))
    assert lone["status"] == "unscored" and lone["error"].startswith("no match played")


def test_tournament_covers_only_the_selected_tasks(tmp_path: Path) -> None:
    """--run picks envT's runs, so envU is not judged, although no task.toml declares the tournament
    (the tournament grader on its own would then take every finished run)."""
    results = tournament_results(tmp_path)
    r = runner.invoke(
        app, ["grade", str(results), "--judge", TITLE_JUDGE, "--grader", "tournament", "--run", "envT__*"]
    )
    assert r.exit_code == 0, r.output
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    assert [e["env"] for e in ratings["environments"]] == ["envT"]
    assert not (results / "grades" / "tournament" / "canonical" / "envU.json").exists()


def test_tournament_judge_calls_count_in_the_summary(tmp_path: Path) -> None:
    """The tournament asks the session's judge: its calls are in the summary's count."""
    import asyncio

    from benchctl.grading.runner import GradeOptions, grade_results

    results = tournament_results(tmp_path)
    r = runner.invoke(
        app, ["grade", str(results), "--judge", TITLE_JUDGE, "--grader", "tournament", "--run", "envT__*"]
    )
    assert r.exit_code == 0, r.output
    assert "judge calls: 1 (1 by the tournament)" in r.output  # one dedup ask for envT
    session = asyncio.run(grade_results(results, GradeOptions(judge=TITLE_JUDGE, graders=["tournament"], force=True)))
    assert session.judge_calls == session.tournament_judge_calls == 2  # envT and envU


def test_the_shipped_fake_judge_rates_a_tournament(tmp_path: Path) -> None:
    """Without an API key the docs' judge, the fake judge, also answers the tournament's dedup ask
    (it answered "I do not recognise this grading prompt", leaving every environment unscored)."""
    results = tournament_results(tmp_path)
    r = runner.invoke(app, ["grade", str(results), "--judge", FAKE, "--grader", "tournament", "--run", "envT__*"])
    assert r.exit_code == 0, r.output
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    assert [e["env"] for e in ratings["environments"]] == ["envT"] and not ratings["flags"]["failed_envs"]
    assert read_json(grade_path(results, "tournament", "envT__react__m1__10m__s0"))["status"] == "scored"


def test_bad_auditor_key_is_refused_before_grading(tmp_path: Path) -> None:
    results = tournament_results(tmp_path)
    r = runner.invoke(
        app, ["grade", str(results), "--judge", TITLE_JUDGE, "--grader", "tournament", "--auditor-key", "model+colour"]
    )
    assert r.exit_code == 2 and "--auditor-key" in r.output and "colour" in r.output
    assert not (results / "grades").exists()


def test_grade_help_documents_auditor_key() -> None:
    r = runner.invoke(app, ["grade", "runs", "--help"])
    assert r.exit_code == 0 and "--auditor-key" in r.output and "model+harness" in r.output
    assert "[grading]" in r.output  # not eaten as rich markup


def test_tournament_outcome_is_reported_and_a_failed_judge_exits_1(tmp_path: Path) -> None:
    """The tournament's result is printed after grading; a judge that fails on an environment is
    recorded (not a crash), named in a warning, and makes the command exit 1 like unscored grades."""
    results = tournament_results(tmp_path)
    r = runner.invoke(app, ["grade", str(results), "--judge", TITLE_JUDGE, "--grader", "tournament"])
    assert r.exit_code == 1, r.output  # envU's lone run played no match (unscored)
    assert "tournament: 2 auditor(s) (model) rated over 2 environment(s)" in r.output
    assert "played no match" in r.output and "Re-run" not in r.output  # a rerun would not change that
    r = runner.invoke(
        app,
        [
            "grade",
            str(results),
            "--judge",
            GARBAGE_JUDGE,
            "--grader",
            "tournament",
            "--force",
        ],
    )
    assert r.exit_code == 1, r.output
    assert "judge failed on 2 environment(s) (envT, envU)" in " ".join(r.output.split())
    assert read_json(grade_path(results, "tournament", "envT__react__m1__10m__s0"))["status"] == "unscored"


def test_grade_with_one_tournament_auditor_notes_it_and_exits_1(tmp_path: Path) -> None:
    import json

    task = tmp_path / "plain_task"
    task.mkdir()
    (task / "task.toml").write_text("[grading]\ngraders = []\n")
    results = tmp_path / "results"
    hack = {"title": "Reward hack", "description": "d", "evidence": "ran it", "severity": "high"}
    run = make_run(results, "envT__react__m1__10m__s0", task, {"issues.json": json.dumps([hack])})
    meta = read_json(run / "meta.json")
    meta.update(task="envT", harness="react", model="m1", budget="10m", seed=0, cost_usd=0.5)
    (run / "meta.json").write_text(json.dumps(meta))
    r = runner.invoke(app, ["grade", str(results), "--judge", TITLE_JUDGE, "--grader", "tournament"])
    assert r.exit_code == 1, r.output
    out = " ".join(r.output.split())
    assert "1 auditor(s) played no match (m1): a tournament needs at least two auditors" in out
    (row,) = read_json(results / "grades" / "tournament" / "ratings.json")["leaderboard"]
    assert row["lo"] is None and row["rank"] is None


def test_max_cost_stops_new_judge_calls_and_leaves_their_items_unscored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchctl.testing.fake_upstream import FakeUpstreamServer

    results = results_with_runs(tmp_path)
    make_run(
        results, "demo__react__m__2m__s2", tmp_path / "task", {"report.md": GOOD_REPORT}, status="budget_exhausted"
    )
    with FakeUpstreamServer("py:benchctl.grading.fake_judge:judge") as up:  # the fake judge, priced as haiku
        monkeypatch.setenv("ANTHROPIC_BASE_URL", up.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-judge-0123456789")
        refused = runner.invoke(
            app, ["grade", str(results), "--judge", "anthropic/claude-sonnet-5-5", "--max-cost", "1"]
        )
        assert refused.exit_code == 2 and "unpriced models spend: anthropic/claude-sonnet-5-5" in refused.output
        assert "--allow-unpriced" in refused.output and up.generation_requests() == []
        # the first call spends more than $0.000001: every later one is not made
        r = runner.invoke(
            app,
            [
                "grade",
                str(results),
                "--judge",
                "anthropic/claude-haiku-4-5",
                "--concurrency",
                "1",
                "--max-cost",
                "0.000001",
            ],
        )
        assert len(up.generation_requests()) == 1
    assert r.exit_code == 1, r.output
    assert "judge calls: 1" in r.output and "5 judge call(s) not made" in r.output
    assert "status 'budget_exhausted': stopped by a cost cap (not graded, never averaged)" in r.output
    assert not grade_path(results, "coverage", "demo__react__m__2m__s2").exists()
    cov = [read_json(grade_path(results, "coverage", f"demo__react__m__2m__s{i}")) for i in (0, 1)]
    unscored = [it for g in cov for it in g["items"] if it["score"] is None]
    assert unscored and all("grading cost cap of $0.00 is reached" in it["error"] for it in unscored)
    assert all(g["score"] is None or g["status"] == "partial" for g in cov)  # never a 0 for what was not asked
