"""A model call in flight when a run ends is in the record: real runs in real Docker, for the ReAct
loop (deadline, then a follow-up; Ctrl-C) and the two agent CLIs (killed at the deadline mid-stream),
against a priced model served by the fake upstream, so a silent 0 cost would show."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from benchctl.jsonio import read_json, read_jsonl
from benchctl.testing.fake_upstream import FakeUpstreamServer
from tests.rigs.cli_harness import NO_POLICIES, cli_rig
from tests.rigs.run import BENCHCTL, REPO, make_scripted_task, run_inprocess, runs, tool

pytestmark = pytest.mark.docker
MODEL = "anthropic/claude-haiku-4-5"  # priced: an unpriced cut-off call must make the cost null, not 0
GENERATION = ("anthropic_messages", "openai_responses", "openai_chat", "gemini")
# The script: write the report, then a call that takes 300 s, then "Done." (for the follow-up).
HANG = [tool("create", path="report.md", file_text="r\n"), {"text": "thinking", "delay": 300}, {"text": "Done."}]
EXTRA = """
[early_exit]
enabled = false

[[followups]]
prompt = "Now expand the report."
budget = "10s"
"""


def serve(
    monkeypatch: pytest.MonkeyPatch | None, turns: list[dict[str, Any]]
) -> tuple[FakeUpstreamServer, dict[str, str]]:
    up = FakeUpstreamServer({"turns": turns, "after_end": "repeat_last"}).start()
    env = {"ANTHROPIC_BASE_URL": up.url, "ANTHROPIC_API_KEY": "sk-test-cutoff-0123456789"}
    if monkeypatch is not None:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
    return up, env


def assert_record_complete(meta: dict[str, Any], events: list[dict[str, Any]], requests: int) -> list[dict[str, Any]]:
    """Every request the upstream got is one model_call; meta's totals are the sum of those calls."""
    calls = [e for e in events if e["type"] == "model_call" and e.get("wire_api") in GENERATION]
    ids = [c["call_id"] for c in calls]
    assert len(ids) == len(set(ids)) == requests == meta["gateway"]["calls"], (ids, requests, meta["gateway"])
    assert sum(meta["served_models"].values()) == requests
    for key in ("input_tokens", "output_tokens"):
        assert meta["usage"][key] == sum(c["usage"][key] for c in calls)
    assert meta["cost_usd"] is None and events[-1]["type"] == "run_end" and events[-1]["cost_usd"] is None
    return calls


def test_react_call_in_flight_at_the_deadline_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    up, _env = serve(monkeypatch, HANG)
    try:
        task, _script = make_scripted_task(tmp_path, [{"text": "unused"}], EXTRA, name=f"cut{uuid.uuid4().hex[:6]}")
        out = tmp_path / "out"
        run_inprocess(task, MODEL, out, budget="15s")
        (run,) = runs(out)
        meta, events = read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl")
        requests = len(up.generation_requests())
    finally:
        up.close()
    assert meta["status"] == "timeout" and meta["followups"][0]["status"] == "completed"
    calls = assert_record_complete(meta, events, requests)
    cut = [c for c in calls if c["outcome"] != "ok"]
    assert [c["call_id"] for c in cut] == ["call-2"]  # the call the deadline cut off
    assert cut[0]["outcome"] == "timeout" and cut[0]["status"] is None and cut[0]["cost_usd"] is None
    assert "past the run's deadline" in cut[0]["error"]
    followup = next(i for i, e in enumerate(events) if e["type"] == "followup")
    assert events.index(cut[0]) < followup  # recorded when it was cut, not at the end


