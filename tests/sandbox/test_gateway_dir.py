"""Gateway directories (/tmp/bc-gw-*) never outlive their run: a SIGKILLed run's directory is
removed by resume and by `benchctl cleanup`, and a live run's directory never is."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from benchctl.layout import make_run_id
from benchctl.sandbox import gateway_dir
from benchctl.sandbox.docker_client import docker_client
from benchctl.sandbox.gateway_dir import GatewayDir
from tests.rigs.run import BENCHCTL, REPO, cli, containers_with_label, make_scripted_task

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from benchctl.sandbox.gateway_dir import GatewayDir
    d = GatewayDir(sys.argv[1], root=Path(sys.argv[2]))
    print(d.path, flush=True)
    time.sleep(300)
""")


def _holder(run_id: str, root: Path) -> tuple[subprocess.Popen[str], Path]:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, run_id, str(root)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert p.stdout is not None
    return p, Path(p.stdout.readline().strip())


def test_a_killed_owners_directory_is_stale_and_a_live_ones_is_not(tmp_path: Path) -> None:
    live, live_dir = _holder("run-a", tmp_path)
    dead, dead_dir = _holder("run-a", tmp_path)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        mine = GatewayDir("run-a", root=tmp_path)  # a live run of this very process counts too
        assert (live_dir / "s").is_dir() and (dead_dir / "s").is_dir()
        found = {d.path: d for d in gateway_dir.find("run-a", root=tmp_path)}
        assert {p: d.owner_alive for p, d in found.items()} == {live_dir: True, dead_dir: False, mine.path: True}
        assert gateway_dir.remove_stale("run-b", root=tmp_path) == []  # another run's: untouched
        assert dead_dir.exists()
        assert [d.path for d in gateway_dir.remove_stale("run-a", root=tmp_path, dry_run=True)] == [dead_dir]
        assert dead_dir.exists()
        assert [d.path for d in gateway_dir.remove_stale("run-a", root=tmp_path)] == [dead_dir]
        assert not dead_dir.exists() and live_dir.exists() and mine.path.exists()
        mine.remove()
        assert not mine.path.exists()
    finally:
        live.kill()
        live.wait()
    assert [d.path for d in gateway_dir.remove_stale(root=tmp_path)] == [live_dir]  # its owner is gone now


def test_the_owner_record_stays_out_of_the_sandboxes_view(tmp_path: Path) -> None:
    d = GatewayDir("run-x", results=tmp_path / "res", root=tmp_path)
    try:
        assert list(d.mounted.iterdir()) == []  # what /gateway shows: only the socket, later
        assert d.mounted.stat().st_mode & 0o777 == 0o755
        owner = json.loads((d.path / "owner.lock").read_text())
        assert owner["run_id"] == "run-x" and owner["pid"] == os.getpid() and owner["results"] == str(tmp_path / "res")
    finally:
        d.remove()


def _legacy(root: Path, name: str, listening: bool | None, age_s: float) -> tuple[Path, socket.socket | None]:
    """A directory as older benchctl versions made it: the socket right inside, no owner lock."""
    d = root / f"bc-gw-{name}"
    d.mkdir()
    if listening is None:
        return d, None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(d / "gw.sock"))
    if listening:
        s.listen()
    else:
        s.close()  # the socket file stays, nobody listens: what a SIGKILL leaves
    old = time.time() - age_s
    os.utime(d / "gw.sock", (old, old))
    return d, s if listening else None


def test_directories_of_older_versions_go_only_when_their_gateway_is_dead(tmp_path: Path) -> None:
    dead, _ = _legacy(tmp_path, "dead", listening=False, age_s=600)
    live, server = _legacy(tmp_path, "live", listening=True, age_s=600)
    young, _ = _legacy(tmp_path, "young", listening=False, age_s=0)  # may be a gateway starting up
    empty, _ = _legacy(tmp_path, "empty", listening=None, age_s=0)  # cannot tell: left alone
    target = tmp_path / "precious"
    target.mkdir()
    (tmp_path / "bc-gw-link").symlink_to(target)  # planted in /tmp: never followed
    try:
        assert gateway_dir.remove_stale("some-run", root=tmp_path) == []  # they have no run id
        assert [d.path for d in gateway_dir.remove_stale(root=tmp_path)] == [dead]
        assert not dead.exists() and live.exists() and young.exists() and empty.exists() and target.exists()
    finally:
        assert server is not None
        server.close()


# ---- with real runs (Docker) -------------------------------------------------------------------


