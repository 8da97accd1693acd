"""Safe artifact collection: pure checks on hand-made tar streams, then hostile files in a real
sandbox (symlinks out, `..` links, a 2 GB sparse file, a fifo)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from benchctl.sandbox import artifacts
from benchctl.sandbox.base import CollectReport, SandboxSpec


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> list[bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tf.addfile(info, io.BytesIO(data) if info.isreg() else None)
    raw = buf.getvalue()
    return [raw[i : i + 700] for i in range(0, len(raw), 700)]  # odd chunking on purpose


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _host_files(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            assert not p.is_symlink(), f"collection created a symlink: {p}"
        for n in filenames:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = p.read_bytes().decode()
    return out


def test_safe_relpath() -> None:
    assert artifacts.safe_relpath("a/./b//c") == "a/b/c"
    for bad in ("", "/etc/passwd", "../x", "a/../../b", "a/..", "."):
        assert artifacts.safe_relpath(bad) is None, bad


def test_extract_refuses_hostile_members_without_listing(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    chunks = _tar(
        [
            (_info("work", tarfile.DIRTYPE), b""),
            (_info("work/ok.txt"), b"fine"),
            (_info("work/../../escape.txt"), b"evil"),
            (_info("/etc/cron.d/x"), b"evil"),
            (_info("work/ln", tarfile.SYMTYPE, "/etc/passwd"), b""),
            (_info("work/hard", tarfile.LNKTYPE, "work/ok.txt"), b""),
            (_info("work/fifo", tarfile.FIFOTYPE), b""),
            (_info("other/x.txt"), b"not under the requested root"),
        ]
    )
    report = CollectReport()
    ok = artifacts.extract_archive(
        chunks,
        artifacts.SafeWriter(dest),
        report,
        container_root="/work",
        root_is_dir=True,
        expected=None,
        max_bytes=1000,
    )
    assert ok
    assert _host_files(dest) == {"ok.txt": "fine"}
    assert not (tmp_path / "escape.txt").exists()
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert "symlink -> /etc/passwd" in reasons["/work/ln"]
    assert "hard link" in reasons["/work/hard"]
    assert "special file" in reasons["/work/fifo"]
    assert any("escape" in p for p in reasons) and any("cron" in p for p in reasons)
    assert any("other/x.txt" in p for p in reasons)
    assert report.copied == ["/work/ok.txt"]


def test_extract_stops_on_oversize_member_in_stream(tmp_path: Path) -> None:
    chunks = _tar(
        [
            (_info("w", tarfile.DIRTYPE), b""),
            (_info("w/a"), b"x" * 50),
            (_info("w/big"), b"y" * 5000),
            (_info("w/z"), b"z"),
        ]
    )
    report = CollectReport()
    ok = artifacts.extract_archive(
        chunks,
        artifacts.SafeWriter(tmp_path),
        report,
        container_root="/w",
        root_is_dir=True,
        expected=None,
        max_bytes=1000,
    )
    assert ok is False
    assert _host_files(tmp_path) == {"a": "x" * 50}
    assert "over the 1000-byte cap" in report.skipped[0]["reason"]


def test_writer_never_writes_through_existing_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)
    (dest / "f.txt").symlink_to(outside / "f.txt")
    chunks = _tar(
        [
            (_info("w", tarfile.DIRTYPE), b""),
            (_info("w/sub", tarfile.DIRTYPE), b""),
            (_info("w/sub/x"), b"1"),
            (_info("w/f.txt"), b"2"),
        ]
    )
    report = CollectReport()
    artifacts.extract_archive(
        chunks, artifacts.SafeWriter(dest), report, container_root="/w", root_is_dir=True, expected=None, max_bytes=1000
    )
    assert list(outside.iterdir()) == []
    assert {s["path"] for s in report.skipped} >= {"/w/sub", "/w/sub/x", "/w/f.txt"}


def test_plan_reports_each_refusal() -> None:
    entries = [
        artifacts.Entry("d", 0, "/work"),
        artifacts.Entry("f", 10, "/work/a"),
        artifacts.Entry("l", 11, "/work/l", "/etc/passwd"),
        artifacts.Entry("p", 0, "/work/fifo"),
        artifacts.Entry("f", 2 << 30, "/work/big"),
        artifacts.Entry("s", 0, "/work/sock"),
    ]
    report = CollectReport()
    allowed, oversize, refused = artifacts.plan(entries, "/work", True, 1000, report)
    assert set(allowed) == {"a"} and oversize and refused == {"l", "fifo", "big", "sock"}
    assert len(report.skipped) == 4
    report = CollectReport()
    tmp_entries = [artifacts.Entry("d", 0, "/tmp/w"), artifacts.Entry("f", 10, "/tmp/w/a")]
    allowed, oversize, refused = artifacts.plan(tmp_entries, "/tmp/w", True, 1000, report)
    assert set(allowed) == {"w", "w/a"} and not oversize and not refused  # outside /work: by basename


def test_parse_find_listing_handles_odd_names() -> None:
    raw = b"f\x0012\x00/w/tab\there\nnewline\x00\x00l\x000\x00/w/l\x00/etc\x00"
    e = artifacts.parse_find_listing(raw)
    assert e[0] == artifacts.Entry("f", 12, "/w/tab\there\nnewline", "")
    assert e[1].link_target == "/etc"


# --- real sandbox ---------------------------------------------------------------------------

HOSTILE = r"""
set -e
mkdir -p /work/out/sub /work/out/emptydir
echo report > /work/out/report.md
echo nested > /work/out/sub/ok.txt
ln -s /etc/passwd /work/out/passwd_link
ln -s ../../../../../etc /work/out/up_link
ln -s / /work/out/sub/root_link
truncate -s 2G /work/out/big.bin
mkfifo /work/out/pipe
printf 'weird' > "/work/out/name with
newline"
"""


@pytest.mark.docker
def test_hostile_artifacts_stay_inside_and_are_reported(sandbox_image: str, tmp_path: Path) -> None:
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    run_dir = tmp_path / "run"
    dest = run_dir / "artifacts"
    with DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-artifacts")) as box:
        r = box.exec(HOSTILE, timeout=60)
        assert r.exit_code == 0, r
        report = box.collect(["/work/out", "/work/out/passwd_link", "/work/missing"], dest)
        single = box.collect(["/work/out/report.md"], tmp_path / "single")
    assert _host_files(dest) == {
        "out/report.md": "report\n",
        "out/sub/ok.txt": "nested\n",
        "out/name with\nnewline": "weird",
    }  # dest mirrors /work
    assert (dest / "out" / "emptydir").is_dir()
    assert sorted(os.listdir(tmp_path)) == ["run", "single"]  # nothing written next to the run dir
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert reasons["/work/out/passwd_link"].startswith("symlink -> /etc/passwd")
    assert reasons["/work/out/up_link"].startswith("symlink -> ../../../../../etc")
    assert reasons["/work/out/sub/root_link"].startswith("symlink -> /")
    assert "2147483648 bytes" in reasons["/work/out/big.bin"] and "not read" in reasons["/work/out/big.bin"]
    assert "fifo" in reasons["/work/out/pipe"]
    assert report.missing == ["/work/missing"]
    assert sorted(report.copied) == ["/work/out/name with\nnewline", "/work/out/report.md", "/work/out/sub/ok.txt"]
    assert _host_files(tmp_path / "single") == {"out/report.md": "report\n"} and not single.skipped


@pytest.mark.docker
def test_collect_whole_tree_in_one_archive(sandbox_image: str, tmp_path: Path) -> None:
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    with DockerSandbox(SandboxSpec(image=sandbox_image, run_id="test-artifacts-tree")) as box:
        box.exec(
            "mkdir -p /work/a/b && for i in $(seq 1 50); do echo $i > /work/a/b/f$i; done; echo log > /tmp/agent.log",
            timeout=30,
        )
        report = box.collect(["/work", "/tmp/agent.log"], tmp_path / "all")
        sub = box.collect(["/work/a"], tmp_path / "sub")
    assert len(report.copied) == 51 and not report.skipped
    assert (tmp_path / "all" / "a" / "b" / "f50").read_text() == "50\n"
    assert (tmp_path / "all" / "agent.log").read_text() == "log\n"  # outside /work: by basename
    assert (tmp_path / "sub" / "a" / "b" / "f1").read_text() == "1\n" and len(sub.copied) == 50


def test_dest_name_mirrors_work() -> None:
    assert artifacts.dest_name("/work") == ""
    assert artifacts.dest_name("/work/reports/r.md") == "reports/r.md"
    assert artifacts.dest_name("/tmp/x.log") == "x.log"
    assert artifacts.relative_name("/work/p", "/work/p/q/r", True) == "p/q/r"
    assert artifacts.relative_name("/work", "/work/q", True) == "q"
