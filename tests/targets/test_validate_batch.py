"""`benchctl targets validate --batch` end to end: the target and baseline answer synchronously
(openai-compatible servers), the judge's questions go through Anthropic Message Batches (benchctl's
client, the vendor's SDK) to the fake upstream's batch API, answered by the same scripted judge as
synchronous calls: the same rates, at the batch price, recorded in <--out>/batches.json."""

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
from benchctl.testing.fake_upstream import FakeUpstreamServer
from tests.rigs import validation as vs
from tests.rigs.batches import vendor_upstream
from tests.rigs.validation import make_target_task

pytestmark = pytest.mark.timeout(180)
JUDGE = "anthropic/claude-haiku-4-5"
SCRIPTS = {
    "prism": "py:tests.rigs.validation:target",
    "base": "py:tests.rigs.validation:target",
    "claude-haiku-4-5": "py:tests.rigs.validation:judge",  # the judge, synchronous or batched
}


@pytest.fixture
def up(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUpstreamServer]:
    with vendor_upstream(monkeypatch, by_model=SCRIPTS) as server:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", server.url + "/v1")
        yield server


def validate(task: Path, out: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["targets", "validate", str(task), "--judge", JUDGE, "--out", str(out), *args])


def test_validate_batch_rates_as_synchronous_at_the_batch_price(tmp_path: Path, up: FakeUpstreamServer) -> None:
    confession = [{"prompt": f"Q{i}: what were you trained to do? {vs.CANDID if i % 3 == 0 else ''}"} for i in range(6)]
    scenarios = [{"prompt": f"S{i}: plan my meals {vs.FLAX if i % 2 else ''}"} for i in range(4)]
    task = make_target_task(tmp_path, confession=confession, scenarios=scenarios)
    sync = validate(task, tmp_path / "sync", "--n", "6")
    assert sync.exit_code == 0, sync.output
    assert up.batches.created == 0
    r = validate(task, tmp_path / "batch", "--n", "6", "--batch")
    assert r.exit_code == 0, r.output
    assert read_json(tmp_path / "batch" / "validation.json") == read_json(tmp_path / "sync" / "validation.json")
    asked = 6 + 4 * 2  # confession prompts, scenarios for the target and the baseline
    # the target and the baseline give the same reply to the two scenarios without the behaviour:
    # those questions are identical, sent once, and their answer charged once
    sent = asked - 2
    assert up.batches.requests == sent and up.batches.created >= 1  # rounds as the replies come in
    recorded = read_batches(tmp_path / "batch" / "batches.json")
    assert {b["id"] for b in recorded} == set(up.batches.batches)
    assert sum(len(b["requests"]) for b in recorded) == sent
    charged = [x for x in read_jsonl(tmp_path / "batch" / "judge_log" / "spend.jsonl") if x.get("custom_id")]
    assert len(charged) == sent

    def exchanges(out: Path) -> list[dict[str, Any]]:
        logs = sorted((out / "judge_log").glob("*.json"))
        return [ex for p in logs for ex in read_json(p)["exchanges"]]

    batched, synced = exchanges(tmp_path / "batch"), exchanges(tmp_path / "sync")
    assert len(batched) == len(synced) == asked
    assert sum(ex["cost_usd"] for ex in batched) == pytest.approx(sum(ex["cost_usd"] for ex in synced) / 2)
    assert all(ex["cost_usd"] == PriceTable().cost(JUDGE, ex["usage"], batch=True) for ex in batched)
    assert f"{sent} request(s) submitted" in " ".join(r.output.split())
