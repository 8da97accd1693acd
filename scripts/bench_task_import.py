#!/usr/bin/env python3
"""Time `benchctl tasks import` and what imported tasks add to a run, and print a table.

- import: a git repository holding N Harbor tasks (each ~20 small files), imported at a --ref
  (git archive, copy, per-file digests, templates, task.toml), then re-imported (nothing changes);
- pin check: verifying a task's data directory against its pin (what `benchctl run` does once
  before it starts), for a data directory of F files totalling S MB;
- run_task_tests: one call on a small task image (fresh container, tests copied in, test.sh,
  reward read, container removed), median of K calls. Needs Docker and benchctl-sandbox:latest.

    python scripts/bench_task_import.py [--tasks 50] [--files 2000] [--mb 200] [--calls 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _stats import percentile

from benchctl.task_import.pin import content_hash, file_digests, verify
from benchctl.task_import.suite import import_tasks
from benchctl.tasks import load_task


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=b@example.org", "-c", "user.name=b", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def harbor_task(root: Path, i: int, files: int = 16) -> None:
    (root / "environment").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "solution").mkdir()
    (root / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n')
    (root / "instruction.md").write_text(f"Task {i}: write {i} to /app/out.txt\n")
    (root / "environment" / "Dockerfile").write_text("FROM benchctl-sandbox:latest\nUSER root\nWORKDIR /app\n")
    for k in range(files):
        (root / "environment" / f"f{k}.txt").write_text(f"{i} {k}\n" * 200)
    (root / "tests" / "test.sh").write_text(
        f'#!/bin/bash\nmkdir -p /logs/verifier\n[ "$(cat /app/out.txt 2>/dev/null)" = "{i}" ] && r=1 || r=0\n'
        "echo $r > /logs/verifier/reward.txt\n"
    )
    (root / "solution" / "solve.sh").write_text(f"#!/bin/bash\necho {i} > /app/out.txt\n")


def bench_import(tmp: Path, n: int) -> list[tuple[str, str]]:
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for i in range(n):
        harbor_task(repo / "tasks" / f"task-{i:03d}", i)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "suite")
    ref = git(repo, "rev-parse", "HEAD")
    t0 = time.perf_counter()
    res = import_tasks("harbor", str(repo), tmp / "audit", ref=ref)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = import_tasks("harbor", str(repo), tmp / "audit", ref=ref)
    second = time.perf_counter() - t0
    assert {r.status for r in again.results} == {"unchanged"}
    files = sum(len(r.pin.files) for r in res.results)
    return [
        (f"import {n} Harbor tasks at a ref ({files} files)", f"{first:.2f} s ({first / n * 1000:.0f} ms/task)"),
        ("re-import, nothing changed", f"{second:.2f} s"),
    ]


def bench_pin(tmp: Path, files: int, mb: int) -> list[tuple[str, str]]:
    data = tmp / "big"
    per = mb * 1_000_000 // files
    for k in range(files):
        d = data / f"d{k % 50}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{k}.bin").write_bytes(os.urandom(per))
    digests = file_digests(data)
    from benchctl.task_import.pin import Pin

    pin = Pin(format="harbor", source="bench", content_hash=content_hash(digests), files=digests)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        assert verify(pin, data).ok
        times.append(time.perf_counter() - t0)
    return [(f"pin check, {files} files / {mb} MB (median of 3)", f"{sorted(times)[1]:.2f} s")]


def bench_tests_tool(tmp: Path, calls: int) -> list[tuple[str, str]]:
    from benchctl.executors.run_body import docker_sandbox
    from benchctl.task_import.images import probe
    from benchctl.task_import.open_book import TaskTestsTool, load_config
    from benchctl.transcript import TranscriptWriter

    src = tmp / "one"
    harbor_task(src, 7, files=2)
    res = import_tasks("harbor", str(src), tmp / "one-audit", build_images=True)
    task = load_task(res.results[0].task_dir)
    cfg = load_config(task.task_file)
    assert cfg is not None
    tool = TaskTestsTool(
        cfg, task.data_dir, "bench-task-tests", probe(cfg.image).workdir, docker_sandbox, TranscriptWriter(None)
    )
    times = []
    try:
        for k in range(calls):
            t0 = time.perf_counter()
            out = tool.call("run_task_tests", {"run_solution": k % 2 == 0}, timeout=120)
            times.append(time.perf_counter() - t0)
            assert not out.is_error, out.text
    finally:
        from contextlib import closing

        from benchctl.sandbox.docker_client import docker_client

        with closing(docker_client()) as client:
            client.images.remove(cfg.image)
    return [
        (
            f"run_task_tests call (median / p90 of {calls})",
            f"{percentile(times, 50):.2f} s / {percentile(times, 90):.2f} s",
        )
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--no-docker", action="store_true", help="skip the run_task_tests timing")
    a = ap.parse_args()
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-import-") as t:
        tmp = Path(t)
        rows += bench_import(tmp, a.tasks)
        rows += bench_pin(tmp, a.files, a.mb)
        if not a.no_docker:
            rows += bench_tests_tool(tmp, a.calls)
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  time")
    for what, value in rows:
        print(f"{what:<{width}}  {value}")


if __name__ == "__main__":
    main()
