"""FakeDocker: the part of the Docker Engine API that DockerSandbox uses, in memory, so that the
real DockerSandbox runs without an engine: its one exec path (Docker's stream frames over a real
socket, select() against deadlines, the exit-code poll, kill by marker), its archives and its
lifecycle. Nothing of the sandbox is reimplemented here; only the engine and the container are.

    def program(proc: Process) -> int:      # what every command in the container does
        proc.out(b'{"type": "result"}\\n')
        return 0

    docker = FakeDocker(program)
    with DockerSandbox(SandboxSpec(image="any", run_id="r"), client=docker) as sandbox:
        sandbox.exec_stream(["claude", "-p", "hi"], print, deadline=None)

Each exec runs `program(proc)` in a thread of its own: it writes with `proc.out` / `proc.err`,
waits with `proc.sleep` and returns its exit code (None: 0). A killed process ends at its next
out, err or sleep with exit code 137. The fake does by itself what DockerSandbox asks of a
container for its own sake: `timeout -s KILL T CMD` (kills CMD after T seconds unless it called `proc.setsid()`),
the kill-by-marker sweep (kills every process whose environment holds the marker; one that
called `proc.clear_env()` escapes it, as `env -i` would), the OOM count, and `mkdir -p`.
`execs` (every exec as DockerSandbox asked for it), `programs` (the commands that reached
`program`, after `timeout`), `kills` and `put_archives` record what happened, for tests to check.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import posixpath
import socket
import struct
import tarfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchctl.sandbox.docker_exec import KILL_BY_MARKER, OOM_COUNT

EXIT_LAG_S = 0.03  # the engine reports an exec's exit code a moment after its output ends
BASE_DIRS = ("/", "/tmp", "/work", "/home", "/home/agent", "/opt", "/etc")


class Killed(BaseException):
    """Raised inside a program when its process has been killed (not an Exception: a program's
    own `except Exception` must not swallow its death)."""


@dataclass
class Entry:
    """A file or directory in a fake container: its bytes (None for a directory), mode, owner."""

    data: bytes | None
    mode: int
    uid: int


@dataclass
class FakeContainer:
    id: str
    name: str
    env: dict[str, str]
    files: dict[str, Entry] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    oom_kills: int = 0
    removed: bool = False


class Process:
    """One command in the fake container, as its program sees it."""

    def __init__(self, container: FakeContainer, argv: list[str], env: dict[str, str], user: str, workdir: str) -> None:
        self.container, self.argv, self.env, self.user, self.workdir = container, argv, env, user, workdir
        self.killed = threading.Event()
        self.own_session = False  # setsid(): out of `timeout`'s reach
        self._sock: socket.socket | None = None

    def out(self, data: bytes | str) -> None:
        self._write(1, data.encode() if isinstance(data, str) else data)

    def err(self, data: bytes | str) -> None:
        self._write(2, data.encode() if isinstance(data, str) else data)

    def sleep(self, seconds: float) -> None:
        if self.killed.wait(seconds):
            raise Killed

    def hang(self) -> None:
        """Wait until killed."""
        self.killed.wait()
        raise Killed

    def setsid(self) -> None:
        self.own_session = True

    def clear_env(self) -> None:
        self.env = {}

    def kill(self) -> None:
        self.killed.set()

    def _write(self, stream: int, data: bytes) -> None:
        if self.killed.is_set():
            raise Killed
        if self._sock is None or not data:
            return
        frame = memoryview(struct.pack(">BxxxL", stream, len(data)) + data)
        while frame:  # blocks while the reader does not read, as a pipe does; a kill still ends it
            try:
                frame = frame[self._sock.send(frame) :]
            except TimeoutError:
                if self.killed.is_set():
                    raise Killed from None
            except OSError:  # the reader closed its end: the output goes nowhere
                self._sock = None
                return


@dataclass
class Exec:
    id: str
    container: FakeContainer
    argv: list[str]
    env: dict[str, str]
    user: str
    workdir: str
    running: bool = False
    exit_code: int | None = None


class FakeDocker:
    """Stands in for `docker.DockerClient` (and is its own `.api`). `program` runs every command
    the fake does not do by itself; without one, such commands are "not found" (exit 127)."""

    def __init__(self, program: Callable[[Process], int | None] | None = None) -> None:
        self.program = program
        self.containers: dict[str, FakeContainer] = {}
        self.execs: list[Exec] = []  # every exec asked for, in order, with the env it was given
        self.programs: list[Process] = []  # every command that reached `program`, in order
        self.kills: list[str] = []  # the markers (NAME=VALUE) of every kill-by-marker sweep
        self.put_archives = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def api(self) -> FakeDocker:
        return self

    def close(self) -> None:
        pass

    # -- containers --------------------------------------------------------------------------
    def inspect_image(self, image: str) -> dict[str, Any]:
        return {"Id": f"sha256:fake-{image}"}

    def create_host_config(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    def create_container(self, image: str, *, name: str, environment: dict[str, str], **kw: Any) -> dict[str, str]:
        cid = f"fake{next(self._ids):060d}"
        box = FakeContainer(cid, name, dict(environment))
        for d in BASE_DIRS:
            box.files[d] = Entry(None, 0o755, 0)
        for mount in kw.get("host_config", {}).get("mounts", []):
            target, source = mount["Target"], mount.get("Source")
            for parent in _ancestors(target):
                box.files.setdefault(parent, Entry(None, 0o755, 0))
            if source is None or Path(source).is_dir():
                box.files[target] = Entry(None, 0o755, 0)
        with self._lock:
            self.containers[cid] = box
        return {"Id": cid}

    def start(self, container: str) -> None:
        self._container(container)

    def remove_container(self, container: str, force: bool = False, v: bool = False) -> None:
        box = self._container(container)
        box.removed = True
        for proc in list(box.processes):
            proc.kill()
        with self._lock:
            del self.containers[box.id]

    def _container(self, ref: str) -> FakeContainer:
        import docker.errors

        with self._lock:
            for box in self.containers.values():
                if ref in (box.id, box.name):
                    return box
        raise docker.errors.NotFound(f"No such container: {ref}", explanation=f"No such container: {ref}")

    # -- execs -------------------------------------------------------------------------------
    def exec_create(
        self,
        container: str,
        cmd: list[str],
        *,
        user: str = "",
        environment: dict[str, str] | None = None,
        workdir: str | None = None,
        **kw: Any,
    ) -> dict[str, str]:
        box = self._container(container)
        ex = Exec(f"exec{next(self._ids)}", box, list(cmd), dict(environment or {}), user, workdir or "/")
        with self._lock:
            self.execs.append(ex)
        return {"Id": ex.id}

    def exec_start(self, exec_id: str, socket: bool = False, **kw: Any) -> Any:
        if not socket:
            raise NotImplementedError("FakeDocker serves exec output only as a socket (DockerSandbox's way)")
        ex = self._exec(exec_id)
        ours, theirs = _socketpair()
        proc = Process(ex.container, ex.argv, {**ex.container.env, **ex.env}, ex.user, ex.workdir)
        proc._sock = theirs
        ex.running = True
        ex.container.processes.append(proc)
        threading.Thread(target=self._run, args=(ex, proc, theirs), daemon=True, name=f"fake-{ex.id}").start()
        return ours

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        ex = self._exec(exec_id)
        return {"Running": ex.running, "ExitCode": ex.exit_code}

    def _exec(self, exec_id: str) -> Exec:
        import docker.errors

        for ex in self.execs:
            if ex.id == exec_id and not ex.container.removed:
                return ex
        raise docker.errors.NotFound(f"No such exec instance: {exec_id}", explanation="No such exec instance")

    def _run(self, ex: Exec, proc: Process, sock: socket.socket) -> None:
        try:
            code = self._dispatch(proc)
        except Killed:
            code = 137
        except Exception:  # a bug in the test's program: shown as the command's stderr
            code = 1
            with contextlib.suppress(Killed):
                proc.err(traceback.format_exc())
        finally:  # the process is gone before its output ends, as in a container
            ex.container.processes.remove(proc)
            sock.close()
        time.sleep(EXIT_LAG_S)
        ex.exit_code, ex.running = code, False

    def _dispatch(self, proc: Process) -> int:
        argv = proc.argv
        if argv[:3] == ["timeout", "-s", "KILL"]:
            proc.argv = argv[4:]
            timer = threading.Timer(float(argv[3]), self._timeout_kill, args=(proc,))
            timer.start()
            try:
                return self._dispatch(proc)
            finally:
                timer.cancel()
        if argv[:3] == ["sh", "-c", KILL_BY_MARKER]:
            name, _, value = argv[4].partition("=")
            self.kills.append(argv[4])
            for other in list(proc.container.processes):
                if other.env.get(name) == value:
                    other.kill()
            return 0
        if argv == ["sh", "-c", OOM_COUNT]:
            proc.out(f"{proc.container.oom_kills}\n")
            return 0
        if argv[:2] == ["mkdir", "-p"]:
            uid = 0 if proc.user in ("root", "0") else 1000
            for d in argv[2:]:
                for path in [*_ancestors(d), posixpath.normpath(d)]:
                    proc.container.files.setdefault(path, Entry(None, 0o755, uid))
            return 0
        if self.program is None:
            proc.err(f"fake: {argv[0]}: command not found\n")
            return 127
        with self._lock:
            self.programs.append(proc)
        return self.program(proc) or 0

    @staticmethod
    def _timeout_kill(proc: Process) -> None:
        """`timeout` kills its process group: everything but a process that left it with setsid."""
        if not proc.own_session:
            proc.kill()

    # -- archives ----------------------------------------------------------------------------
    def put_archive(self, container: str, path: str, data: bytes) -> bool:
        import docker.errors

        box = self._container(container)
        target = box.files.get(path)
        if target is None or target.data is not None:
            raise docker.errors.NotFound(f"Could not find the file {path} in container {container}")
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for m in tf.getmembers():
                full = posixpath.normpath(posixpath.join(path, m.name))
                f = tf.extractfile(m) if m.isfile() else None
                box.files[full] = Entry(f.read() if f else None, m.mode, m.uid)
        self.put_archives += 1
        return True

    def get_archive(self, container: str, path: str, chunk_size: int = 2 << 20) -> tuple[Iterator[bytes], dict]:
        import docker.errors

        box = self._container(container)
        entry = box.files.get(posixpath.normpath(path))
        if entry is None:
            raise docker.errors.NotFound(f"Could not find the file {path}", explanation=f"Could not find {path}")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            for name, e in sorted(box.files.items()):
                if name == path or name.startswith(path.rstrip("/") + "/"):
                    info = tarfile.TarInfo(posixpath.relpath(name, posixpath.dirname(path)))
                    info.type = tarfile.DIRTYPE if e.data is None else tarfile.REGTYPE
                    info.mode, info.uid, info.size = e.mode, e.uid, len(e.data or b"")
                    tf.addfile(info, io.BytesIO(e.data) if e.data is not None else None)
        raw = buf.getvalue()
        stat = {"name": posixpath.basename(path), "size": len(entry.data or b""), "mode": entry.mode, "linkTarget": ""}
        return (raw[i : i + chunk_size] for i in range(0, len(raw), chunk_size)), stat


def _ancestors(path: str) -> list[str]:
    """The directories above `path`, from "/" down."""
    out, cur = [], posixpath.dirname(posixpath.normpath(path))
    while True:
        out.append(cur)
        if cur == "/":
            return out[::-1]
        cur = posixpath.dirname(cur)


def _socketpair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair()
    theirs.settimeout(0.05)  # a writer blocked on a full pipe still notices its kill
    return ours, theirs
