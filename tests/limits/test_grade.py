"""`benchctl grade --max-cost` across sessions: the grading spend continues from disk (the graders'
spend logs), whether the cap stopped the last session or it was interrupted with calls in flight.
The judge is the fake judge at $0.10 a call, served as a priced model by the fake upstream (real
HTTP, the judge's real upstream layer pricing the usage)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.gateway.complete import reset_upstreams
from benchctl.grading.spend import (
    SEED_ASK,
    LoggedSpend,
    append_spend,
    judge_spent_on_disk,
    logged_spend,
    seed_spend_log,
    spend_log_path,
)
from benchctl.jsonio import read_json
from benchctl.layout import grade_path
from benchctl.testing.fake_upstream import FakeUpstreamServer
from tests.rigs import limits as limits_scripts
from tests.rigs.grading import GOOD_REPORT, WEAK_REPORT, make_rubric_task, make_run

pytestmark = pytest.mark.timeout(120)
JUDGE = "anthropic/claude-haiku-4-5"  # priced: the script's usage makes each call $0.10
RUNS = ("t__react__m__2m__s0", "t__react__m__2m__s1")


@pytest.fixture
def judge_upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstreamServer]:
    with FakeUpstreamServer("py:tests.rigs.limits:priced_judge") as up:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", up.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-judge-0123456789")
        reset_upstreams()  # judge upstreams are cached per model: this test's base URL, not an earlier one's
        yield up
    reset_upstreams()


def two_runs(tmp_path: Path) -> Path:
    """Two runs of the demo rubric: coverage asks 2 batches (F1-F5, F6-F7) and tldr 1 question
    per run, so grading both is 6 judge calls, $0.60."""
    task = make_rubric_task(tmp_path)
    results = tmp_path / "results"
    for run_id, report in zip(RUNS, (GOOD_REPORT, WEAK_REPORT)):
        make_run(results, run_id, task, {"report.md": report})
    return results


def grade(results: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["grade", str(results), "--judge", JUDGE, "--concurrency", "1", *args])


def test_a_grade_the_cap_stopped_continues_its_count_on_a_rerun(
    tmp_path: Path, judge_upstream: FakeUpstreamServer
) -> None:
    results = two_runs(tmp_path)
    first = grade(results, "--max-cost", "0.25")  # $0.10, $0.20, $0.30: the third call reaches it
    assert first.exit_code == 1, first.output
    assert len(judge_upstream.generation_requests()) == 3
    assert "3 judge call(s) not made" in first.output
    assert judge_spent_on_disk(results, ["coverage", "tldr"]).usd == pytest.approx(0.30)

    again = grade(results, "--max-cost", "0.25")  # the count starts at $0.30: no judge call at all
    assert again.exit_code == 1, again.output
    assert len(judge_upstream.generation_requests()) == 3
    out = " ".join(again.output.split())
    assert "cost cap: $0.3000 of $0.25 spent by these graders' judge calls ($0.3000 before this session" in out
    assert "judge calls: 0" in out

    more = grade(results, "--max-cost", "0.45")  # $0.30 + $0.10 + $0.10 reaches $0.45: two calls
    assert more.exit_code == 1, more.output
    assert len(judge_upstream.generation_requests()) == 5
    assert "judge calls: 2" in more.output and "$0.5000 of $0.45" in " ".join(more.output.split())
    assert judge_spent_on_disk(results, ["coverage", "tldr"]).usd == pytest.approx(0.50)
    # per grader: the cap counts the graders being run, not everything under grades/
    assert judge_spent_on_disk(results, ["tldr"]).usd + judge_spent_on_disk(results, ["coverage"]).usd == pytest.approx(
        0.50
    )

    done = grade(results, "--max-cost", "2")  # enough: the rest is graded, scored grades kept
    assert done.exit_code == 0, done.output
    for run_id in RUNS:
        for g in ("coverage", "tldr"):
            assert read_json(grade_path(results, g, run_id))["status"] == "scored"


def test_an_interrupted_grade_counts_the_calls_it_made_before_the_interruption(
    tmp_path: Path, judge_upstream: FakeUpstreamServer
) -> None:
    from benchctl.grading.runner import GradeOptions, grade_results

    results = two_runs(tmp_path)
    gate = threading.Event()
    limits_scripts.F6_GATE.append(gate)  # each run's second coverage batch waits: its grade is never written
    logs = [spend_log_path(results, g) for g in ("coverage", "tldr")]

    def lines() -> int:  # the judge calls' lines (each log also starts with its $0 seed line)
        return sum(len(p.read_bytes().splitlines()) - 1 for p in logs if p.exists())

    async def interrupted() -> None:
        task = asyncio.create_task(grade_results(results, GradeOptions(judge=JUDGE, max_cost=5.0)))
        deadline = time.monotonic() + 60
        # the 4 other calls answered (and logged), the 2 F6 batches in flight at the upstream: interrupt
        while not (lines() == 4 and len(judge_upstream.generation_requests()) == 6):
            assert time.monotonic() < deadline and not task.done(), "grading did not reach the interruption point"
            await asyncio.sleep(0.05)
        task.cancel()  # what Ctrl-C does to `benchctl grade` (asyncio.run cancels its task)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        asyncio.run(interrupted())
    finally:
        limits_scripts.F6_GATE.clear()
        gate.set()
    # the coverage grades were never written, so their first batches' $0.20 is only in the spend log
    for run_id in RUNS:
        assert not grade_path(results, "coverage", run_id).exists()
        assert read_json(grade_path(results, "tldr", run_id))["cost_usd"] == pytest.approx(0.10)
    assert judge_spent_on_disk(results, ["coverage", "tldr"]).usd == pytest.approx(0.40)

    before = len(judge_upstream.generation_requests())
    r = grade(results, "--max-cost", "0.45")  # $0.40 already: one call ($0.50) reaches the cap
    assert r.exit_code == 1, r.output
    assert len(judge_upstream.generation_requests()) == before + 1
    assert "3 judge call(s) not made" in r.output  # the coverage grades' 4 calls, less the one made
    assert "($0.4000 before this session" in " ".join(r.output.split())


def test_spend_logs_count_priced_calls_and_an_unpriced_judge_counts_zero(
    tmp_path: Path, judge_upstream: FakeUpstreamServer
) -> None:
    results = two_runs(tmp_path)
    unpriced = "anthropic/claude-sonnet-5-5"  # no entry in the price table: its cost is unknown (null)
    refused = CliRunner().invoke(app, ["grade", str(results), "--judge", unpriced, "--max-cost", "1"])
    assert refused.exit_code == 2 and "unpriced models spend: anthropic/claude-sonnet-5-5" in refused.output
    assert judge_upstream.generation_requests() == []
    # allowed with --allow-unpriced: each call is logged with a null cost, which counts 0 (as a run's does)
    r = CliRunner().invoke(app, ["grade", str(results), "--judge", unpriced, "--max-cost", "1", "--allow-unpriced"])
    assert r.exit_code == 0, r.output
    tldr = spend_log_path(results, "tldr")
    seed, *rows = [orjson.loads(line) for line in tldr.read_bytes().splitlines()]
    # a new directory's log starts with its seed line: no grade records before it, $0
    assert (seed["ask"], seed["cost_usd"], seed["grades"]) == (SEED_ASK, 0.0, 0)
    assert sorted((row["subject"], row["ask"], row["judge"], row["cost_usd"]) for row in rows) == [
        (run_id, "tldr", unpriced, None) for run_id in RUNS
    ]
    assert len(spend_log_path(results, "coverage").read_bytes().splitlines()) == 1 + 4
    assert judge_spent_on_disk(results, ["coverage", "tldr"]).usd == 0.0
    assert "cost cap: $0.0000 of $1.00 spent" in " ".join(r.output.split())
    # priced lines add up; a torn last line (a session killed mid-write) is skipped
    with open(tldr, "ab") as f:
        f.write(b'{"cost_usd": 0.25}\n{"cost_usd": 0.5')
    assert logged_spend(tldr).usd == pytest.approx(0.25)
    assert judge_spent_on_disk(results, ["tldr", "tldr"]).usd == pytest.approx(0.25)
    assert judge_spent_on_disk(results, ["coverage"]).usd == 0.0
    # the judge logs and the report's grade readers are untouched: only *.json are grades or judge logs
    assert not list(tldr.parent.glob("spend*.json"))


def graded_before_the_spend_log(tmp_path: Path) -> Path:
    """Both runs graded ($0.60: coverage $0.20 and tldr $0.10 a run), then the judge logs removed: the
    directory a version without spend logs (or judge logs) left — grade records with their cost_usd."""
    import shutil

    results = two_runs(tmp_path)
    assert grade(results).exit_code == 0
    for g in ("coverage", "tldr"):
        shutil.rmtree(spend_log_path(results, g).parent)
    return results


def seed_lines_of(results: Path, grader: str) -> list[dict[str, Any]]:
    rows = [orjson.loads(line) for line in spend_log_path(results, grader).read_bytes().splitlines()]
    return [row for row in rows if row["ask"] == SEED_ASK]


def test_a_cap_counts_the_spend_grade_records_state_from_before_the_spend_log_once(
    tmp_path: Path, judge_upstream: FakeUpstreamServer
) -> None:
    results = graded_before_the_spend_log(tmp_path)
    grade_path(results, "tldr", RUNS[1]).unlink()  # one grade left to do: $0.50 is recorded in the rest
    made = len(judge_upstream.generation_requests())

    first = grade(results, "--max-cost", "0.45")  # $0.50 spent already: no judge call at all
    assert first.exit_code == 1, first.output
    assert len(judge_upstream.generation_requests()) == made
    out = " ".join(first.output.split())
    assert "judge calls: 0" in out and "1 judge call(s) not made" in out
    assert (
        "coverage: spend log started with $0.4000 of earlier judge spend, estimated from 2 grade record(s) "
        "written before it (a lower bound)"
    ) in out
    assert "tldr: spend log started with $0.1000 of earlier judge spend, estimated from 1 grade record(s)" in out
    assert (
        "cost cap: $0.5000 of $0.45 spent by these graders' judge calls ($0.5000 before this session, "
        "$0.5000 of it estimated from grade records written before the spend log;"
    ) in out
    assert [(s["cost_usd"], s["grades"], s["judge"]) for s in seed_lines_of(results, "coverage")] == [(0.4, 2, JUDGE)]

    # the seed is written once: a second session counts it from the log, and adds no second one
    again = grade(results, "--max-cost", "0.45")
    assert again.exit_code == 1 and len(judge_upstream.generation_requests()) == made
    assert "spend log started" not in again.output
    assert "($0.5000 before this session, $0.5000 of it estimated" in " ".join(again.output.split())
    for g in ("coverage", "tldr"):
        assert len(seed_lines_of(results, g)) == 1
    assert judge_spent_on_disk(results, ["coverage", "tldr"]).usd == pytest.approx(0.50)

    done = grade(results, "--max-cost", "2")  # the one grade left: $0.10 more, counted by its line
    assert done.exit_code == 0, done.output
    assert len(judge_upstream.generation_requests()) == made + 1
    assert judge_spent_on_disk(results, ["coverage", "tldr"]) == LoggedSpend(usd=0.6, estimated_usd=0.5)


def test_a_log_started_without_a_seed_counts_only_the_records_it_has_no_line_for(
    tmp_path: Path, judge_upstream: FakeUpstreamServer
) -> None:
    # a version with spend logs but no seed rule started tldr's log: it regraded run s1 (its lines are
    # in the log, $0.10) after s0 had been graded without a log (its record says $0.10)
    results = graded_before_the_spend_log(tmp_path)
    log = spend_log_path(results, "tldr")
    append_spend(log, judge=JUDGE, subject=RUNS[1], ask="tldr", attempt=1, cost_usd=0.10)
    seed = seed_spend_log(results, "tldr")
    assert seed is not None and (seed.cost_usd, seed.grades) == (pytest.approx(0.10), 1)
    assert logged_spend(log) == LoggedSpend(usd=pytest.approx(0.20), estimated_usd=pytest.approx(0.10))
    assert seed_spend_log(results, "tldr") is None  # once
    assert logged_spend(log).usd == pytest.approx(0.20)


def test_a_grade_record_whose_cost_is_not_a_number_is_named_and_not_counted(
    tmp_path: Path, judge_upstream: FakeUpstreamServer
) -> None:
    results = graded_before_the_spend_log(tmp_path)
    bad = grade_path(results, "coverage", RUNS[1])
    bad.write_bytes(bad.read_bytes().replace(b'"cost_usd": 0.2', b'"cost_usd": "0.2"'))
    assert read_json(bad)["cost_usd"] == "0.2"
    unpriced = grade_path(results, "tldr", RUNS[0])
    unpriced.write_bytes(unpriced.read_bytes().replace(b'"cost_usd": 0.1', b'"cost_usd": null'))
    torn = grade_path(results, "tldr", RUNS[1])
    torn.write_bytes(torn.read_bytes()[:40])
    made = len(judge_upstream.generation_requests())

    r = grade(results, "--max-cost", "5")  # no crash; the torn tldr grade is regraded ($0.10)
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert (
        f"coverage: grades/coverage/{RUNS[1]}.json: cost_usd '0.2' is not a cost in USD; its judge spend is not counted"
    ) in out
    assert f"tldr: grades/tldr/{RUNS[1]}.json: unreadable" in out
    assert "$0.2000 of earlier judge spend, estimated from 1 grade record(s)" in out  # coverage s0 only
    assert (
        "$0.0000 of earlier judge spend, estimated from 1 grade record(s) written before it "
        "(a lower bound; 1 unpriced, counted $0)" in out
    )  # tldr s0
    assert len(judge_upstream.generation_requests()) == made + 1
    assert [s["skipped"] for s in seed_lines_of(results, "coverage")] == [[f"grades/coverage/{RUNS[1]}.json"]]
    assert judge_spent_on_disk(results, ["coverage", "tldr"]) == LoggedSpend(
        usd=pytest.approx(0.30), estimated_usd=pytest.approx(0.20)
    )


def test_a_call_after_a_torn_last_line_is_still_counted(tmp_path: Path) -> None:
    """A session killed mid-write leaves a spend log whose last line has no newline; the next call's
    line must not join it (the joined line is unreadable, so that call's cost was lost)."""
    log = tmp_path / "judge_log" / "spend.jsonl"
    append_spend(log, judge="j", subject="r1", ask="coverage", attempt=1, cost_usd=0.5)
    with open(log, "ab") as f:
        f.write(b'{"at": 1.0, "judge": "j", "subject": "r2", "ask": "cov')  # killed mid-write
    append_spend(log, judge="j", subject="r3", ask="coverage", attempt=1, cost_usd=0.25)
    append_spend(log, judge="j", subject="r4", ask="coverage", attempt=1, cost_usd=0.125)
    assert logged_spend(log).usd == 0.875
    assert log.read_bytes().count(b"\n") == 4  # the torn line ended, nothing else added
