"""DockerSandbox against a real Docker Engine: isolation, limits, lifecycle.

One container per module where the test allows (the isolation and lifecycle tests share one;
limit tests get their own small-limit containers).
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchctl.sandbox.base import Limits, SandboxSpec
from tests.rigs.run import containers_with_label

pytestmark = pytest.mark.docker


class UnixEchoServer:
    """Tiny host-side unix socket server standing in for the model gateway."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        os.chmod(path, 0o666)  # the sandbox user (uid 1000) must be allowed to connect
        self.sock.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"pong:" + conn.recv(100))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def env_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sbx")
    data = root / "data"
    data.mkdir()
    (data / "input.log").write_text("line one\nline two\n")
    gw = root / "gw"
    gw.mkdir(mode=0o700)
    return {"data": data, "gateway": gw}


@pytest.fixture(scope="module")
def server(env_dirs: dict[str, Path]):
    srv = UnixEchoServer(env_dirs["gateway"] / "gw.sock")
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def sb(sandbox_image: str, env_dirs: dict[str, Path], server: UnixEchoServer):
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    spec = SandboxSpec(
        image=sandbox_image,
        run_id="test-sandbox-docker",
        data_dir=env_dirs["data"],
        gateway_dir=env_dirs["gateway"],
        env={"TASK_NAME": "demo"},
    )
    box = DockerSandbox(spec)
    box.start()
    yield box
    box.stop()


def py(sb, code: str, timeout: float = 30):
    return sb.exec(["python3", "-c", code], timeout=timeout)


# --- network isolation -----------------------------------------------------------------------


def test_outbound_tcp_fails(sb) -> None:
    r = py(sb, "import socket; s=socket.socket(); s.settimeout(3); s.connect(('1.1.1.1', 443))")
    assert r.exit_code != 0 and ("unreachable" in r.stderr.lower() or "Errno" in r.stderr), r


def test_udp_fails(sb) -> None:
    r = py(sb, "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('8.8.8.8', 53))")
    assert r.exit_code != 0 and "unreachable" in r.stderr.lower(), r


def test_dns_fails(sb) -> None:
    r = py(sb, "import socket; print(socket.getaddrinfo('example.com', 443))")
    assert r.exit_code != 0 and "gaierror" in r.stderr, r


def test_ipv6_fails(sb) -> None:
    r = py(
        sb, "import socket; s=socket.socket(socket.AF_INET6); s.settimeout(3); s.connect(('2606:4700:4700::1111', 443))"
    )
    assert r.exit_code != 0 and "Errno" in r.stderr, r


def test_only_loopback_interface(sb) -> None:
    r = sb.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert r.stdout.split() == ["lo"], r


def test_unix_socket_from_host_reachable(sb) -> None:
    r = py(
        sb,
        "import socket; s=socket.socket(socket.AF_UNIX); s.connect('/gateway/gw.sock'); "
        "s.sendall(b'ping'); print(s.recv(100).decode())",
    )
    assert r.exit_code == 0 and r.stdout.strip() == "pong:ping", r


# --- privileges and mounts ------------------------------------------------------------------


