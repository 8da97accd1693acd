"""What the CLI harnesses set up in a real sandbox before the CLI starts, done the fast way
(scripts/bench_cli_overhead.py measures it): CODEX_HOME's files in one put_archive
(`Sandbox.put_files`), still root-owned and read-only; the forwarder wrapper starting the CLI
once the port listens, without polling. Real Docker, no CLI binary needed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchctl.harness import HarnessContext
from benchctl.jsonio import read_jsonl
from benchctl.policies import Budget, RunPolicies
from benchctl.sandbox.base import SandboxSpec
from benchctl.sandbox.docker_sandbox import DockerSandbox
from benchctl.transcript import TranscriptWriter
from harnesses.cli_harness import install_protected
from harnesses.forwarder import behind_forwarder, forwarder_mount

pytestmark = pytest.mark.docker

FILES = {"config.toml": b'model = "m"\n', "hooks.json": b"{}"}
# As the agent: create a file of its own, then try to write, remove and rename each of ours.
TAMPER = (
    "d=$1; touch $d/mine && echo CREATED; for f in config.toml hooks.json; do "
    "(echo x > $d/$f) 2>/dev/null && echo TAMPERED; rm -f $d/$f 2>/dev/null && echo TAMPERED; "
    "mv $d/$f $d/$f.x 2>/dev/null && echo TAMPERED; done; stat -c '%U %a %n' $d $d/*"
)


@pytest.fixture
def sandbox(sandbox_image: str) -> Iterator[DockerSandbox]:
    # The forwarder mount also creates /opt/benchctl, as every CLI harness's mounts do.
    sb = DockerSandbox(SandboxSpec(image=sandbox_image, run_id="cli-setup", extra_mounts=[forwarder_mount()]))
    sb.start()
    try:
        yield sb
    finally:
        sb.stop()


def test_protected_files_arrive_root_owned_in_one_archive(sandbox: DockerSandbox, tmp_path: Path) -> None:
    ctx = HarnessContext(
        run_id="r",
        model="scripted/x",
        instructions="",
        sandbox=sandbox,
        gateway=None,
        transcript=TranscriptWriter(tmp_path / "transcript.jsonl"),
        budget=Budget(time.time(), 60),
        policies=RunPolicies(),
        run_dir=tmp_path,
    )
    install_protected(ctx, "/opt/benchctl/codex-home", FILES)
    assert sandbox.exec(["cat", "/opt/benchctl/codex-home/config.toml"]).stdout == FILES["config.toml"].decode()
    out = sandbox.exec(["sh", "-c", TAMPER, "tamper", "/opt/benchctl/codex-home"]).stdout.splitlines()
    assert out == [
        "CREATED",
        "root 1777 /opt/benchctl/codex-home",
        "root 444 /opt/benchctl/codex-home/config.toml",
        "root 444 /opt/benchctl/codex-home/hooks.json",
        "agent 644 /opt/benchctl/codex-home/mine",
    ]

    # Where the archive cannot go at first (no parent directory), the parent is made as root: same result.
    install_protected(ctx, "/opt/new/codex-home", FILES)
    out = sandbox.exec(["sh", "-c", TAMPER, "tamper", "/opt/new/codex-home"]).stdout.splitlines()
    assert out[0] == "CREATED" and "TAMPERED" not in out
    assert out[1:4] == [
        "root 1777 /opt/new/codex-home",
        "root 444 /opt/new/codex-home/config.toml",
        "root 444 /opt/new/codex-home/hooks.json",
    ]
    assert sandbox.exec(["stat", "-c", "%U", "/opt/new"]).stdout == "root\n"
    assert not [e for e in read_jsonl(tmp_path / "transcript.jsonl") if e.get("kind") == "unprotected_config"]


# The "CLI": connects to the forwarder's port at once, with no retry, then exits with code 7.
CLI = [
    "python3",
    "-c",
    "import socket; socket.create_connection(('127.0.0.1', 18666), timeout=5); print('CONNECTED'); raise SystemExit(7)",
]


def test_forwarder_wrapper_starts_the_cli_once_the_port_listens(sandbox: DockerSandbox) -> None:
    for _ in range(3):  # each time a fresh forwarder; the port is free again after each run
        res = sandbox.exec(behind_forwarder(CLI, 18666, "/gateway/gateway.sock", "t.log"), timeout=60)
        assert (res.exit_code, res.stdout, res.stderr) == (7, "CONNECTED\n", "")
    assert "forwarding 127.0.0.1:18666 -> /gateway/gateway.sock" in sandbox.get_file("/tmp/benchctl-t.log").decode()
    assert "forwarder.py" not in sandbox.exec(["ps", "-eo", "args"]).stdout  # stopped with the CLI

    # A forwarder that cannot start (here: no such script) neither hangs the wrapper nor hides the CLI's result.
    argv = behind_forwarder(["sh", "-c", "exit 3"], 18666, "/gateway/gateway.sock", "t.log")
    argv[2] = argv[2].replace("/opt/benchctl/gateway/forwarder.py", "/nonexistent.py")
    started = time.monotonic()
    res = sandbox.exec(argv, timeout=60)
    assert res.exit_code == 3 and time.monotonic() - started < 9  # not the wrapper's 10 s wait
    assert "/nonexistent.py" in sandbox.get_file("/tmp/benchctl-t.log").decode()  # python's error, logged
