"""The first command of the README and of docs/getting-started.md: the demo task with the scripted investigator, end to end."""

from __future__ import annotations

import filecmp
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchctl.jsonio import read_json, read_jsonl
from benchctl.tasks import load_task
from tests.rigs.run import REPO, cli


# The demo's transcript, model calls left out (the gateway writes those from its own thread):
# a golden sequence, so any change in how the policies are wired shows up here. The notices come
# before the tool_result: ReAct appends them to it, and a tool_result holds what the model received.
def step(kind: str, n: int = 1, words: bool = False) -> list[str]:
    one = (
        ["assistant", f"tool_call:{kind}"]
        + (["notice:words"] if words else [])
        + ["notice:time", f"tool_result:{kind}"]
    )
    return one * n


GOLDEN = (
    ["run_start"]
    + step("bash", 3)
    + step("create", words=True)
    + ["assistant", "reprompt"]
    + step("bash")
    + step("edit", 3, words=True)
    + step("submit")
    + ["harness_event", "run_end"]
)

DEMO_CMD = ["run", "configs/demo", "--model", "scripted/configs/demo/investigator.json", "--budget", "2m"]


def test_demo_data_is_reproducible(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(REPO / "configs/demo/make_data.py"), str(tmp_path)], check=True)
    committed = REPO / "configs/demo/data"
    names = sorted(p.name for p in committed.iterdir())
    assert names == sorted(p.name for p in tmp_path.iterdir())
    match, mismatch, errors = filecmp.cmpfiles(committed, tmp_path, names, shallow=False)
    assert mismatch == [] and errors == []
    assert 250 <= sum(len(p.read_text().splitlines()) for p in committed.iterdir()) <= 500


def test_demo_task_loads_with_its_variant() -> None:
    t = load_task(REPO / "configs/demo")
    assert t.name == "demo" and "contoso" in t.variants
    assert t.policies.length and t.policies.length.file == "report.md"


@pytest.mark.docker
def test_demo_runs_end_to_end_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    t0 = time.time()
    r = cli(*DEMO_CMD, "--out", str(out))
    wall = time.time() - t0
    assert r.returncode == 0, r.stderr
    assert wall < 60
    (run,) = list((out / "runs").iterdir())
    meta = read_json(run / "meta.json")
    assert meta["status"] == "completed"
    assert meta["spec"]["task_dir"] == str(REPO / "configs/demo") and meta["task"] == "demo"
    assert meta["reprompts"] == 1
    report = (run / "artifacts" / "report.md").read_text()
    for fact in ("203.0.113.77", "svc-backup", "## TLDR", "v2.3.1"):
        assert fact in report
    assert 150 <= len(report.split()) <= 600
    ev = read_jsonl(run / "transcript.jsonl")
    assert [e["type"] for e in ev].count("reprompt") == 1
    seq = [
        e["type"]
        + (f":{e['name']}" if e["type"] in ("tool_call", "tool_result") else "")
        + (f":{e['kind']}" if e["type"] == "notice" else "")
        for e in ev
        if e["type"] != "model_call"
    ]
    assert seq == GOLDEN
    assert [e["seq"] for e in ev] == list(range(len(ev)))
    assert read_json(out / "sweep.json")["runs"] == [run.name]
    # rerunning the same command resumes: the finished run is skipped, nothing rewritten
    mtime = (run / "meta.json").stat().st_mtime_ns
    r2 = cli(*DEMO_CMD, "--out", str(out))
    assert r2.returncode == 0 and (run / "meta.json").stat().st_mtime_ns == mtime
    assert '"run_skipped"' in r2.stderr


@pytest.mark.docker
def test_demo_sweep_file_and_sweep_script(tmp_path: Path) -> None:
    import os

    out = tmp_path / "sweep"
    r = cli("run", "--sweep", "configs/demo/sweep.toml", "--out", str(out), "--progress", "json")
    assert r.returncode == 0, r.stderr
    metas = [read_json(p / "meta.json") for p in sorted((out / "runs").iterdir())]
    assert len(metas) == 4 and {m["status"] for m in metas} == {"completed"}
    assert {m["variant"] for m in metas} == {None, "contoso"}
    assert len({m["task_hash"] for m in metas}) == 2
    contoso = next(p for p in (out / "runs").iterdir() if "contoso" in p.name)
    assert "10.99." in " ".join(e.get("output", "") for e in read_jsonl(contoso / "transcript.jsonl"))

    env = {
        **os.environ,
        "MODELS": "scripted/configs/demo/investigator.json",
        "BUDGETS": "2m",
        "SEEDS": "2",
        "CONCURRENCY": "2",
        "BENCHCTL": str(tmp_path / "benchctl"),
    }
    Path(env["BENCHCTL"]).write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "from benchctl.cli import app; app()" "$@"\n'
    )
    Path(env["BENCHCTL"]).chmod(0o755)
    s = subprocess.run(
        ["bash", "scripts/sweep.sh", "configs/demo", str(tmp_path / "sh"), "--progress", "json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert s.returncode == 0, s.stderr
    assert len(list((tmp_path / "sh" / "runs").iterdir())) == 2
    s2 = subprocess.run(
        ["bash", "scripts/sweep.sh", "configs/demo", str(tmp_path / "sh"), "--progress", "json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert s2.returncode == 0 and s2.stderr.count('"run_skipped"') == 2  # resume: nothing redone
