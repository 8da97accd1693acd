"""DockerSandbox's one exec path (blocking `exec`, streaming `exec_stream`, `put_files`) driven
through a fake Docker Engine API (benchctl.testing.fake_docker): the sandbox code is the real
one, only the engine and the processes are in memory, so deadlines, cancels, floods and
processes that escape a kill can be staged exactly. tests/sandbox/test_docker.py runs the same
code against a real engine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from benchctl.sandbox.base import SandboxError, SandboxSpec
from benchctl.sandbox.docker_exec import EXEC_MARKER, STDERR_CAP
from benchctl.sandbox.docker_sandbox import KILL_GRACE_S, STREAM_KILL_GRACE_S, DockerSandbox
from benchctl.testing.fake_docker import FakeDocker, Process

Program = Callable[[Process], int | None]
SECRET = "sk-ant-host-secret-0123456789"


@pytest.fixture
def make() -> Iterator[Callable[[Program], tuple[DockerSandbox, FakeDocker]]]:
    made: list[DockerSandbox] = []

    def sandbox(program: Program) -> tuple[DockerSandbox, FakeDocker]:
        docker = FakeDocker(program)
        box = DockerSandbox(SandboxSpec(image="fake", run_id="fake-exec"), client=docker)
        box.start()
        made.append(box)
        return box, docker

    yield sandbox
    for box in made:
        box.stop()


def marker_of(docker: FakeDocker, argv0: str) -> str:
    """The marker (NAME=VALUE) DockerSandbox gave the exec that ran `argv0`."""
    (ex,) = [e for e in docker.execs if argv0 in e.argv]
    return f"{EXEC_MARKER}={ex.env[EXEC_MARKER]}"


def test_exit_codes_and_streams_on_both_paths(make) -> None:
    def program(proc: Process) -> int:
        proc.out("out\n")
        proc.err("err\n")
        return 3

    box, _ = make(program)
    res = box.exec(["cmd"], timeout=30)
    assert (res.exit_code, res.stdout, res.stderr, res.timed_out, res.truncated) == (3, "out\n", "err\n", False, False)
    lines: list[str] = []
    streamed = box.exec_stream(["cmd"], lines.append, deadline=time.time() + 30)
    assert (streamed.exit_code, lines, streamed.stderr) == (3, ["out"], "err\n")
    assert not (streamed.timed_out or streamed.cancelled or streamed.stopped)
    assert streamed.first_output_s is not None and 0 <= streamed.first_output_s <= streamed.duration_s


def test_lines_cut_anywhere_reach_on_line_whole(make) -> None:
    def program(proc: Process) -> None:
        for piece in ['{"a":', ' 1}\n\n  {"b": 2}\r\n{"c"']:
            proc.out(piece)
            proc.sleep(0.02)
        word = ': "é 3"}'.encode()
        proc.out(word[:4])  # cut inside the two bytes of "é"
        proc.out(word[4:])  # the last line has no newline

    box, _ = make(program)
    lines: list[str] = []
    res = box.exec_stream(["cmd"], lines.append, deadline=None)
    assert res.exit_code == 0
    assert lines == ['{"a": 1}', '{"b": 2}', '{"c": "é 3"}']


def test_a_failing_line_handler_does_not_stop_the_reading(make) -> None:
    box, _ = make(lambda proc: proc.out("bad\ngood\n"))
    seen: list[str] = []

    def on_line(line: str) -> None:
        seen.append(line)
        if line == "bad":
            raise ValueError("a parser bug")

    assert box.exec_stream(["cmd"], on_line, deadline=None).exit_code == 0
    assert seen == ["bad", "good"]


def test_the_deadline_kills_every_process_of_the_exec(make) -> None:
    def program(proc: Process) -> None:
        proc.out("started\n")
        proc.hang()

    box, docker = make(program)
    lines: list[str] = []
    started = time.monotonic()
    res = box.exec_stream(["agent"], lines.append, deadline=time.time() + 0.3)
    took = time.monotonic() - started
    assert res.timed_out and res.exit_code is None and not (res.cancelled or res.stopped)
    assert lines == ["started"] and 0.3 <= took < 0.3 + STREAM_KILL_GRACE_S
    assert marker_of(docker, "agent") in docker.kills  # killed by marker, then swept once more
    assert docker.containers[box.container_id or ""].processes == []


def test_a_moving_deadline_is_read_again(make) -> None:
    box, _ = make(lambda proc: proc.sleep(0.8))
    deadline = [time.time() + 0.3]
    threading.Timer(0.1, lambda: deadline.__setitem__(0, deadline[0] + 5)).start()  # rate limits held calls back
    res = box.exec_stream(["cmd"], print, deadline=lambda: deadline[0])
    assert res.exit_code == 0 and not res.timed_out


def test_cancel_kills_and_says_cancelled(make) -> None:
    box, docker = make(lambda proc: proc.hang())
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    res = box.exec_stream(["agent"], print, deadline=time.time() + 60, cancel=cancel)
    assert res.cancelled and res.exit_code is None and not res.timed_out
    assert marker_of(docker, "agent") in docker.kills


def test_a_command_ending_by_itself_after_a_cancel_is_cancelled(make) -> None:
    """On Ctrl-C the runner sets cancel and removes the sandbox, so the output may end before the
    loop looks at the flag: still a cancellation, not the command failing."""
    box, _ = make(lambda proc: 3)
    cancel = threading.Event()
    cancel.set()
    res = box.exec_stream(["cmd"], print, deadline=None, cancel=cancel)
    assert res.cancelled and res.exit_code is None


def test_the_sandbox_removed_under_a_cancelled_command_is_a_cancellation(make) -> None:
    box, docker = make(lambda proc: proc.hang())
    cancel = threading.Event()

    def ctrl_c() -> None:
        cancel.set()
        docker.remove_container(box.container_id or "", force=True)

    threading.Timer(0.2, ctrl_c).start()
    assert box.exec_stream(["cmd"], print, deadline=None, cancel=cancel).cancelled
    # Without a cancel, a sandbox that went away is an error.
    box2, docker2 = make(lambda proc: proc.hang())
    threading.Timer(0.2, lambda: docker2.remove_container(box2.container_id or "", force=True)).start()
    with pytest.raises(SandboxError, match="went away"):
        box2.exec_stream(["cmd"], print, deadline=None)


def test_stop_kills_and_says_stopped(make) -> None:
    box, docker = make(lambda proc: proc.hang())
    asked: list[float] = []

    def stop() -> bool:  # a cost cap: true once no model call is in flight
        asked.append(time.monotonic())
        return len(asked) >= 2

    res = box.exec_stream(["agent"], print, deadline=time.time() + 60, stop=stop)
    assert res.stopped and res.exit_code is None and not (res.timed_out or res.cancelled)
    assert marker_of(docker, "agent") in docker.kills


def test_a_process_that_escapes_timeout_is_killed_by_the_host(make) -> None:
    def program(proc: Process) -> None:
        proc.setsid()  # out of `timeout`'s process group: only the kill by marker reaches it
        proc.out("still here\n")
        proc.hang()

    box, docker = make(program)
    started = time.monotonic()
    res = box.exec(["daemon"], timeout=0.3)
    assert res.timed_out and res.exit_code is None and res.stdout == "still here\n"
    assert 0.3 + KILL_GRACE_S <= time.monotonic() - started < 0.3 + KILL_GRACE_S + 4
    assert marker_of(docker, "daemon") in docker.kills


@pytest.mark.parametrize("streamed", [False, True])
def test_a_process_that_escapes_every_kill_does_not_hold_the_caller(make, streamed: bool) -> None:
    """It left `timeout`'s group and dropped the marker (`setsid env -i ...`) but keeps the output
    open: the caller still gets its result after the grace, and the process dies with the sandbox."""

    def program(proc: Process) -> None:
        proc.setsid()
        proc.clear_env()
        proc.hang()

    box, docker = make(program)
    started = time.monotonic()
    if streamed:
        res = box.exec_stream(["escapee"], print, deadline=time.time() + 0.3)
        limit = 0.3 + STREAM_KILL_GRACE_S
    else:
        res = box.exec(["escapee"], timeout=0.3)
        limit = 0.3 + KILL_GRACE_S
    assert res.timed_out and res.exit_code is None
    assert limit <= time.monotonic() - started < limit + 4
    assert len(docker.containers[box.container_id or ""].processes) == 1  # it is still running
    box.stop()
    assert docker.containers == {}


def test_a_blocking_flood_is_cut_and_killed(make) -> None:
    def program(proc: Process) -> None:
        while True:
            proc.out(b"y\n" * 32768)

    box, docker = make(program)
    res = box.exec(["yes"], timeout=120, output_cap=1000)
    assert res.truncated and res.exit_code is None and not res.timed_out
    assert res.stdout == "y\n" * 500 and "output went far past the 1000-byte cap" in res.stderr
    assert marker_of(docker, "yes") in docker.kills
    assert docker.containers[box.container_id or ""].processes == []


def test_a_streamed_flood_reaches_on_line_whole_and_stderr_is_capped(make) -> None:
    n = 200_000

    def program(proc: Process) -> None:
        for i in range(0, n, 1000):
            proc.out("".join(f"line {j}\n" for j in range(i, i + 1000)))
            proc.err(b"e" * 30_000)

    box, _ = make(program)
    lines: list[str] = []
    res = box.exec_stream(["chatty"], lines.append, deadline=time.time() + 120)
    assert res.exit_code == 0 and len(lines) == n and lines[0] == "line 0" and lines[-1] == f"line {n - 1}"
    assert res.stderr == "e" * STDERR_CAP


def test_host_secrets_in_env_are_refused_on_every_exec_path(make, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    box, docker = make(lambda proc: 0)
    env = {"AUTH_HEADER": f"Bearer {SECRET}"}
    with pytest.raises(SandboxError, match="AUTH_HEADER"):
        box.exec(["cmd"], env=env)
    with pytest.raises(SandboxError, match="AUTH_HEADER"):
        box.exec_stream(["cmd"], print, deadline=None, env=env)
    assert docker.execs == []  # refused before Docker was asked
    # The dummy sandbox token under a provider key's name is not a host secret.
    assert (
        box.exec_stream(["cmd"], print, deadline=None, env={"ANTHROPIC_API_KEY": "benchctl-sandbox-token"}).exit_code
        == 0
    )


def test_an_oom_kill_is_reported(make) -> None:
    def program(proc: Process) -> int:
        proc.container.oom_kills += 1  # what the kernel does to the cgroup's counter
        return 137

    box, _ = make(program)
    res = box.exec(["hog"], timeout=30)
    assert res.exit_code == 137 and "out-of-memory killer" in res.stderr and not res.timed_out


def test_put_files_root_owned_in_one_archive_making_missing_parents(make) -> None:
    box, docker = make(lambda proc: 0)
    files = {"config.toml": b"x = 1\n", "hooks.json": b"{}"}
    box.put_files("/opt/new/deep/home", files, mode=0o444, dir_mode=0o1777, as_root=True)
    fs = docker.containers[box.container_id or ""].files
    assert (fs["/opt/new/deep"].uid, fs["/opt/new/deep/home"].mode, fs["/opt/new/deep/home"].uid) == (0, 0o1777, 0)
    assert {n: (fs[f"/opt/new/deep/home/{n}"].data, fs[f"/opt/new/deep/home/{n}"].mode) for n in files} == {
        n: (data, 0o444) for n, data in files.items()
    }
    [mkdir] = [e for e in docker.execs if "mkdir" in e.argv]
    assert mkdir.user == "root" and mkdir.argv[-3:] == ["mkdir", "-p", "/opt/new/deep"]
    # A plain put_file: the sandbox user's, its directories made as that user.
    box.put_file("/work/a/b.md", b"report", mode=0o600)
    assert (fs["/work/a"].uid, fs["/work/a/b.md"].uid, fs["/work/a/b.md"].mode) == (1000, 1000, 0o600)
    assert box.get_file("/work/a/b.md") == b"report"
