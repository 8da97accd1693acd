"""The Executor seam without a cluster: the runner's redo of lost runs (through a fake executor
plugged into the seam), bundles, key forwarding, transcript streaming, and `--ray` without Ray."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from benchctl.executors import PreparedData, RunJob, RunOutcome
from benchctl.executors.bundle import make_bundle, pack_dir, unpack_bundle, unpack_into
from benchctl.executors.ray_driver import forwarded_env
from benchctl.executors.ray_node import SecretEnv
from benchctl.harness import HarnessResult
from benchctl.jsonio import read_json, read_jsonl
from benchctl.run.runner import Runner
from benchctl.run.sweep import SweepConfig, expand
from benchctl.tasks import load_task
from benchctl.transcript import Redactor, TranscriptWriter
from tests.rigs.run import REPO, make_scripted_task


class LosingExecutor:
    """Loses the first `lose` attempts of every run (as a Ray executor does when a node dies)."""

    name = "losing"

    def __init__(self, lose: int, retries: int) -> None:
        self.lose, self.retries, self.calls = lose, retries, 0

    def check(self, task, specs):
        return None

    def parallelism(self, requested: int) -> int:
        return requested

    def execute(self, job: RunJob, transcript: TranscriptWriter, cancel: threading.Event) -> RunOutcome:
        self.calls += 1
        transcript.emit("run_start", "runner", run_id=job.spec.run_id, attempt=self.calls)
        if self.calls <= self.lose:
            transcript.emit("error", "runner", message="lost with node n1")
            return RunOutcome(HarnessResult("error", error="lost with node n1"), job.meta, retryable=True)
        (job.run_dir / "artifacts" / "report.md").write_text("done\n")
        job.meta["artifacts"] = ["report.md"]
        return RunOutcome(HarnessResult("completed", turns=3), job.meta)

    def stop_all(self) -> None:
        pass

    def close(self) -> None:
        pass


def _runner(tmp_path: Path, executor: LosingExecutor) -> tuple[Runner, list]:
    task_dir, model = make_scripted_task(tmp_path, [])
    task = load_task(task_dir)
    specs = expand(SweepConfig(task_dir=task_dir, models=[model], budgets=["1m"]), task.name, ["1m"])
    return Runner(task, tmp_path / "out", {None: PreparedData(task.data_dir, "h")}, executor=executor), specs


def test_a_lost_run_is_kept_as_an_error_attempt_and_redone(tmp_path: Path) -> None:
    ex = LosingExecutor(lose=1, retries=2)
    runner, specs = _runner(tmp_path, ex)
    [(_, meta)] = runner.run_all(specs)
    assert meta["status"] == "completed" and ex.calls == 2
    run = tmp_path / "out" / "runs" / specs[0].run_id
    lost = read_json(run / "attempts" / "1" / "meta.json")
    assert lost["status"] == "error" and lost["error"] == "lost with node n1"
    assert [e["type"] for e in read_jsonl(run / "attempts" / "1" / "transcript.jsonl")] == [
        "run_start",
        "error",
        "run_end",
    ]
    assert [e.get("attempt") for e in read_jsonl(run / "transcript.jsonl") if e["type"] == "run_start"] == [2]
    assert (run / "artifacts" / "report.md").read_text() == "done\n"
    assert sorted(p.name for p in (run / "attempts").iterdir()) == ["1"]


def test_redoing_lost_runs_stops_at_the_executors_limit(tmp_path: Path) -> None:
    ex = LosingExecutor(lose=10, retries=2)
    runner, specs = _runner(tmp_path, ex)
    [(_, meta)] = runner.run_all(specs)
    assert ex.calls == 3 and meta["status"] == "error"  # 1 try + 2 redos, then it stays an error
    run = tmp_path / "out" / "runs" / specs[0].run_id
    assert sorted(p.name for p in (run / "attempts").iterdir()) == ["1", "2"]


def test_streamed_lines_keep_their_time_get_the_drivers_seq_and_are_redacted_twice(tmp_path: Path) -> None:
    shipped: list[bytes] = []
    node = TranscriptWriter(None, redactor=Redactor(["node-secret-123"]), sink=shipped.append)
    node.emit("assistant", "harness", text="node-secret-123 and driver-secret-456")
    node.emit("tool_call", "harness", name="bash")
    driver = TranscriptWriter(tmp_path / "t.jsonl", redactor=Redactor(["driver-secret-456"]))
    seen: list[dict] = []
    driver.listeners.append(seen.append)
    driver.emit("run_start", "runner")
    for line in shipped:
        driver.append_line(line)
    driver.close()
    events = read_jsonl(tmp_path / "t.jsonl")
    assert [e["seq"] for e in events] == [0, 1, 2]
    assert events[1]["text"] == "[REDACTED] and [REDACTED]"  # the node redacted its key, the driver its own
    assert [e["t"] for e in events[1:]] == [json.loads(line)["t"] for line in shipped]  # the node's clock
    assert [e["type"] for e in seen] == ["run_start", "assistant", "tool_call"]  # progress sees them live
    assert b"node-secret-123" not in b"".join(shipped)


def test_secret_env_never_shows_its_values() -> None:
    env = SecretEnv({"ANTHROPIC_API_KEY": "sk-ant-very-secret-1", "OPENAI_BASE_URL": "http://x"})
    for text in (repr(env), str(env), f"{env}", repr([env])):
        assert "sk-ant-very-secret-1" not in text and "ANTHROPIC_API_KEY" in text
    assert pickle.loads(pickle.dumps(env)).values()["ANTHROPIC_API_KEY"] == "sk-ant-very-secret-1"


def test_only_keys_and_base_urls_travel_to_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k1-abcdefgh")
    monkeypatch.setenv("OPENAI_COMPATIBLE_PRISM_API_KEY", "k2-abcdefgh")
    monkeypatch.setenv("BENCHCTL_OPENAI_COMPATIBLE_PRISM_BASE_URL", "http://10.0.0.1/v1")
    monkeypatch.setenv("SOME_PASSWORDLESS_SETTING", "x")
    env = forwarded_env()
    assert env["ANTHROPIC_API_KEY"] == "k1-abcdefgh" and env["OPENAI_COMPATIBLE_PRISM_API_KEY"] == "k2-abcdefgh"
    assert env["BENCHCTL_OPENAI_COMPATIBLE_PRISM_BASE_URL"] == "http://10.0.0.1/v1"
    assert "SOME_PASSWORDLESS_SETTING" not in env and "PATH" not in env and "HOME" not in env


def test_a_bundle_carries_the_task_the_runs_data_and_its_scripts_but_no_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchctl.gateway.scripted import script

    task_dir, model = make_scripted_task(tmp_path, [{"text": "hello"}], data={"a.log": "x\n", "b.log": "y\n"})
    (task_dir / "prompt.md").write_text("p")
    (task_dir / "results" / "runs").mkdir(parents=True)  # a results dir inside the task dir
    (task_dir / "results" / "runs" / "big.bin").write_bytes(b"0" * 1000)
    (task_dir / ".git").mkdir()
    variant = tmp_path / "variant-data"
    variant.mkdir()
    (variant / "a.log").write_text("swapped\n")
    monkeypatch.chdir(tmp_path)
    rel = Path(model[len("scripted/") :]).relative_to(tmp_path)
    b = make_bundle(
        load_task(task_dir), variant, [f"scripted/{rel}", "scripted/py:m:f", None], exclude=[task_dir / "results"]
    )
    node = tmp_path / "node"
    got_task, got_data = unpack_bundle(b, node)
    files = sorted(str(p.relative_to(node)) for p in node.rglob("*") if p.is_file())
    assert files == ["data/a.log", "task/prompt.md", "task/task.toml"]  # the variant's data, not the task's
    assert (got_data / "a.log").read_text() == "swapped\n" and got_task == node / "task"
    assert list(b.scripts) == [str(rel)]
    monkeypatch.chdir(node)  # the node has no such file ...
    monkeypatch.setattr(script, "SHIPPED", dict(b.scripts))
    assert script.load_script(str(rel)).turns[0].text == "hello"  # ... but the shipped copy loads


def test_files_coming_back_from_a_node_cannot_escape_the_run_dir(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "artifacts").mkdir(parents=True)
    (src / "artifacts" / "report.md").write_text("r")
    (src / "artifacts" / "link").symlink_to("/etc/passwd")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(Exception):  # noqa: B017  tarfile's data filter refuses the outside link
        unpack_into(pack_dir(src), dest)
    (src / "artifacts" / "link").unlink()
    unpack_into(pack_dir(src), dest)
    assert (dest / "artifacts" / "report.md").read_text() == "r"


def test_ray_option_without_ray_installed_says_how_to_install_it(tmp_path: Path) -> None:
    task, model = make_scripted_task(tmp_path, [{"text": "x"}])
    code = "import sys; sys.modules['ray'] = None; from benchctl.cli import app; app()"  # as if not installed
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "run",
            str(task),
            "--model",
            model,
            "--budget",
            "1m",
            "--out",
            str(tmp_path / "out"),
            "--ray",
            "auto",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "pip install 'benchctl[ray]'" in r.stderr
    assert not (tmp_path / "out").exists()
    d = subprocess.run(
        [sys.executable, "-c", code, "doctor", "--ray", "auto"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert d.returncode == 2 and "pip install 'benchctl[ray]'" in d.stderr


def test_an_unreachable_cluster_is_a_clear_error_before_anything_is_written(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    task, model = make_scripted_task(tmp_path, [{"text": "x"}])
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "from benchctl.cli import app; app()",
            "run",
            str(task),
            "--model",
            model,
            "--budget",
            "1m",
            "--out",
            str(tmp_path / "out"),
            "--ray",
            f"127.0.0.1:{port}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert f"cannot connect to the Ray cluster at '127.0.0.1:{port}'" in r.stderr and "ray start --head" in r.stderr
    assert not (tmp_path / "out").exists()