def test_not_root_and_no_privileges(sb) -> None:
    r = sb.exec("id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    lines = r.stdout.split("\n")
    assert lines[0] == "1000"
    assert "CapEff:\t0000000000000000" in r.stdout and "NoNewPrivs:\t1" in r.stdout, r.stdout


def test_data_read_only_and_readable(sb) -> None:
    assert sb.exec("cat /data/input.log").stdout == "line one\nline two\n"
    r = sb.exec("touch /data/new 2>&1; echo x >> /data/input.log")
    assert r.exit_code != 0 and "Read-only file system" in r.stdout + r.stderr, r


def test_work_writable_and_env_passed(sb) -> None:
    r = sb.exec("echo hi > /work/w.txt && cat /work/w.txt && pwd && echo $TASK_NAME")
    assert r.stdout.split() == ["hi", "/work", "demo"], r


def test_image_digest_recorded(sb, docker_engine) -> None:
    assert sb.image_digest == docker_engine.images.get(sb.spec.image).id
    assert sb.image_digest.startswith("sha256:")


def test_tini_is_pid1(sb) -> None:
    assert sb.exec("cat /proc/1/cmdline | tr '\\0' ' '").stdout.startswith("/usr/bin/tini")


# --- exec, files ----------------------------------------------------------------------------


def test_exec_exit_codes_and_streams(sb) -> None:
    r = sb.exec("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)


def test_exec_timeout_kills_process_inside(sb) -> None:
    r = sb.exec("sleep 300 & setsid sleep 301 >/dev/null 2>&1 & sleep 302", timeout=1)
    assert r.timed_out and r.exit_code is None
    left = sb.exec("ps -eo args").stdout
    assert "sleep 30" not in left, left


def test_exec_output_cap(sb) -> None:
    r = sb.exec("head -c 5000 /dev/zero | tr '\\0' a", output_cap=100)
    assert r.truncated and r.stdout == "a" * 100 and r.exit_code == 0


def test_exec_endless_output_is_stopped(sb) -> None:
    r = sb.exec("yes", timeout=120, output_cap=1000)
    assert r.truncated and r.exit_code is None and not r.timed_out
    assert "yes" not in sb.exec("ps -eo comm").stdout.split()


def test_concurrent_exec_from_threads(sb) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: sb.exec(f"sleep 0.2; echo {i}", timeout=30), range(16)))
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(16)]


def test_put_and_get_file(sb) -> None:
    sb.put_file("/work/deep/dir/f.bin", b"\x00\x01binary", mode=0o600)
    assert sb.get_file("/work/deep/dir/f.bin") == b"\x00\x01binary"
    assert sb.exec("stat -c '%U %a' /work/deep/dir/f.bin").stdout.strip() == "agent 600"
    from benchctl.sandbox.docker_sandbox import SandboxError

    with pytest.raises(SandboxError, match="cap"):
        sb.get_file("/work/deep/dir/f.bin", max_bytes=3)
    with pytest.raises(FileNotFoundError):
        sb.get_file("/work/nope")
    with pytest.raises(SandboxError):
        sb.put_file("/data/x", b"no")


# --- limits (own containers) ----------------------------------------------------------------


def test_limits_reach_docker_in_its_units(sandbox_image: str, docker_engine) -> None:
    """[limits] values are converted by benchctl (docker-py alone does not read "96MiB")."""
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    with DockerSandbox(
        SandboxSpec(image=sandbox_image, run_id="test-limits", limits=Limits(cpus=0.5, memory="96MiB", pids=48))
    ) as box:
        host = docker_engine.api.inspect_container(box.container_id)["HostConfig"]
        assert (host["NanoCpus"], host["Memory"], host["MemorySwap"], host["PidsLimit"]) == (
            500_000_000,
            96 * 2**20,
            96 * 2**20,
            48,
        )
        assert box.exec("echo alive").stdout == "alive\n"


def test_memory_hog_killed_and_reported(sandbox_image: str) -> None:
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    with DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-mem", limits=Limits(memory="128m"))) as box:
        r = box.exec(["python3", "-c", "b = bytearray(512 * 1024 * 1024); print('survived')"], timeout=60)
        assert r.exit_code == 137 and "survived" not in r.stdout
        assert "out-of-memory" in r.stderr
        assert box.exec("echo alive").stdout == "alive\n"  # the sandbox itself survives


def test_fork_bomb_contained(sandbox_image: str, docker_engine) -> None:
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    with DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-fork", limits=Limits(pids=64))) as box:
        peak = []
        result = []
        bomb = threading.Thread(
            target=lambda: result.append(box.exec("bomb() { bomb | bomb; }; bomb", timeout=6, output_cap=10_000))
        )
        bomb.start()
        api = docker_engine.api
        host_ok = []
        while bomb.is_alive():
            stats = api.stats(box.container_id, stream=False, one_shot=True)
            peak.append(stats.get("pids_stats", {}).get("current", 0))
            host_ok.append(subprocess.run(["true"], timeout=30).returncode == 0)
        bomb.join()
        assert 32 <= max(peak) <= 64, peak  # it did grow, and hit the ceiling
        assert host_ok and all(host_ok)
        assert result[0].timed_out
        r = box.exec("echo recovered", timeout=30)
        assert r.stdout == "recovered\n", r


