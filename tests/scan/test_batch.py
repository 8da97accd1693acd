"""`benchctl scan --batch` end to end: an llm scanner's judge calls go through Anthropic Message
Batches (benchctl's client, the vendor's SDK) to the fake upstream's batch API, answered by the same
scripted judge as synchronous calls: the same answers, at the batch price, recorded in
scans/<scanner>/batches.json, and resumed rather than paid twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.gateway.pricing import PriceTable
from benchctl.grading.batch_record import read_batches
from benchctl.jsonio import read_json, read_jsonl
from benchctl.layout import scan_path
from benchctl.scan.result import judge_log_path, spend_log_path
from benchctl.testing.fake_upstream import FakeUpstreamServer
from tests.rigs.batches import vendor_upstream
from tests.scan.test_cli import A, B, C, scanner_file, three_runs

pytestmark = pytest.mark.timeout(120)
JUDGE = "anthropic/claude-haiku-4-5"


@pytest.fixture
def up(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstreamServer]:
    with vendor_upstream(monkeypatch, "py:tests.rigs.scan_judges:honest") as server:
        yield server


def scan(results: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["scan", str(results), "--judge", JUDGE, *args])


def test_scan_batch_answers_as_synchronous_scans_at_the_batch_price(tmp_path: Path, up: FakeUpstreamServer) -> None:
    f = scanner_file(tmp_path)
    sync_dir = three_runs(tmp_path / "sync")
    assert scan(sync_dir, "--scanner", str(f)).exit_code == 0
    results = three_runs(tmp_path / "batch")
    r = scan(results, "--scanner", str(f), "--batch")
    assert r.exit_code == 0, r.output
    keys = ("answer", "events", "explanation", "status")
    for run in (A, B, C):
        got, want = (
            read_json(scan_path(results, "mentions_grep", run)),
            read_json(scan_path(sync_dir, "mentions_grep", run)),
        )
        assert {k: got[k] for k in keys} == {k: want[k] for k in keys}
    assert (up.batches.created, up.batches.requests) == (1, 3)
    (batch,) = read_batches(results / "scans" / "mentions_grep" / "batches.json")
    assert batch["state"] == "ended" and {x["subject"] for x in batch["requests"].values()} == {A, B, C}
    ex = read_json(judge_log_path(results, "mentions_grep", A))["exchanges"][0]
    assert ex["batch_id"] == batch["id"] and ex["cost_usd"] == PriceTable().cost(JUDGE, ex["usage"], batch=True)
    assert "1 batch(es) at batch prices" in " ".join(r.output.split())

    # results lost after their costs were logged: the rerun reads the same batch, counts nothing again
    for run in (A, B, C):
        scan_path(results, "mentions_grep", run).unlink()
    again = scan(results, "--scanner", str(f), "--batch")
    assert again.exit_code == 0, again.output
    assert up.batches.created == 1 and len(read_jsonl(spend_log_path(results, "mentions_grep"))) == 3
    assert read_json(scan_path(results, "mentions_grep", A))["answer"] is True
