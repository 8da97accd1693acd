"""The batch collector's rules (`benchctl grade --batch`), through grade_results against an in-memory
batch API (tests/rigs/batches.py): scores as without batches, ids on disk before any wait, an
interrupted session's batches resumed rather than paid twice, failed requests unscored and asked
again alone, expired batches resubmitted, repeats kept apart, identical requests sent once, and the
cost cap held by reservations. The end-to-end tests with the vendors' SDKs and the fake upstream
are in test_batch_e2e.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.grading import batches
from benchctl.grading.batch_record import read_batches
from benchctl.grading.runner import GradeOptions, Session, grade_results
from benchctl.grading.spend import spend_log_path
from benchctl.jsonio import read_json, read_jsonl
from benchctl.layout import grade_path
from tests.rigs.batches import MemoryBatches, wait_for
from tests.rigs.grading import FAKE, GOOD_REPORT, WEAK_REPORT, make_rubric_task, make_run

pytestmark = pytest.mark.timeout(60)
JUDGE = "anthropic/claude-haiku-4-5"  # priced; every request is answered by the in-memory batches
RUNS = ("t__react__m__2m__s0", "t__react__m__2m__s1")
GRADERS = ("coverage", "tldr")


@pytest.fixture
def mem(monkeypatch: pytest.MonkeyPatch) -> MemoryBatches:
    m = MemoryBatches()
    monkeypatch.setattr(batches, "default_client_for", m.client)
    return m


def two_runs(tmp_path: Path, reports: tuple[str, str] = (GOOD_REPORT, WEAK_REPORT)) -> Path:
    task = make_rubric_task(tmp_path, graders='["coverage", "tldr"]')
    results = tmp_path / "results"
    for run_id, report in zip(RUNS, reports):
        make_run(results, run_id, task, {"report.md": report})
    return results


def grade(results: Path, judge: str = JUDGE, **kw: Any) -> Session:
    return asyncio.run(grade_results(results, GradeOptions(judge=judge, batch=kw.pop("batch", True), **kw)))


def scores(results: Path) -> dict[str, Any]:
    out = {}
    for g in GRADERS:
        for run in RUNS:
            rec = read_json(grade_path(results, g, run))
            out[f"{g}/{run}"] = (rec["score"], [(it["id"], it.get("score")) for it in rec["items"]])
    return out


def spend_lines(results: Path) -> list[dict[str, Any]]:
    return [r for g in GRADERS for r in read_jsonl(spend_log_path(results, g)) if r.get("attempt")]


def test_batched_grades_match_synchronous_ones_and_are_recorded(tmp_path: Path, mem: MemoryBatches) -> None:
    sync_dir = two_runs(tmp_path / "sync")
    grade(sync_dir, judge=FAKE, batch=False)
    results = two_runs(tmp_path / "batch")
    session = grade(results, judge=FAKE)
    assert scores(results) == scores(sync_dir)
    assert session.batch is not None
    # one batch per grader (each grader's batches.json): 2 runs x 2 coverage asks, 2 runs x 1 tldr ask
    assert (mem.created, session.batch.batches_submitted, session.batch.requests_submitted) == (2, 2, 6)
    cov = read_batches(results / "grades" / "coverage" / "batches.json")
    assert len(cov) == 1 and cov[0]["state"] == "ended" and len(cov[0]["requests"]) == 4
    assert {r["outcome"] for r in cov[0]["requests"].values()} == {"succeeded"}
    assert {r["subject"] for r in cov[0]["requests"].values()} == set(RUNS)
    # each answer's spend line names its batch request: a rerun will not count it twice
    lines = spend_lines(results)
    assert len(lines) == 6 and all(r["custom_id"] in cov[0]["requests"] or r["ask"] == "tldr" for r in lines)
    log = read_json(results / "grades" / "coverage" / "judge_log" / f"{RUNS[0]}.json")
    assert all(ex["batch_id"] == cov[0]["id"] and ex["custom_id"] in cov[0]["requests"] for ex in log["exchanges"])


def test_batch_ids_are_on_disk_before_the_first_wait(tmp_path: Path, mem: MemoryBatches) -> None:
    results = two_runs(tmp_path)
    seen: list[bool] = []

    def check(batch_id: str) -> None:
        on_disk = {b["id"] for g in GRADERS for b in read_batches(results / "grades" / g / "batches.json")}
        seen.append(batch_id in on_disk)

    mem.on_status = check
    grade(results)
    assert seen and all(seen)


def test_an_interrupted_session_resumes_its_batches_and_pays_once(tmp_path: Path, mem: MemoryBatches) -> None:
    results = two_runs(tmp_path)
    mem.hold = True  # the vendor has not finished when the session is interrupted (Ctrl-C)

    async def interrupted() -> None:
        task = asyncio.ensure_future(grade_results(results, GradeOptions(judge=JUDGE, batch=True)))
        await wait_for(
            lambda: mem.created == 2 and all(read_batches(results / "grades" / g / "batches.json") for g in GRADERS)
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    assert not grade_path(results, "coverage", RUNS[0]).exists()
    ids = sorted(mem.batches)
    assert all(b.state == "in_progress" for b in mem.batches.values())  # never cancelled at the vendor
    mem.hold = False
    session = grade(results)
    assert mem.created == 2 and sorted(mem.batches) == ids  # the same batches, not new ones
    assert session.batch is not None and session.batch.requests_resumed == 6 and session.batch.requests_submitted == 0
    assert all(read_json(grade_path(results, g, r))["status"] == "scored" for g in GRADERS for r in RUNS)
    assert len(spend_lines(results)) == 6
    assert session.judge_spent_usd == pytest.approx(sum(r["cost_usd"] for r in spend_lines(results)))


def test_rereading_a_batch_already_counted_adds_no_spend(tmp_path: Path, mem: MemoryBatches) -> None:
    """A session killed after reading the results (its spend lines written) but before writing
    the grades: the rerun reads the same batches again and counts nothing twice."""
    results = two_runs(tmp_path)
    grade(results)
    spent = sum(r["cost_usd"] for r in spend_lines(results))
    assert spent > 0
    for g in GRADERS:
        for r in RUNS:
            grade_path(results, g, r).unlink()
    session = grade(results)
    assert mem.created == 2 and session.batch is not None and session.batch.requests_resumed == 6
    assert len(spend_lines(results)) == 6 and session.judge_spent_usd == 0
    rec = read_json(grade_path(results, "coverage", RUNS[0]))
    assert rec["status"] == "scored" and rec["cost_usd"] > 0  # the grade still says what its calls cost


def test_failed_requests_leave_items_unscored_with_the_reason_and_are_asked_again_alone(
    tmp_path: Path, mem: MemoryBatches
) -> None:
    results = two_runs(tmp_path)
    mem.fails = lambda body: "overloaded_error: Overloaded" if b"- id F6:" in orjson.dumps(body) else None
    first = grade(results)
    assert first.batch is not None and first.batch.requests_failed == 2
    rec = read_json(grade_path(results, "coverage", RUNS[0]))
    assert rec["status"] == "partial"
    f6 = next(it for it in rec["items"] if it["id"] == "F6")
    assert f6["score"] is None and "overloaded_error: Overloaded" in f6["error"]  # unscored, never 0
    cov = read_batches(results / "grades" / "coverage" / "batches.json")
    assert sorted(r["outcome"] for r in cov[0]["requests"].values()) == ["failed", "failed", "succeeded", "succeeded"]

    mem.fails = lambda body: None
    again = grade(results)
    assert again.batch is not None and again.batch.requests_submitted == 2  # only the failed ones
    assert [len(b.items) for b in mem.batches.values()][-1] == 2
    assert read_json(grade_path(results, "coverage", RUNS[0]))["status"] == "scored"
    assert len(spend_lines(results)) == 6  # 4 + 2 answers, each counted once (failures cost nothing)


def test_requests_an_expired_batch_did_not_run_are_resubmitted(tmp_path: Path, mem: MemoryBatches) -> None:
    results = two_runs(tmp_path)
    mem.expire_next = True
    session = grade(results)
    assert session.batch is not None and session.batch.requests_resubmitted >= 1
    assert mem.created == 3  # coverage, tldr, and the expired one's leftovers
    assert all(read_json(grade_path(results, g, r))["status"] == "scored" for g in GRADERS for r in RUNS)
    recorded = [b for g in GRADERS for b in read_batches(results / "grades" / g / "batches.json")]
    expired = [b for b in recorded if b["state"] == "expired"]
    assert len(expired) == 1 and "unprocessed" in {r["outcome"] for r in expired[0]["requests"].values()}


def test_repeats_are_separate_requests(tmp_path: Path, mem: MemoryBatches) -> None:
    results = two_runs(tmp_path)
    session = grade(results, repeats=2)
    assert session.batch is not None and session.batch.requests_submitted == 12  # 6 asks x 2 samples
    assert all(read_json(grade_path(results, g, r))["repeats"] == 2 for g in GRADERS for r in RUNS)


def test_identical_requests_are_sent_once_and_charged_once(tmp_path: Path, mem: MemoryBatches) -> None:
    results = two_runs(tmp_path, reports=(GOOD_REPORT, GOOD_REPORT))
    session = grade(results)
    assert session.batch is not None and session.batch.requests_submitted == 3
    assert all(read_json(grade_path(results, g, r))["status"] == "scored" for g in GRADERS for r in RUNS)
    charged = [r for r in spend_lines(results) if r["cost_usd"]]
    assert len(charged) == 3 and session.judge_spent_usd == pytest.approx(sum(r["cost_usd"] for r in charged))


def test_the_cost_cap_holds_by_reserving_each_request_before_it_is_submitted(
    tmp_path: Path, mem: MemoryBatches
) -> None:
    results = two_runs(tmp_path)
    session = grade(results, max_cost=0.05)  # room for 2 requests' generous estimates at a time
    assert mem.created >= 3  # so they went out in rounds, each once the last round's cost was known
    assert all(read_json(grade_path(results, g, r))["status"] == "scored" for g in GRADERS for r in RUNS)
    assert session.judge_spent_usd <= 0.05

    tight = two_runs(tmp_path / "tight")
    before = mem.created
    session = grade(tight, max_cost=0.001)  # no request's estimate fits: none is submitted
    assert mem.created == before and session.judge_calls_capped == 6
    rec = read_json(grade_path(tight, "coverage", RUNS[0]))
    assert rec["score"] is None and "cost cap" in rec["items"][0]["error"]


def test_batches_json_that_cannot_be_read_names_the_file_and_the_fix(tmp_path: Path, mem: MemoryBatches) -> None:
    results = two_runs(tmp_path)
    path = results / "grades" / "coverage" / "batches.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"batches": {"oops": 1}}')
    r = CliRunner().invoke(app, ["grade", str(results), "--judge", JUDGE, "--batch"])
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert str(path) in out and "key `batches`" in out and "Fix:" in out
    assert not grade_path(results, "coverage", RUNS[0]).exists()


def test_a_judge_without_a_batch_api_is_refused_before_any_work(tmp_path: Path) -> None:
    results = two_runs(tmp_path)
    r = CliRunner().invoke(app, ["grade", str(results), "--judge", FAKE, "--batch"])
    assert r.exit_code == 2
    out = " ".join(r.output.split())
    assert f"--batch: {FAKE}" in out and "run without --batch" in out
    assert not (results / "grades").exists()


def test_a_cost_cap_refuses_a_judge_without_a_batch_price(
    tmp_path: Path, mem: MemoryBatches, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('["anthropic/claude-listed-only"]\ninput = 1.0\noutput = 5.0\n')
    monkeypatch.setenv("BENCHCTL_PRICES", str(prices))
    results = two_runs(tmp_path)
    args = ["grade", str(results), "--judge", "anthropic/claude-listed-only", "--batch", "--max-cost", "1"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2
    out = " ".join(r.output.split())
    assert "anthropic/claude-listed-only" in out and "no batch_input / batch_output price" in out
    assert mem.created == 0
    assert CliRunner().invoke(app, [*args, "--allow-unpriced"]).exit_code == 0  # counted as $0, as documented
