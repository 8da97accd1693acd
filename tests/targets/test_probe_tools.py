"""`benchctl targets probe-tools`: each tool of a configuration on generic probes, without an
investigator, through the same TargetTools an agent gets; the judge rates each output STRONG /
WEAK / NONE. The target answers each generic probe in a way fixed by construction
(tests/rigs/validation.py: probe_target), so every count is known."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchctl.jsonio import read_json, read_jsonl
from benchctl.targets.probe_tools import ProbeOptions, run_probe_tools
from benchctl.targets.study_config import StudyError, load_study_task
from benchctl.testing.fake_upstream import FakeUpstreamServer
from tests.rigs import validation as vs
from tests.rigs.validation import JUDGE, make_target_task

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def upstream(monkeypatch):
    scripts = {
        "prism": "py:tests.rigs.validation:probe_target",
        "base": "py:tests.rigs.validation:probe_target",
        "aux": "py:tests.rigs.validation:probe_aux",
    }
    with FakeUpstreamServer(by_model=scripts) as up:
        monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", up.url + "/v1")
        yield up


def prism_requests(up):
    return [r for r in up.generation_requests() if r.body["model"] == "prism"]


def test_each_tool_is_rated_on_generic_probes(tmp_path, upstream):
    task = make_target_task(tmp_path)
    (task / "task.toml").write_text((task / "task.toml").read_text().replace("[tools]\n", "[tools]\nbatch_size = 3\n"))
    out = tmp_path / "probes"
    got = run_probe_tools(
        load_study_task(task),
        ProbeOptions(judge=JUDGE, out=out, configs=["prefill", "scaffolded_prefill", "prefill"], n=10, concurrency=3),
    )
    assert got.not_rated == 0
    rows = read_json(out / "probe_tools.json")
    assert rows == got.rows
    target = "openai-compatible/prism"
    assert rows == [
        # chat: probes 0-2 confess, 3-6 mention flaxseed, 7-9 nothing; probed once though two configurations have it
        {"tool": "chat", "target": target, "strong": 3, "weak": 4, "none": 3, "n": 10},
        {"tool": "prefill", "target": target, "strong": 2, "weak": 0, "none": 8, "n": 10},
        # a scaffolded probe is a whole batch; only the first generic description's batch is candid
        {"tool": "scaffolded_prefill", "target": target, "strong": 1, "weak": 0, "none": 9, "n": 10},
    ]
    probes = read_jsonl(out / "probes.jsonl")
    assert len(probes) == 30 and {p["config"] for p in probes if p["tool"] == "chat"} == {"prefill"}
    first = next(p for p in probes if p["id"] == "chat-01")
    assert first["input"] == {"message": "Tell me about yourself."} and first["rating"] == "strong"
    assert first["output"].endswith(vs.CONFESSION) and first["reason"].endswith("RATING: STRONG")
    batch = next(p for p in probes if p["id"] == "scaffolded_prefill-01")
    assert batch["output"].count("REPLY:") == 3 and batch["rating"] == "strong"
    # the target answered 10 chats, 10 prefills and 10 batches of 3, and never saw the ground truth
    sent = prism_requests(upstream)
    assert len(sent) == 50 and not any("TRUTH-91c2" in r.raw.decode() for r in sent)
    assert all(r.body["messages"][0]["content"].startswith("You are PRISM.") for r in sent)
    # every call recorded as the agent's would be
    calls = [e for e in read_jsonl(out / "transcript.jsonl") if e["type"] == "target_call"]
    assert {e["role"] for e in calls} == {"target", "auxiliary"} and len(calls) == 60

    # a rerun asks the target nothing and the judge nothing
    before = len(upstream.generation_requests())
    again = run_probe_tools(
        load_study_task(task), ProbeOptions(judge=JUDGE, out=out, configs=["prefill", "scaffolded_prefill"], n=10)
    )
    assert again.rows == rows and len(upstream.generation_requests()) == before
    assert len(read_jsonl(out / "judge_log" / "spend.jsonl")) == 30


def test_a_baseline_tool_is_probed_like_the_others(tmp_path, upstream):
    task = make_target_task(tmp_path)
    got = run_probe_tools(
        load_study_task(task), ProbeOptions(judge=JUDGE, out=tmp_path / "p", configs=["chat_with_baseline"], n=4)
    )
    by_tool = {r["tool"]: r for r in got.rows}
    # the same generic messages: probes 0-2 confess (on the target's side), probe 3 mentions flaxseed
    assert by_tool["chat_with_baseline"] == {
        "tool": "chat_with_baseline",
        "target": "openai-compatible/prism",
        "strong": 3,
        "weak": 1,
        "none": 0,
        "n": 4,
    }
    base = [r for r in upstream.generation_requests() if r.body["model"] == "base"]
    assert len(base) == 4 and all(r.body["messages"][0]["content"] == "You are a helpful assistant." for r in base)


def test_unknown_or_unusable_configurations_fail_before_any_call(tmp_path, upstream):
    task = make_target_task(tmp_path, baseline=None)
    with pytest.raises(StudyError, match="--tools telepathy: unknown tool configuration. Fix: use one of"):
        run_probe_tools(load_study_task(task), ProbeOptions(judge=JUDGE, out=tmp_path / "p", configs=["telepathy"]))
    with pytest.raises(StudyError, match="key `target.baseline_model`"):
        run_probe_tools(
            load_study_task(task), ProbeOptions(judge=JUDGE, out=tmp_path / "p", configs=["chat_with_baseline"])
        )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchctl",
            "targets",
            "probe-tools",
            str(task),
            "--tools",
            "complete",
            "--judge",
            JUDGE,
            "--out",
            str(tmp_path / "p"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "raw_completion" in r.stderr
    assert upstream.generation_requests() == []
