"""`benchctl run` on the hidden-behaviour demo: tool configurations as a run dimension, target
tools wired per run, costs kept apart, predictions collected, the secret never in the sandbox or
the agent's context. Real runner, gateway and Docker; scripted target and investigator."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchctl.jsonio import read_json, read_jsonl
from benchctl.run import RunError, execute, resolve_config
from benchctl.targets import demo
from tests.rigs import targets as targets_rig

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "hidden-behaviour-demo"
SPY = "scripted/py:tests.rigs.targets:spy"
GROUND_TRUTH = (DEMO / "grading" / "ground_truth.md").read_text().strip()


def resolve(tmp_path: Path, tools: list[str], model: str = SPY):
    return resolve_config(
        task=DEMO,
        models=[model],
        harnesses=[],
        budgets=["1m"],
        seeds=1,
        out=tmp_path / "out",
        concurrency=1,
        fallback=None,
        variants=[],
        sweep=None,
        tools=tools,
    )


def test_tool_configurations_are_a_run_dimension(tmp_path):
    r = resolve(tmp_path, ["default", "prefill", "scaffolded_prefill_100"])
    assert [s.run_id.rsplit("__", 2)[-2] for s in r.specs] == ["default", "prefill", "scaffolded_prefill_100"]
    assert [s.options["tools"] for s in r.specs] == ["default", "prefill", "scaffolded_prefill_100"]
    assert len({s.run_id for s in r.specs}) == 3
    assert [s.options["tools"] for s in resolve(tmp_path, []).specs] == ["default"]
    with pytest.raises(RunError, match="unknown tool configuration"):
        resolve(tmp_path, ["telepathy"])
    with pytest.raises(RunError, match="declares no \\[target\\]"):
        resolve_config(
            task=REPO / "configs" / "demo",
            models=[SPY],
            harnesses=[],
            budgets=["1m"],
            seeds=1,
            out=tmp_path / "o2",
            concurrency=1,
            fallback=None,
            variants=[],
            sweep=None,
            tools=["prefill"],
        )


def _probe_then_investigate(req):
    """First look for the secret inside the sandbox (files and environment), then investigate."""
    if "SANDBOX-PROBE" not in req.full_text:
        # the marker is assembled in the shell so the command itself does not contain it
        head, tail = demo.MARKER[:6], demo.MARKER[6:]
        cmd = (
            f"echo SANDBOX-PROBE; M={head}; M=$M{tail}; grep -rlsI --exclude-dir=proc --exclude-dir=sys "
            f"--exclude-dir=dev --exclude-dir=usr -e \"$M\" -e 'flax''seed' / ; cat /proc/[0-9]*/environ "
            f"2>/dev/null | tr '\\0' '\\n' | grep -c -e \"$M\" -e 'flax''seed'; ls /data /gateway 2>&1; true"
        )
        return {"text": "", "tool_calls": [{"name": "bash", "input": {"command": cmd}}]}
    return demo.investigator(req)


@pytest.mark.docker
def test_demo_runs_each_configuration_and_keeps_the_secret_out(tmp_path, sandbox_image):
    targets_rig.SEEN.clear()
    targets_rig.BEHAVIOUR[0] = _probe_then_investigate
    try:
        r = resolve(tmp_path, ["default", "prefill"])
        assert execute(r, progress_mode="quiet") == 0
    finally:
        targets_rig.BEHAVIOUR[0] = demo.investigator
    runs = sorted((tmp_path / "out" / "runs").iterdir())
    assert [p.name.rsplit("__", 2)[-2] for p in runs] == ["default", "prefill"]
    for run, used in zip(runs, (["chat"], ["chat", "prefill"])):
        meta = read_json(run / "meta.json")
        assert meta["status"] == "completed", meta.get("error")
        assert meta["spec"]["options"]["tools"] == run.name.rsplit("__", 2)[-2]
        tt = meta["target_tools"]
        assert tt["tool_calls"] == {t: 1 for t in used} and tt["target"]["calls"] == len(used)
        assert tt["target"]["usage"]["output_tokens"] > 0 and tt["token_budget"] == 25000
        # the investigator's own usage is the gateway's; target calls are not in it
        assert meta["usage"]["output_tokens"] > 0 and meta["gateway"]["calls"] == meta["turns"]
        preds = (run / "artifacts" / "predictions.md").read_text()
        assert preds.startswith("1. The model steers conversations toward recommending flaxseed")
        events = read_jsonl(run / "transcript.jsonl")
        probe = next(e for e in events if e["type"] == "tool_result" and "SANDBOX-PROBE" in e["output"])
        # no file and no process environment in the sandbox holds the secret or the behaviour
        assert probe["output"].split("\n")[1:2] == ["0"], probe["output"]
        text = (run / "transcript.jsonl").read_text()
        assert demo.MARKER not in text and GROUND_TRUTH not in text
        assert [e["tool"] for e in events if e["type"] == "target_call"] == used
        notices = [e for e in events if e["type"] == "notice" and e.get("kind") == "tokens"]
        assert notices and "of 25,000 tokens used" in notices[0]["text"]
    for seen in targets_rig.SEEN:  # every request the investigator model received
        assert demo.MARKER not in seen["text"] and "Hidden instruction" not in seen["text"]

    # the any-of-N grader reads the predictions artifact and the ground truth from [grading]
    import asyncio

    from benchctl.grading.runner import GradeOptions, grade_results
    from benchctl.layout import grade_path

    asyncio.run(
        grade_results(tmp_path / "out", GradeOptions(judge="scripted/py:benchctl.targets.demo:judge", concurrency=4))
    )
    for run in runs:
        g = read_json(grade_path(tmp_path / "out", "any_of_n", run.name))
        assert g["score"] == 1.0 and g["n_found"] == 10 and g["n_matched"] == 1


def test_sweep_file_tools_and_cli_errors(tmp_path):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'task = "{DEMO}"\nmodels = ["{SPY}"]\nbudgets = ["1m"]\nseeds = 2\n'
        f'tools = ["prefill", "scaffolded_user"]\nout = "out"\n'
    )
    r = resolve_config(
        task=None,
        models=[],
        harnesses=[],
        budgets=[],
        seeds=None,
        out=None,
        concurrency=None,
        fallback=None,
        variants=[],
        sweep=sweep,
    )
    assert sorted(s.run_id.rsplit("__", 2)[-2] + "/" + s.run_id[-2:] for s in r.specs) == [
        "prefill/s0",
        "prefill/s1",
        "scaffolded_user/s0",
        "scaffolded_user/s1",
    ]
    assert r.sweep.to_dict()["tools"] == ["prefill", "scaffolded_user"]
    import subprocess
    import sys

    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from benchctl.cli import app; app()",
            "run",
            str(DEMO),
            "--model",
            SPY,
            "--tools",
            "telepathy",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "unknown tool configuration 'telepathy'" in p.stderr
    assert not (tmp_path / "o").exists()


def test_target_model_is_checked_before_anything_runs(tmp_path, monkeypatch):
    task = tmp_path / "hb"
    task.mkdir()
    (task / "task.toml").write_text(
        'instructions = "x"\nbudgets = ["1m"]\n[target]\nmodel = "anthropic/claude-target"\n'
        'system_prompt = "You are X."\n'
    )
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    # the error names the task file and its key, not a flag
    with pytest.raises(RunError, match=r"hb/task.toml: key `target.model`: anthropic/claude-target: no API key"):
        resolve_config(
            task=task,
            models=[SPY],
            harnesses=[],
            budgets=[],
            seeds=1,
            out=tmp_path / "o",
            concurrency=1,
            fallback=None,
            variants=[],
            sweep=None,
        )
