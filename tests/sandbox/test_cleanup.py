"""No container outlives benchctl: SIGINT/SIGTERM in a process holding sandboxes, and stray
removal by label."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest

from tests.rigs.run import containers_with_label

pytestmark = pytest.mark.docker

HOLDER = textwrap.dedent("""
    import sys, time
    from benchctl.sandbox import DockerSandbox, SandboxSpec, install_signal_handlers
    install_signal_handlers()
    boxes = [DockerSandbox(SandboxSpec(image=sys.argv[1], run_id=sys.argv[2])) for _ in range(2)]
    for b in boxes:
        b.start()
    print("READY", flush=True)
    try:
        time.sleep(120)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        sys.exit(130)
""")


def _containers(run_id: str) -> list[Any]:
    return containers_with_label("benchctl.run_id", run_id)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_leaves_no_container_behind(sandbox_image: str, signum: int) -> None:
    run_id = f"test-signal-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, sandbox_image, run_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "READY", proc.stderr.read() if proc.stderr else line
        assert len(_containers(run_id)) == 2
        proc.send_signal(signum)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if signum == signal.SIGINT:
        assert rc == 130  # KeyboardInterrupt still reached the program after cleanup
    else:
        assert rc == -signal.SIGTERM  # died of SIGTERM, as without the handler
    assert _containers(run_id) == []


def test_stray_containers_found_and_removed(sandbox_image: str, docker_engine) -> None:
    import docker

    from benchctl.sandbox import cleanup

    client = docker_engine
    run_id = f"test-stray-{uuid.uuid4().hex[:8]}"
    finished = subprocess.Popen(["true"])
    finished.wait()
    dead_pid = finished.pid  # a pid whose process has exited
    labels_dead = {**cleanup.owner_labels(run_id), cleanup.LABEL_OWNER_PID: str(dead_pid)}
    labels_live = {**cleanup.owner_labels(run_id), cleanup.LABEL_OWNER_PID: str(os.getppid())}
    ids = [
        client.api.create_container(sandbox_image, command=["true"], labels=lab)["Id"]
        for lab in (labels_dead, labels_live)
    ]
    try:
        found = {s.id: s for s in cleanup.find_managed(client, run_id=run_id)}
        assert set(found) == {i[:12] for i in ids}
        assert found[ids[0][:12]].owner_alive is False and found[ids[1][:12]].owner_alive is True
        removed = cleanup.remove_strays(client, run_id=run_id)
        assert [s.id for s in removed] == [ids[0][:12]]
        assert [c.id for c in _containers(run_id)] == [ids[1]]
        removed = cleanup.remove_strays(client, include_live_owners=True, run_id=run_id)
        assert _containers(run_id) == []
    finally:
        for i in ids:
            try:
                client.api.remove_container(i, force=True)
            except docker.errors.NotFound:
                pass


def test_forgotten_sandbox_removed_at_exit(sandbox_image: str) -> None:
    """A program that starts a sandbox and exits without stop() leaves nothing behind."""
    run_id = f"test-atexit-{uuid.uuid4().hex[:8]}"
    code = (
        "import sys; from benchctl.sandbox import DockerSandbox, SandboxSpec; "
        "DockerSandbox(SandboxSpec(image=sys.argv[1], run_id=sys.argv[2])).start(); print('started')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, sandbox_image, run_id], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "started", done.stderr
    assert _containers(run_id) == []


def test_remove_all_live_never_raises_when_the_engine_is_unreachable(tmp_path, monkeypatch) -> None:
    """It runs from signal handlers: an exception there would replace the KeyboardInterrupt."""
    from benchctl.sandbox import cleanup

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    name = f"benchctl-test-unreachable-{uuid.uuid4().hex[:8]}"
    cleanup.register(name)
    try:
        assert cleanup.remove_all_live() == []
        assert name in cleanup.live_containers()  # kept for a later attempt
    finally:
        cleanup.unregister(name)
