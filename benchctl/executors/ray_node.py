"""The node side of the Ray executor: what runs in a Ray worker process on a cluster node.

`RunActor` is one run: the driver creates it with one `benchctl_sandbox` slot, so Ray places it
on a node that has a free one. It unpacks the run's bundle into a scratch directory, puts the
API keys into its own (dedicated) process environment, where the run's gateway reads them,
removes containers a dead earlier attempt of the run left on this node, checks the sandbox
image's digest against the driver's, and executes the same run body as the local executor.
Transcript lines (already redacted) are buffered for the driver, which long-polls them with
`next_lines`; files (artifacts/, harness/) go back as one tar when the run ends.

Node checks (`check_node`) back `benchctl run --ray`'s preflight and `benchctl doctor --ray`.
Nothing here is imported by a driver without Ray, and nothing here imports ray at module level.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

from benchctl import __version__

SLOT = "benchctl_sandbox"  # the custom Ray resource: one per sandbox a node can run at once
NODE_DIR_ENV = "BENCHCTL_NODE_DIR"  # where nodes unpack runs (default: the system temp dir)


class SecretEnv:
    """Environment variables for a run's gateway (API keys, base URLs). Its repr never shows a
    value, so logging the object (or a Ray task's arguments) cannot leak a key."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = dict(values)

    def values(self) -> dict[str, str]:
        return dict(self._values)

    def __repr__(self) -> str:
        return f"SecretEnv({', '.join(sorted(self._values))}; values hidden)"

    __str__ = __repr__


def node_info() -> dict[str, Any]:
    import ray

    return {
        "id": ray.get_runtime_context().get_node_id(),
        "ip": ray.util.get_node_ip_address(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
    }


# ---- node checks -------------------------------------------------------------------------------


def check_node(
    image: str, expected_digest: str | None, harnesses: list[tuple[str, dict[str, Any]]], build_missing: bool = True
) -> dict[str, Any]:
    """Can this node run these runs? Docker, the image (built here if missing) and its digest, the
    agent CLIs the harnesses need, benchctl's version. Returns node info, `digest` and `problems`."""
    out: dict[str, Any] = {
        "node": node_info(),
        "benchctl_version": __version__,
        "digest": None,
        "problems": [],
        "built": False,
    }
    problems: list[str] = out["problems"]
    from benchctl.sandbox.docker_client import BUILD_TIMEOUT, DockerUnavailable, docker_client

    try:
        client = docker_client()
    except DockerUnavailable as e:
        problems.append(str(e))
        return out
    try:
        from benchctl.sandbox import images

        info = images.image_info(client, image)
        if info is None and build_missing:
            log_lines: list[str] = []
            try:
                with closing(docker_client(BUILD_TIMEOUT)) as builder:
                    images.build_image(builder, image, log=log_lines.append)
                out["built"] = True
            except Exception as e:
                problems.append(f"sandbox image {image} missing and could not be built here: {e}")
            info = images.image_info(client, image)
        if info is None:
            if not problems:
                problems.append(
                    f"sandbox image {image} not found; build it on the node with `benchctl images build --if-missing`"
                )
        else:
            out["digest"] = info.id
            if expected_digest and info.id != expected_digest:
                problems.append(image_mismatch(image, info.id, expected_digest))
    finally:
        client.close()
    from benchctl.harness import create_harness

    for name, opts in harnesses:
        try:
            create_harness(name, opts).mounts()  # finds the agent binaries on this node
        except Exception as e:
            problems.append(f"--harness {name}: {e}")
    return out


def image_mismatch(image: str, node_digest: str, expected: str) -> str:
    return (
        f"sandbox image {image} here is {node_digest[:19]}, the driver's is {expected[:19]}: runs here "
        f"would not be reproducible. Fix: put the driver's image on this node (`docker save {image} | "
        f"ssh NODE docker load`), or rebuild it everywhere from one build"
    )


def doctor_node(image: str, expected_digest: str | None) -> list[dict[str, Any]]:
    """`benchctl doctor`'s checks, run on this node (as dicts), plus the image digest comparison."""
    from dataclasses import asdict

    from benchctl.doctor_checks import (
        Check,
        check_binaries,
        check_docker,
        check_image,
        check_plugins,
        check_sandbox_starts,
        check_strays,
    )

    docker_check, client = check_docker()
    image_check = check_image(client, image)
    checks = [docker_check, image_check, check_sandbox_starts(client, image, image_check.status == "ok")]
    if client is not None and image_check.status == "ok" and expected_digest:
        from benchctl.sandbox import images

        info = images.image_info(client, image)
        if info is not None and info.id != expected_digest:
            checks.append(Check("image digest", "fail", image_mismatch(image, info.id, expected_digest), required=True))
        else:
            checks.append(Check("image digest", "ok", "same as the driver's", required=True))
    checks += check_plugins() + check_binaries() + [check_strays(client)]
    if client is not None:
        client.close()
    return [asdict(c) for c in checks]


# ---- one run ------------------------------------------------------------------------------------


def _scratch_dir() -> Path:
    """A fresh directory for one run on this node, named after this process; directories of
    processes that are gone (a run killed with its node's processes) are removed first."""
    base = Path(os.environ.get(NODE_DIR_ENV) or tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    for old in base.glob("benchctl-run-*-*"):
        pid = old.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"benchctl-run-{os.getpid()}-", dir=base))


class RunActor:
    """Runs on this node, one at a time (a Ray actor holding one `benchctl_sandbox` slot). The driver
    keeps one per run thread and reuses it, so a run does not pay for a new process and its imports;
    runs of one sweep share the process's environment (the same keys) and nothing else."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._lines: list[bytes] = []
        self._done = True
        self._cancel = threading.Event()
        self._live: Any = None

    def begin(self) -> dict[str, Any]:
        """Start a new run's stream (the driver waits for this before `run`); says where we are."""
        with self._cond:
            self._lines, self._done, self._cancel = [], False, threading.Event()
        self._live = None
        return node_info()

    def cancel(self) -> None:
        self._cancel.set()
        live = self._live
        if live is not None:
            live.stop_all()

    def next_lines(self, timeout: float, batch_s: float = 0.05) -> tuple[list[bytes], bool]:
        """Transcript lines written since the last call (waits up to `timeout` for one, then
        `batch_s` for more: one round trip per burst, not per event), and whether the run has
        ended (no more lines will come)."""
        with self._cond:
            if not self._lines and not self._done:
                self._cond.wait(timeout)
            if self._lines and not self._done:
                self._cond.wait_for(lambda: self._done, batch_s)
            lines, self._lines = self._lines, []
            return lines, self._done and not self._lines

    def _sink(self, line: bytes) -> None:
        with self._cond:
            self._lines.append(line)
            self._cond.notify_all()

    def run(self, job: Any, bundle: Any, secrets: SecretEnv, expected_digest: str | None) -> dict[str, Any]:
        from benchctl.executors import PreparedData
        from benchctl.executors.bundle import pack_dir, unpack_bundle
        from benchctl.executors.run_body import LiveRuns, run_body
        from benchctl.gateway import scripted
        from benchctl.harness import HarnessResult
        from benchctl.transcript import TranscriptWriter

        os.environ.update(secrets.values())  # before the writer: its redactor reads them
        scratch = _scratch_dir()
        transcript = TranscriptWriter(None, sink=self._sink)
        try:
            task_dir, data_dir = unpack_bundle(bundle, scratch / "in")
            scripted.SHIPPED.update(bundle.scripts)
            task = job.task
            task = dataclasses.replace(
                task, task_dir=task_dir, task_file=task_dir / Path(task.task_file).name, data_dir=data_dir
            )
            node_job = dataclasses.replace(
                job,
                task=task,
                run_dir=scratch / "run",
                data=PreparedData(data_dir, job.data.task_hash, job.data.counts),
            )
            self._live = LiveRuns(self._cancel)
            refusal = self._prepare_docker(job.spec.run_id, task.image, expected_digest)
            if refusal:
                transcript.emit("error", "runner", message=refusal)
                result, meta, lost = HarnessResult("error", error=refusal), node_job.meta, True
            else:
                outcome = run_body(node_job, node_job.run_dir, transcript, self._live)
                result, meta, lost = outcome.result, outcome.meta, False
            files = pack_dir(node_job.run_dir) if node_job.run_dir.is_dir() else b""
            return {"result": result, "meta": meta, "files": files, "refused": lost}
        finally:
            transcript.close()
            shutil.rmtree(scratch, ignore_errors=True)
            with self._cond:
                self._done = True
                self._cond.notify_all()

    @staticmethod
    def _prepare_docker(run_id: str, image: str, expected_digest: str | None) -> str | None:
        """Remove containers and gateway dirs of this run left by a dead earlier attempt here; refuse
        a wrong image."""
        from benchctl.sandbox import gateway_dir, images
        from benchctl.sandbox.cleanup import remove_strays
        from benchctl.sandbox.docker_client import docker_client

        with closing(docker_client()) as client:
            remove_strays(client, run_id=run_id)
            gateway_dir.remove_stale(run_id=run_id)
            info = images.image_info(client, image)
            if info is None:
                return (
                    f"node {socket.gethostname()}: sandbox image {image} not found; "
                    f"run `benchctl images build --if-missing` there"
                )
            if expected_digest and info.id != expected_digest:
                return f"node {socket.gethostname()} refused: {image_mismatch(image, info.id, expected_digest)}"
            return None