# --- lifecycle ------------------------------------------------------------------------------


def test_stop_removes_container_and_is_idempotent(sandbox_image: str, docker_engine) -> None:
    import docker

    from benchctl.sandbox import cleanup
    from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError

    box = DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-stop"))
    box.start()
    assert box.name in cleanup.live_containers()
    cid = box.container_id
    labels = docker_engine.api.inspect_container(cid)["Config"]["Labels"]
    assert labels["benchctl.managed"] == "1" and labels["benchctl.run_id"] == "test-stop"
    box.stop()
    box.stop()
    with pytest.raises(docker.errors.NotFound):
        docker_engine.api.inspect_container(cid)
    assert box.name not in cleanup.live_containers()
    with pytest.raises(SandboxError, match="not running"):
        box.exec("true")


def test_context_manager_removes_on_error(sandbox_image: str, docker_engine) -> None:
    import docker

    from benchctl.sandbox.docker_sandbox import DockerSandbox

    with pytest.raises(RuntimeError):
        with DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-ctx")) as box:
            cid = box.container_id
            raise RuntimeError("boom")
    with pytest.raises(docker.errors.NotFound):
        docker_engine.api.inspect_container(cid)


def test_missing_image_says_how_to_build() -> None:
    from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError

    with pytest.raises(SandboxError, match="benchctl images build"):
        DockerSandbox(SandboxSpec(image="benchctl-no-such-image:nope", run_id="test-noimg")).start()


def test_exec_after_external_removal_is_a_sandbox_error(sandbox_image: str, docker_engine) -> None:
    from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError

    with DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-gone")) as box:
        docker_engine.api.remove_container(box.container_id, force=True)  # e.g. `benchctl cleanup --all`
        with pytest.raises(SandboxError, match="cannot exec"):
            box.exec("true")
        with pytest.raises(SandboxError, match="no longer exists"):  # not "file does not exist"
            box.get_file("/etc/passwd")


def test_start_after_stop_refuses_and_creates_nothing(sandbox_image: str) -> None:
    """A cancel may stop() a sandbox just before the runner's start(): nothing may be created then."""
    from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError

    box = DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-stop-first"))
    box.stop()
    with pytest.raises(SandboxError, match="stopped before it started"):
        box.start()
    assert containers_with_label("benchctl.run_id", "test-stop-first") == []


def test_stop_while_create_is_in_flight_leaves_no_container(sandbox_image: str, docker_engine) -> None:
    """stop() from another thread lands while the create request is in flight (here: just before it)."""
    from benchctl.sandbox import cleanup
    from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError

    class StopBeforeCreate:
        """The real Docker API, except that create_container first lets the cancel's stop() run."""

        def __init__(self, api: object) -> None:
            self._api = api

        def __getattr__(self, name: str) -> object:
            return getattr(self._api, name)

        def create_container(self, *args: object, **kwargs: object) -> object:
            box.stop()
            return self._api.create_container(*args, **kwargs)

    client = type("Client", (), {"api": StopBeforeCreate(docker_engine.api)})()
    box = DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-stop-midcreate"), client=client)
    with pytest.raises(SandboxError, match="stopped while it was starting"):
        box.start()
    assert containers_with_label("benchctl.run_id", "test-stop-midcreate") == []
    assert box.name not in cleanup.live_containers()


def test_container_removed_during_exec_gives_a_result_or_a_sandbox_error(sandbox_image: str, docker_engine) -> None:
    """Never a raw docker error: callers (harness tools) handle ExecResult and SandboxError only."""
    import time

    from benchctl.sandbox.base import ExecResult
    from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError

    with DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-gone-mid-exec")) as box:
        outcome: list[object] = []

        def run() -> None:
            try:
                outcome.append(box.exec("sleep 30", timeout=60))
            except Exception as e:
                outcome.append(e)

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.5)  # the command is running (removing it at once takes other, luckier paths)
        docker_engine.api.remove_container(box.container_id, force=True)
        worker.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], (ExecResult, SandboxError)), outcome