def _sandbox(run_id: str, p: subprocess.Popen[str], timeout: float = 120) -> tuple[str, Path]:
    """The container that `benchctl run` process `p` started for the run, and the host directory it
    mounts at /gateway. Both come from one list call: a second request (inspect) for a listed
    container fails with NotFound if the container is removed in between, and a run removes its
    own as soon as it ends. A run that ended before its sandbox was seen fails here, with its stderr."""
    with closing(docker_client()) as client:
        end = time.time() + timeout
        while time.time() < end:
            for c in client.api.containers(
                all=True, filters={"label": [f"benchctl.run_id={run_id}", f"benchctl.owner_pid={p.pid}"]}
            ):
                source = next((m["Source"] for m in c.get("Mounts") or [] if m.get("Destination") == "/gateway"), None)
                if source is not None:
                    return c["Id"], Path(source)
            if p.poll() is not None:
                assert p.stderr is not None
                raise AssertionError(
                    f"benchctl run ended (exit {p.returncode}) before its sandbox was seen: {p.stderr.read()[-2000:]}"
                )
            time.sleep(0.3)
    raise AssertionError(f"no sandbox of {run_id} owned by pid {p.pid}")


def _top(source: Path) -> Path:
    """The bc-gw-* directory itself: the mounted directory (older layout) or its parent."""
    return source if source.name.startswith("bc-gw-") else source.parent


def _exists(container_id: str) -> bool:
    return any(c.id == container_id for c in containers_with_label("benchctl.managed", "1"))


class _Runs:
    """`benchctl run` processes of one scripted run that hangs in its first model call, and
    everything they leave behind, removed at the end whatever happened."""

    def __init__(self, tmp: Path) -> None:
        self.name = f"gwdir{uuid.uuid4().hex[:6]}"
        self.task, self.model = make_scripted_task(tmp, [{"text": "thinking", "delay": 300}], name=self.name)
        self.run_id = make_run_id(self.name, "react", self.model, "5m", 0)
        self.procs: list[subprocess.Popen[str]] = []
        self.sources: list[Path] = []

    def args(self, out: Path) -> list[str]:
        return [
            *BENCHCTL,
            "run",
            str(self.task),
            "--model",
            self.model,
            "--budget",
            "5m",
            "--out",
            str(out),
            "--progress",
            "quiet",
        ]

    def start(self, out: Path) -> tuple[subprocess.Popen[str], str, Path]:
        p = subprocess.Popen(
            self.args(out),
            cwd=REPO,
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.procs.append(p)
        box, source = _sandbox(self.run_id, p)
        self.sources.append(source)
        return p, box, source

    def sigkill(self, p: subprocess.Popen[str]) -> None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                self.sigkill(p)
        for s in self.sources:
            shutil.rmtree(_top(s), ignore_errors=True)
        with closing(docker_client()) as client:
            for c in containers_with_label("benchctl.run_id", self.run_id):
                client.api.remove_container(c.id, force=True)


@pytest.mark.docker
def test_cleanup_removes_a_killed_runs_gateway_directory_but_never_a_live_runs(tmp_path: Path) -> None:
    runs = _Runs(tmp_path)
    try:
        killed, box_a, src_a = runs.start(tmp_path / "out-a")
        live, box_b, src_b = runs.start(tmp_path / "out-b")  # the same run in another results dir, still going
        runs.sigkill(killed)
        assert src_a.is_dir()  # what a SIGKILL leaves behind
        r = cli("cleanup", "--run-id", runs.run_id, timeout=120)
        assert r.returncode == 0, r.stderr
        assert not _top(src_a).exists(), r.stdout  # the dead owner's directory is gone, with its container
        assert f"removed gateway directory {_top(src_a)} (run {runs.run_id})" in r.stdout
        assert not _exists(box_a)
        assert src_b.is_dir() and _exists(box_b)  # the live run's are untouched
        assert live.poll() is None
    finally:
        runs.close()


@pytest.mark.docker
def test_resume_removes_the_killed_attempts_gateway_directory(tmp_path: Path) -> None:
    runs = _Runs(tmp_path)
    out = tmp_path / "out"
    try:
        killed, _, source = runs.start(out)
        runs.sigkill(killed)
        assert source.is_dir()
        Path(runs.model.removeprefix("scripted/")).write_text(
            json.dumps(
                {
                    "turns": [  # the rerun finishes at once
                        {
                            "text": "",
                            "tool_calls": [{"name": "create", "input": {"path": "report.md", "file_text": "done\n"}}],
                        },
                        {"text": "", "tool_calls": [{"name": "submit", "input": {}}]},
                    ],
                    "after_end": "stop",
                }
            )
        )
        resumed = subprocess.run(runs.args(out), cwd=REPO, text=True, capture_output=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert not _top(source).exists()  # resume removed the killed attempt's directory
        assert gateway_dir.find(runs.run_id) == []  # and the resumed run removed its own
        assert json.loads((out / "runs" / runs.run_id / "meta.json").read_text())["status"] == "completed"
    finally:
        runs.close()
