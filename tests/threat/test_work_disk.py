"""Threat model: an agent cannot fill the host's disk. /work and every other directory it can write
are size-capped tmpfs (`[limits] work`, counted against the memory limit): writing past the cap
is a plain ENOSPC in the tool result, the run goes on, and the artifacts are still collected."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchctl.sandbox.base import WRITABLE_DIRS, Limits, SandboxSpec
from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError
from benchctl.sandbox.limits import LimitError, check_limits, parse_limits, work_bytes
from tests.rigs.run import bash, make_scripted_task, only_run, run_inprocess, tool

FILL = "dd if=/dev/zero of={path} bs=1M count=200 2>&1 | grep -v records; df -k {dir} | tail -1"


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_writing_past_work_is_enospc_and_the_run_goes_on(tmp_path: Path) -> None:
    turns = [
        bash(FILL.format(path="/work/fill", dir="/work")),  # 200 MB into a 48 MB /work
        bash(FILL.format(path="/tmp/fill", dir="/tmp") + "; " + FILL.format(path="$HOME/fill", dir="$HOME")),
        bash("rm /work/fill && echo freed; printf '# Report\\nstill here\\n' > /work/report.md && cat /work/report.md"),
        tool("submit"),
    ]
    task, model = make_scripted_task(
        tmp_path, turns, '[early_exit]\nenabled = false\n[limits]\nmemory = "256m"\nwork = "48m"\n', name="fill"
    )
    assert run_inprocess(task, model, tmp_path / "out") == 0
    meta, events, run = only_run(tmp_path / "out")
    assert meta["status"] == "completed", meta.get("error")
    results = [e["output"] for e in events if e["type"] == "tool_result"]
    for out in results[:2]:  # a clear ENOSPC, for /work, /tmp and the home
        assert out.count("No space left on device") == (1 if out is results[0] else 2), out
        assert " 100% " in out or "100%" in out  # df: the tmpfs is full, at its cap
    assert "49152" in results[0]  # df -k: 48 MB, the configured size
    assert "freed" in results[2] and "still here" in results[2]
    assert (run / "artifacts" / "report.md").read_text() == "# Report\nstill here\n"


@pytest.mark.docker
def test_every_directory_the_agent_can_write_is_a_capped_tmpfs(sandbox_image: str, tmp_path: Path) -> None:
    with DockerSandbox(
        SandboxSpec(image=sandbox_image, run_id="threat-disk", limits=Limits(memory="256m", work="32m"))
    ) as sb:
        # Every directory the agent's user can write (outside /proc, /sys, /dev), with its filesystem type:
        # none is the container's own layer, which would land on the host's Docker disk.
        found = sb.exec(
            "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -writable -type d "
            "-exec stat -f -c '%T %n' {} + 2>/dev/null; true",
            timeout=60,
        ).stdout.splitlines()
        assert {line.split()[1] for line in found} >= {d.path for d in WRITABLE_DIRS if d.uid == 1000 or d.mode & 0o002}
        assert all(line.split()[0] == "tmpfs" for line in found), found
        mounts = sb.exec("cat /proc/mounts", timeout=30).stdout.splitlines()
        tmpfs = {line.split()[1]: line for line in mounts if line.split()[2] == "tmpfs"}
        for d in WRITABLE_DIRS:
            assert d.path in tmpfs and "size=32768k" in tmpfs[d.path], (d.path, tmpfs.get(d.path))
        assert sb.exec("stat -c '%u %a' /work /home/agent /tmp", timeout=30).stdout.split() == [
            "1000",
            "755",
            "1000",
            "755",
            "0",
            "1777",
        ]
        # Files go in and out of the tmpfs as they did from the container's layer.
        sb.put_file("/work/sub/a.txt", b"hello")
        assert sb.get_file("/work/sub/a.txt") == b"hello"
        report = sb.collect(["/work"], tmp_path / "artifacts")
        assert (
            report.copied == ["/work/sub/a.txt"] and (tmp_path / "artifacts" / "sub" / "a.txt").read_bytes() == b"hello"
        )


def test_work_limit_is_checked_like_the_others() -> None:
    assert work_bytes(None, "2g") == 1 << 30 and work_bytes(None, "512m") == 256 << 20  # default: half, at most 1g
    assert parse_limits({"work": "100m", "memory": "1g"}).work == "100m"
    for table, fix in (
        ({"work": 5}, 'work = "1g"'),
        ({"work": "5"}, "unit"),
        ({"work": "1m"}, "16m"),
        ({"work": "3g", "memory": "2g"}, "raise memory"),
    ):
        with pytest.raises(LimitError, match="limits.work") as err:
            parse_limits(table)
        assert fix in str(err.value)
    with pytest.raises(SandboxError, match="limits.work"):
        DockerSandbox(SandboxSpec(image="x", run_id="r", limits=Limits(work="9t")))._validate()
    check_limits(Limits(memory="64m"))  # the smallest memory still gets a /work (32m)
