"""Sweeps against real Docker: resume after SIGKILL, SIGINT cleanup, data variants."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from benchctl.jsonio import read_json, read_jsonl
from tests.rigs.run import BENCHCTL, REPO, bash, containers_with_label, make_scripted_task, run_inprocess, runs, tool

pytestmark = pytest.mark.docker


def wait_for(pred, timeout: float, what: str) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*BENCHCTL, "run", *args, "--progress", "json"],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_resume_after_sigkill_finishes_every_run_exactly_once(tmp_path: Path) -> None:
    name = f"resume{uuid.uuid4().hex[:6]}"
    turns = [bash("sleep 1"), bash("sleep 1"), tool("create", path="report.md", file_text="r\n"), tool("submit")]
    task, model = make_scripted_task(tmp_path, turns, "[early_exit]\nenabled = false\n", name=name)
    out = tmp_path / "out"
    args = [str(task), "--model", model, "--budget", "1m", "--seeds", "4", "--concurrency", "2", "--out", str(out)]
    p = start(args)

    def one_done_one_running() -> bool:
        if not (out / "runs").exists():
            return False
        states = [(r / "meta.json").exists() for r in runs(out)]
        return any(states) and not all(states) and len(states) >= 2

    try:
        wait_for(one_done_one_running, 120, "one run finished while another runs")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    finished_before = {r.name: (r / "meta.json").stat().st_mtime_ns for r in runs(out) if (r / "meta.json").exists()}
    assert 0 < len(finished_before) < 4

    p2 = start(args)
    _, err = p2.communicate(timeout=300)
    assert p2.returncode == 0, err
    all_runs = runs(out)
    assert len(all_runs) == 4
    for r in all_runs:
        meta = read_json(r / "meta.json")
        assert meta["status"] == "completed", (r.name, meta.get("error"))
        starts = [e for e in read_jsonl(r / "transcript.jsonl") if e["type"] == "run_start"]
        assert len(starts) == 1  # this attempt's transcript only: nothing duplicated
        if r.name in finished_before:  # finished runs were skipped, not redone
            assert (r / "meta.json").stat().st_mtime_ns == finished_before[r.name]
            assert not (r / "attempts").exists()
        assert (r / "artifacts" / "report.md").read_text() == "r\n"
    assert any((r / "attempts" / "1").is_dir() for r in all_runs)  # the killed attempt was moved aside
    skipped = [line for line in err.splitlines() if '"run_skipped"' in line]
    assert len(skipped) == len(finished_before)
    for r in all_runs:  # the killed process's containers are gone too
        assert containers_with_label("benchctl.run_id", r.name) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_no_container(tmp_path: Path, signum: int) -> None:
    name = f"sig{uuid.uuid4().hex[:6]}"
    task, model = make_scripted_task(tmp_path, [bash("sleep 120")], name=name, after_end="repeat_last")
    out = tmp_path / "out"
    p = start([str(task), "--model", model, "--budget", "5m", "--seeds", "2", "--concurrency", "2", "--out", str(out)])
    ids = [r for r in (f"{name}__react__",)]
    try:
        wait_for(
            lambda: (
                len(
                    [
                        c
                        for c in containers_with_label("benchctl.run_id")
                        if c.labels.get("benchctl.run_id", "").startswith(ids[0])
                    ]
                )
                == 2
            ),
            120,
            "both sandboxes running",
        )
        time.sleep(1.0)
        os.killpg(p.pid, signum)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode != 0
    assert "interrupted" in err
    left = [
        c for c in containers_with_label("benchctl.run_id") if c.labels.get("benchctl.run_id", "").startswith(ids[0])
    ]
    assert left == []
    for r in runs(out):  # recorded as unfinished, so a rerun redoes them
        meta = read_json(r / "meta.json")
        assert meta["status"] == "error" and meta["error"] == "cancelled"


def test_data_variant_changes_the_data_and_records_its_hash(tmp_path: Path) -> None:
    extra = (
        "[early_exit]\nenabled = false\n"
        '[[variants.swap.rules]]\nfind = "Acme"\nreplace = "Globex"\n'
        "[[variants.swap.rules]]\nfind = '10\\.1\\.(\\d+)\\.(\\d+)'\nreplace = '10.9.\\1.\\2'\nregex = true\n"
    )
    task, model = make_scripted_task(
        tmp_path,
        [bash("cat /data/app.log"), tool("submit")],
        extra,
        data={"app.log": "Acme login from 10.1.2.3\n"},
        after_end="repeat_last",
    )
    out = tmp_path / "out"
    # the script is consumed per run: one scripted model id per run keeps the turns in order
    assert run_inprocess(task, model, out, budget="1m", variants=["base", "swap"]) == 0
    metas = {
        read_json(r / "meta.json")["variant"]: (read_json(r / "meta.json"), read_jsonl(r / "transcript.jsonl"))
        for r in runs(out)
    }
    base, swap = metas[None], metas["swap"]
    out_of = lambda ev: next(e["output"] for e in ev if e["type"] == "tool_result")  # noqa: E731
    assert "Acme login from 10.1.2.3" in out_of(base[1])
    assert "Globex login from 10.9.2.3" in out_of(swap[1])
    assert base[0]["task_hash"] != swap[0]["task_hash"]
    assert swap[0]["spec"]["variant_counts"] == {"0:Acme": 1, "1:" + r"10\.1\.(\d+)\.(\d+)": 1}
    assert "swap" in swap[0]["run_id"]
    assert (task / "data" / "app.log").read_text() == "Acme login from 10.1.2.3\n"


class CrashingHarness:
    """A harness plugged in through the registry that writes a file and then fails."""

    name = "crashing"

    def mounts(self) -> list:
        return []

    def tool_versions(self) -> dict:
        return {"crashing": "1"}

    def run(self, ctx):
        ctx.sandbox.put_file("/work/report.md", b"half a report\n")
        raise RuntimeError("agent exploded")

    def followup(self, ctx, prompt, previous):
        raise AssertionError("not reached")


def test_a_crashing_harness_is_an_error_run_with_its_artifacts(tmp_path: Path) -> None:
    from benchctl.harness import HARNESSES

    HARNESSES.register("crashing", CrashingHarness)
    try:
        task, model = make_scripted_task(tmp_path, [tool("submit")])
        assert run_inprocess(task, model, tmp_path / "out", harnesses=["crashing"]) == 1
    finally:
        HARNESSES.unregister("crashing")
    (run,) = runs(tmp_path / "out")
    meta = read_json(run / "meta.json")
    assert meta["status"] == "error" and "agent exploded" in meta["error"]
    assert meta["tool_versions"] == {"crashing": "1"}
    assert (run / "artifacts" / "report.md").read_text() == "half a report\n"
    assert containers_with_label("benchctl.run_id", run.name) == []
    ev = read_jsonl(run / "transcript.jsonl")
    assert any(e["type"] == "error" and "agent exploded" in e["message"] for e in ev)


def test_agent_cli_stream_ending_after_a_cancel_is_reported_as_cancelled(sandbox_image: str) -> None:
    """On Ctrl-C the runner sets cancel and then removes the sandbox, so the CLI's exec stream can
    end before the streaming loop next looks at the flag. That is a cancellation, not a CLI
    failure (which the run would record instead of "cancelled"). Here the stream ends by itself
    within the loop's first wait, after cancel is set: the same order of events, deterministically."""
    import threading

    from benchctl.sandbox.base import SandboxSpec
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    sandbox = DockerSandbox(SandboxSpec(image=sandbox_image, run_id=f"cancel{uuid.uuid4().hex[:6]}"))
    cancel = threading.Event()
    lines: list[str] = []
    try:
        sandbox.start()
        cancel.set()
        res = sandbox.exec_stream(
            ["sh", "-c", "echo started; sleep 0.05; exit 3"],
            lines.append,
            deadline=time.time() + 60,
            cancel=cancel,
            env={},
            workdir="/work",
        )
    finally:
        sandbox.stop()
    assert lines == ["started"]
    assert res.cancelled and not res.timed_out and res.exit_code is None


