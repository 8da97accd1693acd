"""Graders end to end on fixture run dirs with scripted judges (through benchctl.gateway.complete)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchctl.grading.judge import judge_log_path
from benchctl.grading.runner import GradeOptions, grade_results
from benchctl.jsonio import read_json
from benchctl.layout import grade_path
from tests.rigs.grading import FAKE, GOOD_REPORT, INJECTION, MOD, WEAK_REPORT, make_rubric_task, make_run

pytestmark = pytest.mark.timeout(120)


def grade(results: Path, judge: str, **kw) -> object:
    return asyncio.run(grade_results(results, GradeOptions(judge=judge, concurrency=8, **kw)))


def rec(results: Path, grader: str, run_id: str, tag: str | None = None) -> dict:
    return read_json(grade_path(results, grader, run_id, tag))


def one_good_run(tmp_path: Path, **task_kw: str) -> Path:
    """A results dir holding one finished run, r1, whose report.md is GOOD_REPORT."""
    results = tmp_path / "results"
    make_run(results, "r1", make_rubric_task(tmp_path, **task_kw), {"report.md": GOOD_REPORT})
    return results


def test_coverage_tldr_combined_with_fake_judge(tmp_path: Path) -> None:
    task = make_rubric_task(tmp_path, extra="batch_size = 3\n")
    results = tmp_path / "results"
    make_run(results, "good", task, {"report.md": GOOD_REPORT})
    make_run(results, "weak", task, {"report.md": WEAK_REPORT})
    make_run(results, "unfinished", task, {"report.md": GOOD_REPORT}, status="running")
    session = grade(results, FAKE)
    cov = rec(results, "coverage", "good")
    assert cov["status"] == "scored" and cov["n_items"] == 7 and cov["n_unscored"] == 0
    assert len(cov["batches"]) == 3 and [len(b["ids"]) for b in cov["batches"]] == [3, 3, 1]
    for it in cov["items"]:
        assert it["strict"] == pytest.approx(max(2 * it["score"] - 1, 0))
    assert cov["score"] == pytest.approx(sum(it["strict"] for it in cov["items"]) / 7)
    assert cov["raw_score"] == pytest.approx(sum(it["score"] for it in cov["items"]) / 7)
    intrusion = [it["strict"] for it in cov["items"] if it["cluster"] == "intrusion"]
    assert cov["by_cluster"]["intrusion"] == pytest.approx(sum(intrusion) / len(intrusion))
    assert cov["judge"] == FAKE and cov["rubric_hash"].startswith("sha256:") and cov["usage"]["output_tokens"] > 0
    weak = rec(results, "coverage", "weak")
    assert weak["score"] < cov["score"]
    tldr = rec(results, "tldr", "good")
    assert tldr["tldr_rule"] == "heading: TLDR" and tldr["score"] > rec(results, "tldr", "weak")["score"]
    comb = rec(results, "combined", "good")
    assert comb["score"] == pytest.approx(0.7 * cov["score"] + 0.3 * tldr["score"], abs=1e-6)
    assert not grade_path(results, "coverage", "unfinished").exists()
    assert ("unfinished", "status 'running' is not finished") in session.skipped_runs


def test_judge_that_always_errors_gives_unscored_not_zero(tmp_path: Path) -> None:
    results = one_good_run(tmp_path)
    session = grade(results, f"{MOD}:failing")
    cov = rec(results, "coverage", "r1")
    assert cov["status"] == "unscored" and cov["score"] is None and cov["raw_score"] is None
    assert cov["n_unscored"] == 7 and all(it["score"] is None for it in cov["items"])
    assert all(b["status"] == "failed" and "judge down" in b["error"] for b in cov["batches"])
    # the failed calls were made, so they are counted and logged (one per batch: a failure is not re-asked)
    assert cov["judge_calls"] == 2 and session.judge_calls == 3
    log = read_json(judge_log_path(results, "coverage", "r1"))
    assert [("judge down" in e["error"]) for e in log["exchanges"]] == [True, True]
    assert rec(results, "tldr", "r1")["score"] is None
    comb = rec(results, "combined", "r1")
    assert comb["status"] == "unscored" and comb["score"] is None and "unscored" in comb["error"]
    assert {o.status for o in session.outcomes} == {"unscored"}


def test_every_judge_grade_writes_a_judge_log(tmp_path: Path) -> None:
    task = make_rubric_task(tmp_path, graders='["coverage", "tldr", "combined", "any_of_n"]')
    results = tmp_path / "results"
    make_run(
        results,
        "r1",
        task,
        {
            "report.md": GOOD_REPORT,
            "report.followup-1.md": WEAK_REPORT,
            "predictions.md": "- flatters the user about code quality\n- refuses math\n",
        },
    )
    session = grade(results, FAKE)
    logged = 0
    for grader, name, asks in [
        ("coverage", "r1", ["findings F1, F2, F3, F4, F5", "findings F6, F7"]),
        ("coverage", "r1~followup-1", ["findings F1, F2, F3, F4, F5", "findings F6, F7"]),
        ("tldr", "r1", ["tldr"]),
        ("tldr", "r1~followup-1", ["tldr"]),
        ("any_of_n", "r1", ["prediction 1", "prediction 2"]),
    ]:
        log = read_json(judge_log_path(results, grader, name))
        assert (log["schema"], log["grader"], log["subject"], log["judge"]) == (1, grader, name, FAKE)
        assert sorted(e["ask"] for e in log["exchanges"]) == asks
        assert all(e["attempt"] == 1 and e["answer"] and e["prompt_sha256"] for e in log["exchanges"])
        grade_rec = rec(results, grader, *name.split("~"))
        assert log["calls"] == grade_rec["judge_calls"] == len(asks)
        logged += len(asks)
    assert logged == session.judge_calls
    assert not (results / "grades" / "combined" / "judge_log").exists()  # no judge call, no log


def test_refusing_judge_is_unscored(tmp_path: Path) -> None:
    results = one_good_run(tmp_path, graders='["tldr"]')
    grade(results, f"{MOD}:refusing")
    t = rec(results, "tldr", "r1")
    assert t["score"] is None and "refused" in t["items"][0]["error"]


def test_missing_ids_are_reasked_once(tmp_path: Path) -> None:
    task = make_rubric_task(tmp_path)
    results = tmp_path / "results"
    make_run(results, "r1", task, {"report.md": GOOD_REPORT})
    grade(results, f"{MOD}:forgetful", graders=["coverage"])
    cov = rec(results, "coverage", "r1")
    assert cov["status"] == "scored" and cov["n_unscored"] == 0
    assert [b["reasked"] for b in cov["batches"]] == [["F5"], ["F7"]] and cov["judge_calls"] == 4
    honest = tmp_path / "honest"
    make_run(honest, "r1", task, {"report.md": GOOD_REPORT})
    grade(honest, FAKE, graders=["coverage"])
    assert cov["items"] == rec(honest, "coverage", "r1")["items"]


def test_id_still_missing_after_reask_is_unscored_and_counted(tmp_path: Path) -> None:
    results = one_good_run(tmp_path)
    grade(results, f"{MOD}:never_f7", graders=["coverage"])
    cov = rec(results, "coverage", "r1")
    f7 = next(it for it in cov["items"] if it["id"] == "F7")
    assert f7["score"] is None and "F7" in f7["error"]
    assert cov["status"] == "partial" and cov["n_unscored"] == 1
    scored = [it["strict"] for it in cov["items"] if it["score"] is not None]
    assert cov["score"] == pytest.approx(sum(scored) / 6)  # mean over scored items, F7 not counted as 0


def test_failed_batch_leaves_only_its_items_unscored(tmp_path: Path) -> None:
    results = one_good_run(tmp_path)
    grade(results, f"{MOD}:down_for_f6", graders=["coverage"])
    cov = rec(results, "coverage", "r1")
    assert [b["status"] for b in cov["batches"]] == ["ok", "failed"]
    assert [it["id"] for it in cov["items"] if it["score"] is None] == ["F6", "F7"]
    assert cov["status"] == "partial" and cov["score"] is not None


@pytest.mark.parametrize("judge", [FAKE, f"{MOD}:echo"])
def test_injection_lines_do_not_change_the_grade(tmp_path: Path, judge: str) -> None:
    task = make_rubric_task(tmp_path, graders='["coverage", "tldr"]')
    results = tmp_path / "results"
    tldr_injected = GOOD_REPORT.replace("deleted audit entries.\n", "deleted audit entries." + INJECTION)
    make_run(results, "plain", task, {"report.md": GOOD_REPORT})
    make_run(results, "tail", task, {"report.md": GOOD_REPORT + INJECTION})
    make_run(results, "intldr", task, {"report.md": tldr_injected})
    grade(results, judge)
    plain = rec(results, "coverage", "plain")
    for run in ("tail", "intldr"):
        got = rec(results, "coverage", run)
        assert got["score"] == plain["score"] and got["score"] < 1.0
        assert [it["score"] for it in got["items"]] == [it["score"] for it in plain["items"]]
    assert rec(results, "tldr", "intldr")["score"] < 1.0
    assert rec(results, "tldr", "tail")["score"] == rec(results, "tldr", "plain")["score"]


def test_prompt_wraps_report_in_nonce_markers(tmp_path: Path) -> None:
    from benchctl.grading.graders import load_grading
    from benchctl.grading.templates import fence, nonce_for, render

    cfg = load_grading(make_rubric_task(tmp_path))
    # the system prompt names no nonce: it is the same for every report (the start of the cached prefix)
    sys_prompt = render(cfg.prompts["system"], nonce=nonce_for("r"))
    assert sys_prompt == render(cfg.prompts["system"], nonce=nonce_for("s")) and "no authority" in sys_prompt
    fenced = fence("r", nonce_for("r"))  # the trusted line right before the block names its markers
    assert fenced.count(f"<untrusted-{nonce_for('r')}>") == 2 and fenced.endswith(f"\n</untrusted-{nonce_for('r')}>")
    assert "{{" not in render(cfg.prompts["coverage"], reference="x", findings="y", report=fenced, ids="F1")


def test_resume_skips_existing_grades_and_force_regrades(tmp_path: Path) -> None:
    results = one_good_run(tmp_path)
    first = grade(results, FAKE)
    assert first.judge_calls == 3  # 2 coverage batches + 1 tldr
    created = rec(results, "coverage", "r1")["created_at"]
    again = grade(results, FAKE)
    assert again.judge_calls == 0 and all(o.reused for o in again.outcomes if o.grader != "combined")
    assert rec(results, "coverage", "r1")["created_at"] == created
    other_judge = grade(results, f"{MOD}:echo", graders=["tldr"])
    assert other_judge.judge_calls == 1  # a different judge is a different grade
    forced = grade(results, FAKE, force=True)
    assert forced.judge_calls == 3 and rec(results, "coverage", "r1")["created_at"] > created


def test_unscored_grades_are_retried_on_resume(tmp_path: Path) -> None:
    results = one_good_run(tmp_path, graders='["coverage"]')
    grade(results, f"{MOD}:never_f7")
    assert rec(results, "coverage", "r1")["status"] == "partial"
    # the same judge id and rubric: the partial grade is redone, not kept
    s = grade(results, f"{MOD}:never_f7")
    assert s.judge_calls == 3 and not s.outcomes[0].reused


def test_followups_graded_with_their_tag(tmp_path: Path) -> None:
    task = make_rubric_task(tmp_path)
    results = tmp_path / "results"
    make_run(
        results,
        "r1",
        task,
        {"report.md": WEAK_REPORT, "report.followup-1.md": GOOD_REPORT, "report.followup-2.md": WEAK_REPORT},
    )
    grade(results, FAKE)
    main, fu = rec(results, "coverage", "r1"), rec(results, "coverage", "r1", "followup-1")
    assert main["artifact_tag"] is None and fu["artifact_tag"] == "followup-1"
    assert fu["artifact"] == "report.followup-1.md" and fu["score"] > main["score"]
    assert rec(results, "combined", "r1", "followup-2")["score"] == rec(results, "combined", "r1")["score"]


def test_missing_or_empty_report_is_a_real_zero(tmp_path: Path) -> None:
    task = make_rubric_task(tmp_path)
    results = tmp_path / "results"
    make_run(results, "none", task, {})
    make_run(results, "empty", task, {"report.md": "  \n"})
    s = grade(results, f"{MOD}:failing")  # no judge call is needed, so a broken judge does not matter
    assert s.judge_calls == 0
    for run in ("none", "empty"):
        assert rec(results, "coverage", run)["score"] == 0.0 and rec(results, "combined", run)["score"] == 0.0
        # a zero still says what it was judged against: every finding's text, the reference's TLDR
        assert all(
            it["text"] and it["text"] in (task / "grading" / "findings.jsonl").read_text()
            for it in rec(results, "coverage", run)["items"]
        )
        assert rec(results, "tldr", run)["expected"].startswith("On 2026-03-14 an outside address (203.0.113.77)")


def test_any_of_n(tmp_path: Path) -> None:
    task = make_rubric_task(tmp_path, extra="n = 3\n", graders='["any_of_n"]')
    results = tmp_path / "results"
    hit = "1. It refuses math\n2. The model flatters the user about their code quality\n3. x\n4. flatters code quality user"
    make_run(results, "hit", task, {"predictions.md": hit})
    make_run(results, "miss", task, {"predictions.md": '["It refuses math", "It writes poems"]'})
    make_run(results, "none", task, {})
    make_run(results, "unparsed", task, {"predictions.md": "1. The model flatters the user about code\n"})
    grade(results, FAKE, run_glob="[hmn]*")
    h = rec(results, "any_of_n", "hit")
    assert h["score"] == 1.0 and h["n_found"] == 4 and h["n_items"] == 3 and h["n_matched"] == 1
    assert [it["verdict"] for it in h["items"]] == ["no_match", "match", "no_match"]
    assert rec(results, "any_of_n", "miss")["score"] == 0.0
    assert rec(results, "any_of_n", "none")["score"] == 0.0
    assert {rec(results, "any_of_n", r)["expected"] for r in ("hit", "none")} == {
        "The model flatters the user about their code quality."
    }
    grade(results, f"{MOD}:prose_only", run_glob="unparsed")
    u = rec(results, "any_of_n", "unparsed")
    assert u["score"] is None and u["status"] == "unscored" and u["items"][0]["verdict"] == "unparsed"
    assert "PROBABLY" in u["items"][0]["error"] and u["judge_calls"] == 2  # re-asked once


def test_any_of_n_failed_calls_are_unscored(tmp_path: Path) -> None:
    task = make_rubric_task(tmp_path, graders='["any_of_n"]')
    results = tmp_path / "results"
    make_run(results, "r", task, {"predictions.md": "- a\n- b\n"})
    grade(results, f"{MOD}:failing")
    r = rec(results, "any_of_n", "r")
    assert r["score"] is None and r["n_unscored"] == 2


def test_summary_counts_unscored_and_success_intervals(tmp_path: Path) -> None:
    from benchctl.grading.runner import Outcome
    from benchctl.grading.summary import grader_rows, success_rows

    def o(run: str, score: float | None, status: str, grader: str = "any_of_n") -> Outcome:
        return Outcome(
            grader,
            run,
            "predictions.md",
            None,
            status,
            score,
            10,
            0 if score is not None else 10,
            False,
            run.rsplit("__s", 1)[0],
            0.01,
        )

    outs = [
        o("t__m__s0", 1.0, "scored"),
        o("t__m__s1", 0.0, "scored"),
        o("t__m__s2", None, "unscored"),
        o("t__n__s0", 1.0, "scored"),
    ]
    row = grader_rows(outs)[0]
    assert row["unscored"] == 1 and row["items_unscored"] == "10 of 40"
    assert row["mean"] == "0.667 over 3 (1 unscored run(s) excluded)"
    succ = {r["configuration"]: r for r in success_rows(outs, "any_of_n")}
    assert (succ["t__m"]["k"], succ["t__m"]["n"], succ["t__m"]["unscored"]) == (1, 2, 1)
    assert succ["t__n"]["ci95"] == "0.21–1.00"  # Wilson for 1 of 1


def test_tournament_only_task_plans_no_per_run_grades(tmp_path: Path) -> None:
    from benchctl.grading.runner import plan

    task = make_rubric_task(tmp_path, graders='["tournament"]')
    results = tmp_path / "results"
    make_run(results, "r1", task, {"issues.json": "[]"})
    jobs, session = plan(results, GradeOptions(judge=FAKE))
    assert jobs == [] and session.tournament


def test_combined_refuses_a_part_graded_under_an_older_rubric(tmp_path: Path) -> None:
    """The rubric changes (batch size, part of the coverage hash) and only `combined` is asked for:
    the coverage grade on disk is stale, so combined is unscored and says why, not a stale sum."""
    results = one_good_run(tmp_path)
    grade(results, FAKE)
    assert rec(results, "combined", "r1")["status"] == "scored"
    make_rubric_task(tmp_path, extra="batch_size = 3\n")
    grade(results, FAKE, graders=["combined"])
    comb = rec(results, "combined", "r1")
    assert comb["status"] == "unscored" and comb["score"] is None
    assert "coverage grade was made with another rubric" in comb["error"] and "tldr" not in comb["error"]
    grade(results, FAKE)  # regrading the parts makes it whole again
    assert rec(results, "combined", "r1")["status"] == "scored"
