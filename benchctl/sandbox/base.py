"""The Sandbox seam: where an agent's tools run.

One small protocol; the real implementation is `DockerSandbox` (docker SDK, network-less
containers). Harnesses and the runner only ever talk to this protocol. Tests run the real
DockerSandbox over `benchctl.testing.fake_docker.FakeDocker` when they need no engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

# Label put on every container benchctl starts, so strays can be found and removed.
LABEL_KEY = "benchctl.run_id"
LABEL_MANAGED = "benchctl.managed"

# Where things live inside the sandbox. Fixed paths keep prompts and hooks simple.
DATA_DIR = "/data"  # task data, mounted read-only
WORK_DIR = "/work"  # writable; the agent writes its report here
GATEWAY_DIR = "/gateway"  # host directory holding the model gateway's unix socket
TOOLS_DIR = "/opt/benchctl"  # read-only mounts of agent binaries and helper scripts
STATE_DIR = "/opt/benchctl/state"  # state an agent CLI keeps outside its home (e.g. CODEX_HOME)


@dataclass(frozen=True)
class WritableDir:
    """A directory the sandbox can write, held on its own tmpfs of `Limits.work` bytes (counted
    against the memory limit), so that nothing an agent writes reaches the host's Docker disk."""

    path: str
    mode: int
    uid: int = 0


# Every directory the agent's user can write in benchctl's sandbox image (`find / -xdev -writable`
# as uid 1000), plus STATE_DIR. The image's copies of them are empty; the tmpfs hides them.
WRITABLE_DIRS = (
    WritableDir(WORK_DIR, 0o755, 1000),
    WritableDir("/tmp", 0o1777),
    WritableDir("/var/tmp", 0o1777),
    WritableDir("/home/agent", 0o755, 1000),
    WritableDir("/run/lock", 0o1777),
    WritableDir(STATE_DIR, 0o755),
)


@dataclass
class Limits:
    """Resource limits. Defaults suit one agent investigating logs on a small machine."""

    cpus: float = 1.0
    memory: str = "2g"
    pids: int = 256
    work: str | None = None  # size of /work (and of each other writable directory), in RAM;
    # None: half the memory, at most 1g (see limits.work_bytes)


@dataclass
class Mount:
    host_path: Path
    container_path: str
    read_only: bool = True


@dataclass
class SandboxSpec:
    image: str
    run_id: str
    data_dir: Path | None = None
    gateway_dir: Path | None = None
    extra_mounts: list[Mount] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    user: str = "agent"
    # PID 1: "tini" from the image (the sandbox image has it), or "docker" = the engine's own init,
    # for images without tini (an imported task's image, see benchctl/task_import/open_book.py)
    init: str = "tini"
    # Directories on size-capped tmpfs (limits.work each). () keeps the image's own filesystem as
    # it is, for images that are not benchctl's (an imported task's, whose files may live there).
    writable_dirs: tuple[WritableDir, ...] = WRITABLE_DIRS


@dataclass
class ExecResult:
    exit_code: int | None  # None when killed by timeout
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False  # output exceeded the cap and was cut
    duration_s: float = 0.0


@dataclass
class StreamResult:
    """How a streamed command ended (`Sandbox.exec_stream`); its stdout went to the callback."""

    exit_code: int | None  # None when killed (deadline, cancel, stop)
    timed_out: bool  # killed at the deadline
    cancelled: bool  # killed because `cancel` was set (or the sandbox went away after it was)
    stderr: str  # the first STDERR_CAP bytes
    duration_s: float
    first_output_s: float | None  # seconds from the exec to its first stdout bytes
    stopped: bool = False  # killed because `stop()` said so


# Deadline of a streamed command: unix seconds, None for none, or a function asked again every poll
# (the run's deadline moves while rate limits hold its model calls back).
Deadline = float | None | Callable[[], float | None]


class SandboxError(RuntimeError):
    """A sandbox could not be created or used; the message says what to do."""


@dataclass
class CollectReport:
    """What artifact collection did, including everything it refused to copy and why."""

    copied: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"path": ..., "reason": ...}
    missing: list[str] = field(default_factory=list)


@runtime_checkable
class Sandbox(Protocol):
    """Every command and file operation may raise SandboxError (the sandbox is gone or refused it);
    env values holding a host secret are refused on every exec path."""

    run_id: str
    image_digest: str | None

    @property
    def user(self) -> str:
        """The user commands run as unless they say otherwise."""
        ...

    def start(self) -> None: ...

    def exec(
        self,
        cmd: list[str] | str,
        *,
        timeout: float | None = None,
        output_cap: int = 1_000_000,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
    ) -> ExecResult: ...

    def exec_stream(
        self,
        argv: list[str],
        on_line: Callable[[str], None],
        *,
        deadline: Deadline,
        cancel: threading.Event | None = None,
        stop: Callable[[], bool] | None = None,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
    ) -> StreamResult:
        """Run `argv` until it exits, `deadline` passes, `cancel` is set or `stop()` is true; then
        every process it started is killed. Each stdout line (stripped; blank lines skipped) goes to
        `on_line` as it arrives; an exception from `on_line` is ignored, so that a bad line never
        stops the reading. No cap on stdout: the caller keeps or drops the lines."""
        ...

    def put_file(self, container_path: str, data: bytes, mode: int = 0o644) -> None: ...

    def put_files(
        self,
        directory: str,
        files: Mapping[str, bytes],
        *,
        mode: int = 0o644,
        dir_mode: int | None = None,
        as_root: bool = False,
    ) -> None:
        """Write `files` (names relative to `directory`) in one step, each with `mode`, owned by
        root when `as_root`, else by the sandbox's user; `dir_mode` also makes `directory` itself
        with that mode and owner. Missing parent directories are made."""
        ...

    def get_file(self, container_path: str, max_bytes: int = 50_000_000) -> bytes: ...

    def collect(self, container_paths: list[str], dest_dir: Path, max_bytes: int = 50_000_000) -> CollectReport: ...

    def stop(self) -> None: ...