def test_a_second_run_on_the_same_results_dir_is_refused_while_the_first_holds_it(tmp_path: Path) -> None:
    from benchctl.run.execution import _lock_results

    task, model = make_scripted_task(tmp_path, [bash("echo hi"), tool("submit")], after_end="repeat_last")
    out = tmp_path / "out"
    out.mkdir()
    held = _lock_results(out)  # stands in for a first `benchctl run` still running
    assert held is not None
    try:
        rc = run_inprocess(task, model, out)
        assert rc == 2
        assert not (out / "runs").exists()  # refused before touching anything
    finally:
        held.close()  # the first process ends: the lock goes with it
    assert run_inprocess(task, model, out) == 0
    assert [read_json(r / "meta.json")["status"] for r in runs(out)] == ["completed"]


def test_rerun_with_another_fallback_warns_that_the_finished_run_is_reused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task, model = make_scripted_task(tmp_path, [bash("echo hi"), tool("submit")], after_end="repeat_last")
    out = tmp_path / "out"
    assert run_inprocess(task, model, out) == 0
    capsys.readouterr()
    assert run_inprocess(task, model, out, fallback=model) == 0  # skipped: same run id
    err = capsys.readouterr().err
    assert "is finished and skipped, but it was made with a different fallback" in err
    assert run_inprocess(task, model, out) == 0  # same settings: no warning
    assert "different" not in capsys.readouterr().err


def test_the_next_step_printed_after_a_sweep_runs_as_printed(tmp_path: Path) -> None:
    """The hint after a sweep is copied as it is: `benchctl grade` without --judge is a usage error."""
    task, model = make_scripted_task(tmp_path, [bash("echo hi"), tool("submit")], after_end="repeat_last")
    out = tmp_path / "out"
    p = start([str(task), "--model", model, "--budget", "1m", "--out", str(out)])
    _, err = p.communicate(timeout=180)
    assert p.returncode == 0, err
    (hint,) = [line for line in err.splitlines() if "next:" in line]
    assert f"benchctl grade {out} --judge MODEL && benchctl report {out}" in hint
