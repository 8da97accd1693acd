"""Running an agent CLI inside the sandbox with live output, a deadline and a kill switch.

Shared by the Claude Code and Codex adapters. The Sandbox protocol's `exec` returns only when
the command ends; an agent CLI runs for the whole budget and its JSON event stream must reach
the transcript as it happens, so for a DockerSandbox we drive `docker exec` ourselves through
the same socket reader the sandbox uses (`benchctl.sandbox.docker_exec.FrameReader`) and hand
every stdout line to a callback. Other sandboxes (fakes in tests) fall back to the blocking
`exec`, with lines parsed after the fact.

At the deadline (or when `cancel` is set, or `stop` says so) every process started by the exec
is killed (SIGKILL), found by a marker variable in its environment — the same way DockerSandbox
cleans up, so processes that call setsid are caught too. The deadline may be a function: it
moves while the run's model calls wait for rate limits (benchctl/limits).

Config files the agent must not touch (Codex's CODEX_HOME) go into a DockerSandbox the same
direct way: `put_root_owned`, one put_archive whose tar headers carry root ownership and the
modes.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl.jsonio import write_json_atomic
from benchctl.sandbox.base import Sandbox
from benchctl.transcript import Redactor

MARKER_VAR = "BENCHCTL_AGENT_EXEC"
KILL_GRACE_S = 3.0  # how long to keep reading output after the kill
STDERR_CAP = 2_000_000
# Signal every process whose environment carries the marker ($2), a few rounds so processes
# forked during the sweep are caught too. $1 is the signal.
_SIGNAL_MARKED = (
    "for round in 1 2 3; do found=; for p in /proc/[0-9]*; do "
    'grep -qzx "$2" "$p/environ" 2>/dev/null && { kill -"$1" "${p#/proc/}" 2>/dev/null; found=1; }; '
    'done; [ -z "$found" ] && break; done; true'
)


@dataclass
class CliExit:
    exit_code: int | None  # None when killed
    timed_out: bool  # killed at the deadline
    cancelled: bool  # killed because ctx.cancel was set
    stderr: str
    duration_s: float
    first_output_s: float | None  # seconds from exec to the first stdout line (CLI start-up)
    stopped: bool = False  # killed because `stop` said so (a cost cap: budget_exhausted)


class _LineCapture:
    """Collects Docker's demultiplexed output: stdout split into lines for a callback, stderr kept."""

    def __init__(self, on_line: Callable[[str], None], on_first: Callable[[], None]) -> None:
        self.on_line = on_line
        self.on_first = on_first
        self._buf = bytearray()
        self.stderr = bytearray()
        self.seen_stdout = False
        self.flooding = False  # FrameReader checks this; an agent CLI never floods on purpose

    def add(self, stream: int, chunk: bytes) -> None:
        if stream == 2:
            room = STDERR_CAP - len(self.stderr)
            if room > 0:
                self.stderr += chunk[:room]
            return
        if not self.seen_stdout:
            self.seen_stdout = True
            self.on_first()
        self._buf += chunk
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            line = bytes(self._buf[:nl])
            del self._buf[: nl + 1]
            self._emit(line)

    def flush(self) -> None:
        if self._buf:
            line, self._buf = bytes(self._buf), bytearray()
            self._emit(line)

    def _emit(self, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").strip()
        if text:
            try:
                self.on_line(text)
            except Exception:  # a parser bug must not stop the pump; the raw line is kept on disk
                pass


def run_streaming(
    sandbox: Sandbox,
    argv: list[str],
    *,
    env: dict[str, str],
    workdir: str,
    deadline: float | None | Callable[[], float | None],
    cancel: threading.Event,
    on_line: Callable[[str], None],
    user: str | None = None,
    stop: Callable[[], bool] | None = None,
) -> CliExit:
    """Run `argv` in the sandbox until it exits, `deadline` (unix seconds, or a function giving
    them now) passes, `cancel` is set, or `stop()` is true."""
    deadline_now: Callable[[], float | None] = deadline if callable(deadline) else (lambda: deadline)
    client = getattr(sandbox, "client", None)
    container_id = getattr(sandbox, "container_id", None)
    if client is None or container_id is None:
        return _run_blocking(
            sandbox, argv, env=env, workdir=workdir, deadline=deadline_now(), on_line=on_line, user=user
        )
    from benchctl.sandbox.docker_exec import FrameReader

    marker = uuid.uuid4().hex
    api = client.api
    started_wall, started = time.time(), time.monotonic()
    first: list[float] = []
    capture = _LineCapture(on_line, lambda: first.append(time.monotonic() - started))
    spec_user = getattr(getattr(sandbox, "spec", None), "user", "agent")  # DockerSandbox's SandboxSpec.user
    run_as: str = user or spec_user
    exec_id = api.exec_create(
        container_id,
        argv,
        stdout=True,
        stderr=True,
        stdin=False,
        environment={**env, MARKER_VAR: marker},
        workdir=workdir,
        user=run_as,
    )["Id"]
    reader = FrameReader(api.exec_start(exec_id, socket=True))
    timed_out = cancelled = stopped = False
    try:
        while not reader.eof:
            step = time.monotonic() + 0.25
            deadline_at = deadline_now()
            if deadline_at is not None:
                step = min(step, started + (deadline_at - started_wall))
            reader.pump(capture, step)  # type: ignore[arg-type]
            if reader.eof:
                break
            deadline_at = deadline_now()
            if cancel.is_set():
                cancelled = True
            elif deadline_at is not None and time.time() >= deadline_at:
                timed_out = True
            elif stop is not None and stop():
                stopped = True
            if timed_out or cancelled or stopped:
                # SIGKILL at once, not TERM-then-KILL: a TERM reaches the agent's running tool too,
                # and the CLI would take the tool's death as a result and start its next turn after
                # the budget. Both CLIs append their session logs as they go, so a killed session
                # still resumes for follow-ups (verified).
                _signal(api, container_id, marker, "KILL", run_as)
                reader.pump(capture, time.monotonic() + KILL_GRACE_S)  # type: ignore[arg-type]
                break
    finally:
        reader.close()
        capture.flush()
    exit_code = None
    for _ in range(50):  # the exit code appears a moment after the stream closes
        info = api.exec_inspect(exec_id)
        if not info.get("Running"):
            exit_code = info.get("ExitCode")
            break
        time.sleep(0.02)
    if not (timed_out or cancelled) and cancel.is_set():
        # A cancel stops the sandbox right away, so the stream may end before the loop saw the
        # flag: that is still a cancellation, not a CLI failure.
        cancelled = True
    if timed_out or cancelled or stopped:
        _signal(api, container_id, marker, "KILL", run_as)  # anything that outlived the CLI itself
        exit_code = None
    return CliExit(
        exit_code,
        timed_out,
        cancelled,
        capture.stderr.decode("utf-8", "replace"),
        time.monotonic() - started,
        first[0] if first else None,
        stopped,
    )


def _signal(api: Any, container_id: str, marker: str, sig: str, user: str) -> None:
    try:
        exec_id = api.exec_create(
            container_id, ["sh", "-c", _SIGNAL_MARKED, "signal", sig, f"{MARKER_VAR}={marker}"], user=user
        )["Id"]
        api.exec_start(exec_id)
    except Exception:
        pass  # the container may be gone already; the runner removes it anyway


def put_root_owned(sandbox: Sandbox, directory: str, files: dict[str, bytes]) -> bool:
    """Write `files` into `directory` owned by root, read-only (0444), the directory root-owned,
    sticky and world-writable (1777), in one `put_archive`: the Docker daemon unpacks the tar
    with the owners and modes its headers carry. One API round trip instead of put_file + a
    root exec per file (a fraction of a second under load). False when `sandbox` is not a
    running DockerSandbox or the daemon refused (e.g. the parent directory is missing); the
    caller then falls back to a root exec."""
    client = getattr(sandbox, "client", None)
    container_id = getattr(sandbox, "container_id", None)
    if client is None or container_id is None:
        return False
    parent, name = posixpath.split(directory.rstrip("/"))
    now = int(time.time())

    def entry(path: str, mode: int, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
        info = tarfile.TarInfo(path)
        info.type, info.mode, info.mtime = kind, mode, now
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        tf.addfile(entry(name, 0o1777, tarfile.DIRTYPE))
        for file_name, data in files.items():
            info = entry(f"{name}/{file_name}", 0o444)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    try:
        return bool(client.api.put_archive(container_id, parent or "/", buf.getvalue()))
    except Exception:
        return False


def _run_blocking(
    sandbox: Sandbox,
    argv: list[str],
    *,
    env: dict[str, str],
    workdir: str,
    deadline: float | None,
    on_line: Callable[[str], None],
    user: str | None,
) -> CliExit:
    """For sandboxes without a Docker container: no live stream, same result shape."""
    started = time.monotonic()
    timeout = None if deadline is None else max(0.1, deadline - time.time())
    res = sandbox.exec(argv, timeout=timeout, env=env, workdir=workdir, user=user, output_cap=50_000_000)
    for line in res.stdout.splitlines():
        if line.strip():
            try:
                on_line(line.strip())
            except Exception:
                pass
    return CliExit(res.exit_code, res.timed_out, False, res.stderr, time.monotonic() - started, None)


class PhaseFiles:
    """The CLI's raw stdout, stderr and exit status for one phase, kept in the run dir (redacted)."""

    def __init__(self, run_dir: Path, cli: str, phase: int) -> None:
        self.dir = Path(run_dir) / "harness"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prefix = f"{cli}.{phase}"
        self._redact = Redactor()
        self._stdout = open(self.dir / f"{self.prefix}.stdout.jsonl", "ab", buffering=0)
        self._lock = threading.Lock()

    def stdout_line(self, line: str) -> None:
        with self._lock:
            self._stdout.write(self._redact(line.encode()) + b"\n")

    def finish(self, argv: list[str], result: CliExit, status: str, error: str | None) -> None:
        self._stdout.close()
        (self.dir / f"{self.prefix}.stderr.txt").write_bytes(self._redact(result.stderr.encode()))
        write_json_atomic(
            self.dir / f"{self.prefix}.exit.json",
            {
                "argv": argv,
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "cancelled": result.cancelled,
                "duration_s": round(result.duration_s, 3),
                "first_output_s": None if result.first_output_s is None else round(result.first_output_s, 3),
                "status": status,
                "error": error,
            },
        )


class CallTracker:
    """Watches the gateway's transcript events during one phase (a transcript listener)."""

    GENERATION_APIS = ("anthropic_messages", "openai_responses", "openai_chat", "gemini")

    def __init__(self) -> None:
        self.first_call_t: float | None = None
        self.calls = 0
        self.last_refused = False
        self.refusals = 0
        self.fallbacks = 0
        self.served: dict[str, int] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("source") != "gateway":
            return
        kind = event.get("type")
        if kind == "model_call" and event.get("wire_api") in self.GENERATION_APIS and not event.get("answered_by"):
            self.calls += 1
            if self.first_call_t is None:
                self.first_call_t = float(event.get("t", time.time())) - float(event.get("latency_ms") or 0) / 1000
            self.last_refused = bool(event.get("refusal"))
            served = str(event.get("served_model"))
            self.served[served] = self.served.get(served, 0) + 1
        elif kind == "refusal":
            self.refusals += 1
        elif kind == "fallback":
            self.fallbacks += 1