def test_run_rides_out_a_silent_upstream_with_the_idle_timeout_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHCTL_GATEWAY_IDLE_TIMEOUT", "1")
    monkeypatch.setenv("BENCHCTL_GATEWAY_ANSWER_TIMEOUT", "1")  # ReAct's calls are non-streaming
    up, _env = serve(monkeypatch, [HANG[0], {"text": "Done."}])
    try:
        up.stall_next()  # the run's first call gets silence
        task, _script = make_scripted_task(
            tmp_path, [{"text": "unused"}], "[early_exit]\nenabled = false\n", name=f"idle{uuid.uuid4().hex[:6]}"
        )
        out = tmp_path / "out"
        run_inprocess(task, MODEL, out, budget="2m")
        (run,) = runs(out)
        meta, events = read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl")
        requests = len(up.generation_requests())
    finally:
        up.close()
    assert meta["status"] == "completed" and (run / "artifacts" / "report.md").read_text() == "r\n"
    first = next(e for e in events if e["type"] == "model_call")
    assert first["outcome"] == "ok" and [a["status"] for a in first["retries"]] == [None, 200]
    assert "(idle timeout)" in first["retries"][0]["error"]
    assert requests == 3 and meta["gateway"]["calls"] == 2  # two calls, one of them tried twice
    # The silent upstream took that request and may bill it; its usage never came, so the run's cost is
    # unknown (null) rather than the retry's price alone.
    assert first["retries"][0]["usage_unknown"] is True and first["cost_usd"] is None
    assert meta["cost_usd"] is None and meta["gateway"]["errors"] == 0


def test_ctrl_c_with_a_call_in_flight_records_it_as_cancelled(tmp_path: Path) -> None:
    up, env = serve(None, HANG[:2])
    try:
        task, _script = make_scripted_task(tmp_path, [{"text": "unused"}], name=f"int{uuid.uuid4().hex[:6]}")
        out = tmp_path / "out"
        p = subprocess.Popen(
            [*BENCHCTL, "run", str(task), "--model", MODEL, "--budget", "5m", "--out", str(out), "--progress", "json"],
            cwd=REPO,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, **env},
        )
        try:
            up.wait_for_requests(2, timeout=120)  # the second call is now waiting for its answer
            time.sleep(1.0)
            os.killpg(p.pid, signal.SIGINT)
            p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        requests = len(up.generation_requests())
    finally:
        up.close()
    assert p.returncode == 130
    (run,) = runs(out)
    meta, events = read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl")
    assert meta["status"] == "error" and meta["error"] == "cancelled"
    calls = assert_record_complete(meta, events, requests)
    assert [c["outcome"] for c in calls] == ["ok", "cancelled"]
    assert calls[1]["cost_usd"] is None and "the gateway closed" in calls[1]["error"]


SLOW = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau"


@pytest.mark.cli_binaries
@pytest.mark.parametrize("harness,model", [("claude-code", "anthropic/claude-haiku-4-5"), ("codex", "openai/gpt-5")])
def test_cli_killed_at_the_deadline_mid_stream_leaves_the_partial_call_in_the_record(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch, harness: str, model: str
) -> None:
    from benchctl.harness import create_harness

    h = create_harness(harness, {})
    name = model.split("/")[1]
    slow = {"turns": [{"text": SLOW, "chunks": 40, "chunk_delay": 1.0}]}  # a 40 s answer, cut at 12 s
    with cli_rig(
        h, monkeypatch, sandbox_image, model=model, by_model={name: slow}, budget_s=12, policies=NO_POLICIES
    ) as rig:
        rig.gw.set_deadline(rig.ctx.budget.deadline)  # as the runner does
        result = h.run(rig.ctx)
        assert result.status == "timeout"
        rig.gw.close()
        calls = [c for c in rig.events("model_call") if c.get("wire_api") in GENERATION]
        assert len(calls) == len(rig.up.generation_requests()) == rig.gw.summary()["calls"]
        cut = calls[-1]
        assert cut["outcome"] == "timeout" and cut["partial"] is True and cut["status"] == 200
        assert cut["response"]["text"] and SLOW.startswith(cut["response"]["text"]) and cut["response"]["text"] != SLOW
        assert cut["cost_usd"] is None and rig.gw.summary()["cost_usd"] is None
        assert [c["call_id"] for c in calls].count(cut["call_id"]) == 1
