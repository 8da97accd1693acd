"""run -> grade -> report on the demo task: the report reads what the real writers wrote."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from benchctl.jsonio import read_json
from tests.rigs.run import REPO, cli

pytestmark = pytest.mark.docker
FAKE_JUDGE = "scripted/py:benchctl.grading.fake_judge:judge"


def test_run_grade_report_demo(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    base = [
        "run",
        str(REPO / "configs/demo"),
        "--model",
        f"scripted/{REPO}/configs/demo/investigator.json",
        "--budget",
        "2m",
        "--seeds",
        "2",
        "--out",
        str(out),
        "-j",
        "2",
        "--progress",
        "quiet",
    ]
    for extra in ([], ["--variant", "contoso"]):  # original data, then the swapped variant
        r = cli(*base, *extra)
        assert r.returncode == 0, r.stderr
    r = cli("grade", str(out), "--judge", FAKE_JUDGE)
    assert r.returncode == 0, r.stderr
    r = cli("report", str(out), "--format", "json", "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    lb = doc["tables"]["leaderboard"]["rows"]
    combined = {p.stem: read_json(p)["score"] for p in (out / "grades" / "combined").glob("*.json")}
    metas = [read_json(p) for p in (out / "runs").glob("*/meta.json")]
    assert len(metas) == 4 and len(lb) == 2
    for row in lb:
        ids = [m["run_id"] for m in metas if (m.get("variant") or "original") == row["variant"]]
        assert row["n_runs"] == 2 and row["n_scored"] == 2
        assert row["score_mean"] == pytest.approx(statistics.mean(combined[i] for i in ids))
    assert "variants" in doc["tables"] and "clusters" in doc["tables"]
    prov = doc["provenance"]
    assert set(prov["task_hashes"]) == {"demo", "demo~contoso"}
    assert prov["judges"]["coverage"] == {FAKE_JUDGE: 4}
    assert "<table>" in (tmp_path / "r.html").read_text()


def _remove_own_containers(client: Any, run_id: str) -> None:
    """Remove the sandbox a SIGKILLed `benchctl run` left behind (this test's unique run id only), and
    its gateway directory on the host."""
    import shutil

    for c in client.containers.list(all=True, filters={"label": f"benchctl.run_id={run_id}"}):
        for m in c.attrs.get("Mounts") or []:
            if str(m.get("Source", "")).startswith("/tmp/bc-gw-"):
                shutil.rmtree(m["Source"], ignore_errors=True)
        c.remove(force=True)


def test_sigkilled_run_is_counted_and_listed(tmp_path: Path, docker_engine: Any) -> None:
    """A run killed with SIGKILL leaves a transcript and no meta.json: the report counts it in its
    configuration's row as unfinished and lists it, next to a finished seed of the same configuration."""
    import os
    import signal
    import subprocess
    import time
    import uuid

    from tests.rigs.run import BENCHCTL, bash, make_scripted_task, tool

    name = f"killed{uuid.uuid4().hex[:6]}"
    done = [tool("create", path="report.md", file_text="r\n"), tool("submit")]
    task, model = make_scripted_task(tmp_path, done, "[early_exit]\nenabled = false\n", name=name)
    out = tmp_path / "out"
    args = [str(task), "--model", model, "--budget", "1m", "--out", str(out), "--progress", "quiet"]
    assert cli("run", *args).returncode == 0  # seed 0 finishes
    script = Path(model.removeprefix("scripted/"))
    script.write_text(json.dumps({"turns": [bash("sleep 120")], "after_end": "repeat_last"}))
    p = subprocess.Popen(
        [*BENCHCTL, "run", *args, "--seeds", "2"],
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def seed1() -> Path | None:
        return next(iter((out / "runs").glob(f"{name}__*__s1")), None)

    try:
        end = time.time() + 120  # until seed 1 is inside its `sleep 120`
        while time.time() < end and '"tool_call"' not in _transcript(seed1()):
            time.sleep(0.2)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    killed = seed1()
    assert killed is not None
    try:
        assert (killed / "transcript.jsonl").exists() and not (killed / "meta.json").exists()
        r = cli("report", str(out), "--format", "json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        (row,) = doc["tables"]["leaderboard"]["rows"]
        assert (row["n_runs"], row["unfinished"], row["errors"]) == (2, 1, 0)
        listed = {u["run_id"]: u for u in doc["tables"]["unscored"]["rows"]}
        assert listed[killed.name]["status"] == "unfinished"
        assert (
            "no meta.json" in listed[killed.name]["reason"] and "from the transcript" in listed[killed.name]["reason"]
        )
        assert doc["provenance"]["unfinished_runs"] == 1
        table = cli("report", str(out)).stdout  # the human table says it too
        assert "1 unfinished" in table and "no meta.json" in table
    finally:
        _remove_own_containers(docker_engine, killed.name)


def _transcript(p: Path | None) -> str:
    try:
        return (p / "transcript.jsonl").read_text() if p else ""
    except OSError:
        return ""
