"""`benchctl grade --batch` end to end: benchctl's batch clients (the vendors' SDKs for Anthropic and
OpenAI, REST for Gemini) against the fake upstream's batch APIs (benchctl/testing/fake_batches.py),
which answer each request with the fake judge at a fixed usage and return results shuffled.

Scores equal synchronous grading's, at the batch price; batch ids are on disk before the first
wait; a killed session (a subprocess, SIGKILL) or an interrupted one (SIGINT: Ctrl-C) is resumed on
the same batches, not paid twice; failed requests leave their items unscored and only they are asked
again; an expired batch's unprocessed requests are resubmitted."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.gateway.pricing import PriceTable
from benchctl.grading.batch_record import read_batches
from benchctl.grading.spend import spend_log_path
from benchctl.jsonio import read_json, read_jsonl
from benchctl.layout import grade_path
from benchctl.testing.fake_upstream import FakeUpstreamServer
from tests.rigs.batches import vendor_upstream
from tests.rigs.grading import GOOD_REPORT, WEAK_REPORT, make_rubric_task, make_run
from tests.rigs.limits import PRICED
from tests.rigs.run import BENCHCTL

pytestmark = pytest.mark.timeout(180)
ANTHROPIC = "anthropic/claude-haiku-4-5"
JUDGES = (ANTHROPIC, "openai/gpt-5-mini", "google/gemini-2.5-flash")
RUNS = ("t__react__m__2m__s0", "t__react__m__2m__s1")
GRADERS = ("coverage", "tldr")
ASKS = 6  # 2 runs x (2 coverage batches of findings + 1 tldr question)


@pytest.fixture
def up(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstreamServer]:
    with vendor_upstream(monkeypatch, "py:tests.rigs.limits:priced_judge") as server:
        yield server


def two_runs(tmp_path: Path) -> Path:
    task = make_rubric_task(tmp_path, graders='["coverage", "tldr"]')
    results = tmp_path / "results"
    for run_id, report in zip(RUNS, (GOOD_REPORT, WEAK_REPORT)):
        make_run(results, run_id, task, {"report.md": report})
    return results


def grade(results: Path, judge: str = ANTHROPIC, *args: str) -> Any:
    return CliRunner().invoke(app, ["grade", str(results), "--judge", judge, *args])


def scores(results: Path) -> dict[str, Any]:
    out = {}
    for g in GRADERS:
        for run in RUNS:
            rec = read_json(grade_path(results, g, run))
            out[f"{g}/{run}"] = (rec["status"], rec["score"], [(it["id"], it.get("score")) for it in rec["items"]])
    return out


def spend(results: Path) -> list[dict[str, Any]]:
    return [r for g in GRADERS for r in read_jsonl(spend_log_path(results, g)) if r.get("attempt")]


def recorded(results: Path) -> list[dict[str, Any]]:
    return [b for g in GRADERS for b in read_batches(results / "grades" / g / "batches.json")]


@pytest.mark.parametrize("judge", JUDGES)
def test_batched_grading_scores_as_synchronous_grading_at_the_batch_price(
    tmp_path: Path, up: FakeUpstreamServer, judge: str
) -> None:
    sync_dir = two_runs(tmp_path / "sync")
    assert grade(sync_dir, judge).exit_code == 0
    assert up.batches.created == 0
    results = two_runs(tmp_path / "batch")
    r = grade(results, judge, "--batch")
    assert r.exit_code == 0, r.output
    assert scores(results) == scores(sync_dir)  # results come back shuffled: matched by custom id
    assert (up.batches.created, up.batches.requests) == (2, ASKS)  # one batch per grader
    out = " ".join(r.output.split())
    assert f"batch: {ASKS} request(s) submitted in 2 batch(es) at batch prices" in out
    prices = PriceTable()
    list_price, batch_price = prices.cost(judge, PRICED), prices.cost(judge, PRICED, batch=True)
    assert batch_price is not None and list_price is not None and batch_price == pytest.approx(list_price / 2)
    assert [line["cost_usd"] for line in spend(results)] == pytest.approx([batch_price] * ASKS)
    assert [line["cost_usd"] for line in spend(sync_dir)] == pytest.approx([list_price] * ASKS)
    ids = {b["id"].removeprefix("batches/") for b in recorded(results)}  # Gemini's are resource names
    assert ids == set(up.batches.batches) and all(b["state"] == "ended" for b in recorded(results))


def test_a_killed_session_is_resumed_on_the_same_batches_and_paid_once(tmp_path: Path, up: FakeUpstreamServer) -> None:
    results = two_runs(tmp_path)
    up.batches.per_poll = 0  # the vendor is slow: the batches stay in progress
    cmd = [*BENCHCTL, "grade", str(results), "--judge", ANTHROPIC, "--batch"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        wait(lambda: len(recorded(results)) == 2 and up.batches.polls >= 2)  # on disk, then waiting
    finally:
        proc.kill()
        out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == -signal.SIGKILL, out
    assert not grade_path(results, "coverage", RUNS[0]).exists() and spend(results) == []
    ids = {b["id"] for b in recorded(results)}
    assert all(b["state"] == "in_progress" for b in recorded(results))

    up.batches.per_poll = None
    r = grade(results, ANTHROPIC, "--batch")
    assert r.exit_code == 0, r.output
    assert (up.batches.created, up.batches.requests) == (2, ASKS)  # the same two batches, nothing new
    assert {b["id"] for b in recorded(results)} == ids
    assert f"{ASKS} answered by batches of an earlier session" in " ".join(r.output.split())
    assert len(spend(results)) == ASKS
    assert all(s[0] == "scored" for s in scores(results).values())
    # and once more after the grades are lost (killed after reading the results): nothing counted twice
    for g in GRADERS:
        for run in RUNS:
            grade_path(results, g, run).unlink()
    assert grade(results, ANTHROPIC, "--batch").exit_code == 0
    assert up.batches.created == 2 and len(spend(results)) == ASKS


def test_ctrl_c_leaves_the_batches_running_and_says_how_to_resume(tmp_path: Path, up: FakeUpstreamServer) -> None:
    results = two_runs(tmp_path)
    up.batches.per_poll = 0
    cmd = [*BENCHCTL, "grade", str(results), "--judge", ANTHROPIC, "--batch"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        wait(lambda: len(recorded(results)) == 2 and up.batches.polls >= 2)
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=60)[0].decode()
    finally:
        proc.kill()
    assert proc.returncode == 130, out
    assert "keep running at the vendor" in out and "batches.json" in out and "Traceback" not in out
    assert all(b.end is None for b in up.batches.batches.values())  # not cancelled at the vendor
    up.batches.per_poll = None
    assert grade(results, ANTHROPIC, "--batch").exit_code == 0
    assert up.batches.created == 2 and len(spend(results)) == ASKS


def test_failed_requests_leave_items_unscored_and_a_rerun_asks_only_them(
    tmp_path: Path, up: FakeUpstreamServer
) -> None:
    results = two_runs(tmp_path)
    up.batches.fail(lambda body: b"- id F6:" in orjson.dumps(body), status=400, message="prompt is too long")
    r = grade(results, ANTHROPIC, "--batch")
    assert r.exit_code == 0, r.output  # partial grades (exit 1 is for unscored ones)
    rec = read_json(grade_path(results, "coverage", RUNS[0]))
    f6 = next(it for it in rec["items"] if it["id"] == "F6")
    assert rec["status"] == "partial" and f6["score"] is None and "prompt is too long" in f6["error"]
    assert "2 request(s) failed at the vendor" in " ".join(r.output.split())
    up.batches._fail.clear()
    again = grade(results, ANTHROPIC, "--batch")
    assert again.exit_code == 0, again.output
    assert (up.batches.created, up.batches.requests) == (3, ASKS + 2)  # one more batch: the 2 failed asks
    assert all(s[0] == "scored" for s in scores(results).values())


def test_an_expired_batch_is_resubmitted(tmp_path: Path, up: FakeUpstreamServer) -> None:
    results = two_runs(tmp_path)
    up.batches.expire_after = 3  # the coverage batch (4 requests) runs out after 3; tldr's (2) ends
    r = grade(results, ANTHROPIC, "--batch")
    assert r.exit_code == 0, r.output
    assert up.batches.created == 3 and up.batches.requests == ASKS + 1
    assert "1 request(s) resubmitted" in " ".join(r.output.split())
    expired = [b for b in recorded(results) if b["state"] == "expired"]
    assert len(expired) == 1
    assert sorted(x["outcome"] for x in expired[0]["requests"].values()) == ["succeeded"] * 3 + ["unprocessed"]
    assert all(s[0] == "scored" for s in scores(results).values())


@pytest.mark.parametrize("judge", JUDGES)
def test_the_batch_clients_connections_are_closed_with_the_session(
    tmp_path: Path, up: FakeUpstreamServer, judge: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Closed before the event loop that opened them ends, not by the garbage collector later
    ("Event loop is closed" tracebacks)."""
    results = two_runs(tmp_path)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        assert grade(results, judge, "--batch").exit_code == 0

        async def next_session() -> None:  # an unclosed client found by the collector now would close
            gc.collect()  # on this loop the connections the last one opened, and fail
            await asyncio.sleep(0.1)

        asyncio.run(next_session())
        gc.collect()
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def wait(cond: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if cond():
                return
        except (OSError, ValueError):  # batches.json mid-write
            pass
        time.sleep(0.05)
    raise AssertionError("timed out")
