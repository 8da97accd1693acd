"""Sweeps on one key, for real: `benchctl run` with many concurrent runs in Docker, a priced model
served by the fake upstream (real HTTP), the limiter measured where the provider would see it."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchctl.jsonio import read_json, read_jsonl
from benchctl.testing.fake_upstream import FakeUpstreamServer
from tests.rigs.run import cli, make_scripted_task, runs

pytestmark = pytest.mark.docker
MODEL = "anthropic/claude-haiku-4-5"  # priced: $1 per million input tokens
NO_EARLY_EXIT = "[early_exit]\nenabled = false\n"


@pytest.fixture
def upstream() -> Iterator[FakeUpstreamServer]:
    up = FakeUpstreamServer("py:tests.rigs.limits:three_calls").start()
    yield up
    up.close()


def env_for(up: FakeUpstreamServer) -> dict[str, str]:
    return {
        **os.environ,
        "ANTHROPIC_BASE_URL": up.url,
        "ANTHROPIC_API_KEY": "sk-test-limits-0123456789",
        "PYTHONPATH": os.environ["PYTHONPATH"],  # this checkout's code and entry points (conftest)
    }


def task_dir(tmp: Path, tables: str = "", top: str = "") -> Path:
    task, _ = make_scripted_task(tmp, [], top + NO_EARLY_EXIT + tables, name=f"lim{uuid.uuid4().hex[:6]}")
    return task


def run(task: Path, out: Path, up: FakeUpstreamServer, *args: str, budget: str = "2m") -> Any:
    return cli(
        "run",
        str(task),
        "--model",
        MODEL,
        "--budget",
        budget,
        "--out",
        str(out),
        "--progress",
        "json",
        *args,
        env=env_for(up),
        timeout=600,
    )


def lines(stderr: str, event: str) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in stderr.splitlines() if ln.startswith("{") and f'"{event}"' in ln]


def test_concurrent_runs_on_one_key_hold_the_connection_limit_exactly(
    tmp_path: Path, upstream: FakeUpstreamServer
) -> None:
    task, out = task_dir(tmp_path), tmp_path / "out"
    r = run(task, out, upstream, "--seeds", "6", "--concurrency", "6", "--max-connections", "2")
    assert r.returncode == 0, r.stderr
    assert upstream.max_in_flight == 2  # measured at the provider: reached, never passed
    assert len(upstream.generation_requests()) == 18
    metas = [read_json(p / "meta.json") for p in runs(out)]
    assert [m["status"] for m in metas] == ["completed"] * 6
    total_waits = 0
    for p, m in zip(runs(out), metas):
        waits = [e for e in read_jsonl(p / "transcript.jsonl") if e["type"] == "rate_limit_wait"]
        rl = m["rate_limits"]
        assert rl["waits"] == len(waits) and rl["pause_budget"] is True
        assert {e["reason"] for e in waits} <= {"max_connections"}
        assert rl["wait_s"] == pytest.approx(sum(e["wait_s"] for e in waits), abs=0.01)
        assert rl["budget_extended_s"] == rl["paused_s"] <= rl["wait_s"] + 0.01
        total_waits += len(waits)
    assert total_waits >= 6  # 6 runs, 2 slots: most runs waited
    finished = lines(r.stderr, "run_finished")
    assert sum(1 for f in finished if f["rate_limit_wait_s"] > 0) >= 3
    rep = cli("report", str(out), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    (row,) = json.loads(rep.stdout)["tables"]["leaderboard"]["rows"]
    shares = [m["rate_limits"]["paused_s"] / 120 for m in metas]
    assert row["wait_share_mean"] == pytest.approx(sum(shares) / 6)  # the report's share of budget spent waiting
    assert row["wait_share_mean"] > 0 and row["budget_exhausted"] == 0


def test_the_sweep_cost_cap_stops_at_the_right_run_and_a_resume_continues_the_count(
    tmp_path: Path, upstream: FakeUpstreamServer
) -> None:
    task, out = task_dir(tmp_path), tmp_path / "out"
    # $0.30 a run, one run at a time: s0 $0.30, s1 $0.60, s2's second call brings the sweep to $0.80
    r = run(task, out, upstream, "--seeds", "4", "--max-cost", "0.75")
    assert r.returncode == 3, r.stderr
    assert "1 run(s) not started" in r.stderr and "spent $0.8000 of the sweep's $0.75 cost cap" in r.stderr
    ids = [p.name for p in runs(out)]
    assert [i.rsplit("__", 1)[1] for i in ids] == ["s0", "s1", "s2"]  # s3 never started: nothing written
    metas = {i.rsplit("__", 1)[1]: read_json(out / "runs" / i / "meta.json") for i in ids}
    assert metas["s0"]["status"] == metas["s1"]["status"] == "completed"
    s2 = metas["s2"]
    assert s2["status"] == "budget_exhausted" and s2["cost_usd"] == pytest.approx(0.2)
    assert s2["cost_cap"] == {"cap": "sweep", "max_cost_usd": 0.75, "spent_usd": pytest.approx(0.8)}
    assert "sweep's cost cap of $0.75" in s2["error"]
    assert (out / "runs" / ids[2] / "artifacts" / "report.md").exists()  # its files were collected
    events = read_jsonl(out / "runs" / ids[2] / "transcript.jsonl")
    notice = [e for e in events if e["type"] == "notice" and e["kind"] == "cost_cap"]
    assert len(notice) == 1 and "stops now" in notice[0]["text"]
    assert sum(1 for e in events if e["type"] == "model_call") == 2  # no call after the cap
    assert [ln["run_id"] for ln in lines(r.stderr, "run_not_started")] == [ids[2].replace("__s2", "__s3")]
    assert len(upstream.generation_requests()) == 8

    again = run(task, out, upstream, "--seeds", "4", "--max-cost", "0.75")  # resume: the count is on disk
    assert again.returncode == 3 and "spent $0.80; 1 run(s) not started" in again.stderr
    assert len(upstream.generation_requests()) == 8 and len(runs(out)) == 3

    more = run(task, out, upstream, "--seeds", "4", "--max-cost", "2")
    assert more.returncode == 0, more.stderr
    assert "spent $1.1000 of the sweep's $2.00 cost cap" in more.stderr  # $0.80 from disk + s3's $0.30
    final = {p.name.rsplit("__", 1)[1]: read_json(p / "meta.json")["status"] for p in runs(out)}
    assert final == {"s0": "completed", "s1": "completed", "s2": "budget_exhausted", "s3": "completed"}

    rep = cli("report", str(out), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    tables = json.loads(rep.stdout)["tables"]
    (row,) = tables["leaderboard"]["rows"]
    assert row["budget_exhausted"] == 1 and row["n_runs"] == 4
    capped = [u for u in tables["unscored"]["rows"] if u["status"] == "budget_exhausted"]
    assert [u["run_id"] for u in capped] == [ids[2]] and "cost cap" in capped[0]["reason"]


def test_a_runs_own_cost_cap_stops_each_run_and_grading_leaves_them_out(
    tmp_path: Path, upstream: FakeUpstreamServer
) -> None:
    task, out = task_dir(tmp_path, "[limits]\nmax_cost = 0.15\n"), tmp_path / "out"
    r = run(task, out, upstream, "--seeds", "2", "--concurrency", "2")
    assert r.returncode == 0, r.stderr
    for p in runs(out):
        m = read_json(p / "meta.json")
        assert m["status"] == "budget_exhausted" and m["cost_usd"] == pytest.approx(0.2)
        assert m["cost_cap"]["cap"] == "run" and m["cost_cap"]["max_cost_usd"] == 0.15
    g = cli("grade", str(out), "--judge", "scripted/py:benchctl.grading.fake_judge:judge")
    assert "budget_exhausted" in g.stdout + g.stderr and "not graded" in g.stdout + g.stderr
    assert not (out / "grades").exists() or not any((out / "grades").rglob("*.json"))


def test_rate_limit_waits_extend_the_deadline_and_the_time_notice_says_so(tmp_path: Path) -> None:
    up = FakeUpstreamServer("py:tests.rigs.limits:slow_look").start()
    try:
        results = {}
        for pause in (True, False):
            task = task_dir(tmp_path, top=f"pause_budget_on_rate_limit = {str(pause).lower()}\n")
            out = tmp_path / f"out-{pause}"
            done = threading.Event()

            def inject() -> None:  # the run's second call gets a 429 with retry-after 3 s
                up.wait_for_requests(len(up.requests) + 1, timeout=120)
                up.fail_next(429, retry_after=3)
                done.set()

            t = threading.Thread(target=inject, daemon=True)
            t.start()
            r = run(task, out, up, budget="30s")
            assert r.returncode == 0 and done.is_set(), r.stderr
            (p,) = runs(out)
            results[pause] = (read_json(p / "meta.json"), read_jsonl(p / "transcript.jsonl"))
    finally:
        up.close()
    for pause, (meta, events) in results.items():
        (wait,) = [e for e in events if e["type"] == "rate_limit_wait"]
        assert wait["reason"] == "retry_after" and wait["status"] == 429 and 2.9 <= wait["wait_s"] < 6
        assert wait["paused"] is pause
        rl = meta["rate_limits"]
        assert rl["paused_s"] == pytest.approx(wait["wait_s"], abs=0.05)
        assert rl["budget_extended_s"] == (pytest.approx(wait["wait_s"], abs=0.05) if pause else 0.0)
        after = [e["text"] for e in events if e["type"] == "notice" and e["kind"] == "time" and e["seq"] > wait["seq"]]
        assert after, events
        said = "(the clock was paused for 3s while rate limits held your model calls back)"
        assert (said in after[0]) is pause
        tool_result = next(e for e in events if e["type"] == "tool_result" and e["seq"] > wait["seq"])
        assert after[0] in tool_result["output"]  # what the model received


@pytest.mark.cli_binaries
def test_a_cost_cap_ends_an_agent_cli_cleanly(tmp_path: Path, sandbox_image: str) -> None:
    """Claude Code keeps asking for more: after the run's cap the gateway refuses its calls and the
    CLI is ended once none is in flight — no call cut off, every call priced."""
    bash = {
        "text": "Looking.",
        "tool_calls": [{"name": "Bash", "input": {"command": "sleep 1; ls /data"}}],
        "usage": {"input_tokens": 100_000, "output_tokens": 0},
    }
    up = FakeUpstreamServer({"turns": [bash], "after_end": "repeat_last"}).start()
    try:
        task, out = task_dir(tmp_path, "[limits]\nmax_cost = 0.25\n"), tmp_path / "out"
        r = run(task, out, up, "--harness", "claude-code")
        assert r.returncode == 0, r.stderr
        (p,) = runs(out)
        meta, events = read_json(p / "meta.json"), read_jsonl(p / "transcript.jsonl")
        sent = len(up.generation_requests())
    finally:
        up.close()
    assert meta["status"] == "budget_exhausted" and meta["cost_cap"]["cap"] == "run", meta.get("error")
    calls = [e for e in events if e["type"] == "model_call" and e.get("wire_api") == "anthropic_messages"]
    priced = [c for c in calls if c.get("status") == 200]
    assert len(priced) == sent == meta["gateway"]["calls"] and sent >= 3  # what reached the provider
    assert all(c["outcome"] == "ok" and c["cost_usd"] == pytest.approx(0.1) for c in priced)  # nothing cut off
    assert meta["cost_usd"] == pytest.approx(0.1 * sent) and meta["cost_usd"] >= 0.25
    cap_at = next(e["seq"] for e in events if e["type"] == "notice" and e["kind"] == "cost_cap")
    assert all(c["seq"] < cap_at for c in priced)  # no call went out after the cap
    assert "cost cap" in (meta["error"] or "")
