"""DockerSandbox: the Sandbox protocol on a network-less, locked-down Docker container.

The container: `network_mode=none`; user `agent` (uid 1000); all capabilities dropped;
`no-new-privileges`; cpu / memory (no swap) / pids limits from `spec.limits`; tini as PID 1
(from the image, or Docker's own init with `spec.init = "docker"`) reaping zombies; `sleep
infinity` as its only long-lived process. Task data is bind-mounted read-only at /data, the
gateway directory read-write at /gateway, agent binaries read-only under /opt/benchctl; /work
and every other directory the agent can write are size-capped tmpfs volumes (`spec.writable_dirs`,
`limits.work` each, in RAM: counted against the memory limit), not host bind mounts, so the agent
can fill neither the host's disk nor its Docker storage, and artifacts only leave through
`get_archive` + the checks in artifacts.py.

Commands run through `docker exec` (docker_exec.py: one path for `exec` and `exec_stream`).
`exec` runs them under `timeout -s KILL` (which kills the command's whole process group inside
the container); as a backstop, and for `exec_stream` at its deadline, cancel or stop, the host
kills every process carrying the exec's marker variable. One instance may be used from several
threads at once.
"""

from __future__ import annotations

import io
import math
import posixpath
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchctl.layout import slug
from benchctl.sandbox import artifacts, cleanup
from benchctl.sandbox.base import (
    DATA_DIR,
    GATEWAY_DIR,
    CollectReport,
    Deadline,
    ExecResult,
    Limits,
    SandboxError,
    SandboxSpec,
    StreamResult,
)
from benchctl.sandbox.docker_client import SANDBOX_TIMEOUT, DockerUnavailable, docker_client
from benchctl.sandbox.docker_exec import OOM_COUNT, Container, LineSink, StreamCapture, monotonic_deadline
from benchctl.sandbox.limits import LimitError, check_limits, memory_bytes, work_bytes

TINI = "/usr/bin/tini"
KILL_GRACE_S = 2.0  # past a blocking exec's timeout, when the host kills what `timeout` did not
STREAM_KILL_GRACE_S = 3.0  # how long a streamed command's output is still read after its kill


def _client() -> Any:
    try:
        return docker_client(SANDBOX_TIMEOUT)
    except DockerUnavailable as e:
        raise SandboxError(str(e)) from e


class DockerSandbox:
    """One container per run. Use as a context manager, or call start() and stop()."""

    def __init__(self, spec: SandboxSpec, client: Any | None = None) -> None:
        self.spec = spec
        self.run_id = spec.run_id
        self.image_digest: str | None = None
        self.container_id: str | None = None
        # A slug is ASCII [A-Za-z0-9._-], which a Docker container name needs; 60 keeps names short.
        self.name = f"benchctl-{slug(spec.run_id)[:60]}-{uuid.uuid4().hex[:8]}"
        self._client = client
        self._owns_client = client is None  # made here on first use, so closed here by stop()
        self._lock = threading.Lock()
        self._oom_seen = 0
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = _client()
        return self._client

    def _validate(self) -> None:
        s = self.spec
        for label, path in (("data_dir", s.data_dir), ("gateway_dir", s.gateway_dir)):
            if path is not None and not Path(path).is_dir():
                raise SandboxError(f"SandboxSpec.{label} {path} is not an existing directory")
        for m in s.extra_mounts:
            if not Path(m.host_path).exists():
                raise SandboxError(f"extra mount source {m.host_path} does not exist")
            if not m.container_path.startswith("/"):
                raise SandboxError(f"extra mount target {m.container_path!r} must be an absolute path")
        from benchctl.transcript import SECRET_ENV_VARS

        leaked = sorted(k for k in s.env if k in SECRET_ENV_VARS)
        _refuse_secret_values(s.env, already=leaked)
        try:
            check_limits(s.limits or Limits())
        except LimitError as e:  # e.g. pids <= 0, which Docker would read as "no limit"
            raise SandboxError(f"SandboxSpec.{e}") from None

    def _mounts(self) -> list[Any]:
        from docker.types import DriverConfig as DockerDriverConfig
        from docker.types import Mount as DockerMount

        s = self.spec
        mounts = []
        if s.data_dir is not None:
            mounts.append(DockerMount(DATA_DIR, str(Path(s.data_dir).resolve()), type="bind", read_only=True))
        if s.gateway_dir is not None:
            gw = Path(s.gateway_dir).resolve()
            # uid 1000 must be able to reach the socket inside: the directory needs o+x.
            mode = gw.stat().st_mode
            if not mode & 0o001:
                gw.chmod(mode | 0o011)
            mounts.append(DockerMount(GATEWAY_DIR, str(gw), type="bind", read_only=False))
        for m in s.extra_mounts:
            mounts.append(
                DockerMount(m.container_path, str(Path(m.host_path).resolve()), type="bind", read_only=m.read_only)
            )
        # Every writable directory on its own size-capped tmpfs, counted against the memory limit: an
        # agent cannot fill the host's disk, and writing past the cap fails with ENOSPC. Anonymous
        # volumes of the local driver rather than plain tmpfs mounts, because `docker cp` (get_archive /
        # put_archive: artifact collection, put_file) sees into volumes but not into tmpfs mounts on
        # Docker 20.10. They go with the container (removed with v=True).
        size = work_bytes(s.limits.work, s.limits.memory)
        for d in s.writable_dirs:
            options = f"size={size},uid={d.uid},gid={d.uid},mode={d.mode:o},nosuid,nodev"
            mounts.append(
                DockerMount(
                    d.path,
                    None,
                    type="volume",
                    labels=cleanup.owner_labels(self.run_id),
                    driver_config=DockerDriverConfig("local", {"type": "tmpfs", "device": "tmpfs", "o": options}),
                )
            )
        return mounts

    def start(self) -> None:
        if self.container_id is not None:
            raise SandboxError("sandbox already started; a DockerSandbox is single-use")
        with self._lock:
            if self._stopped:  # e.g. a cancel stopped it between the runner's last check and start()
                raise SandboxError("sandbox was stopped before it started; a DockerSandbox is single-use")
        self._validate()
        import docker.errors
        import docker.types

        try:
            image = self.client.api.inspect_image(self.spec.image)
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"sandbox image {self.spec.image} not found; build it with `benchctl images build`"
            ) from None
        self.image_digest = image["Id"]
        lim = self.spec.limits or Limits()
        docker_init = self.spec.init == "docker"
        host_config = self.client.api.create_host_config(
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            nano_cpus=int(lim.cpus * 1e9),
            mem_limit=memory_bytes(lim.memory),
            memswap_limit=memory_bytes(lim.memory),
            pids_limit=lim.pids,
            mounts=self._mounts(),
            ipc_mode="private",
            ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],
            init=docker_init or None,
        )
        # With Docker's init as PID 1 the entrypoint is plain `sleep`, which every image has; the
        # image's own ENTRYPOINT is replaced either way.
        entrypoint, command = (["sleep"], ["infinity"]) if docker_init else ([TINI, "--"], ["sleep", "infinity"])
        # Register the name before asking Docker, so a signal mid-create still finds it.
        cleanup.register(self.name)
        try:
            created = self.client.api.create_container(
                self.spec.image,
                name=self.name,
                command=command,
                entrypoint=entrypoint,
                user=self.spec.user,
                environment=dict(self.spec.env),
                working_dir="/work",
                hostname="sandbox",
                labels=cleanup.owner_labels(self.run_id),
                host_config=host_config,
                network_disabled=True,
            )
            self.container_id = created["Id"]
            self.client.api.start(self.container_id)
        except Exception as e:
            self.stop()
            if isinstance(e, docker.errors.APIError):
                raise SandboxError(f"could not start sandbox from {self.spec.image}: {e}") from e
            raise
        with self._lock:
            stopped_meanwhile = self._stopped
        if stopped_meanwhile:
            # stop() ran (from another thread) while the create was in flight, so it found nothing to
            # remove and will not run again: remove what was just created ourselves.
            cleanup._remove_one(self.client, self.container_id)
            cleanup.unregister(self.name)
            raise SandboxError("sandbox was stopped while it was starting; its container has been removed")

    def stop(self) -> None:
        """Force-remove the container. Idempotent; never raises for an already-gone container."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self.container_id is None and self.name not in cleanup.live_containers():
            return  # start() never got as far as registering a create: there is nothing to remove
        # Only forget the container once it is really gone, so atexit/signal cleanup can retry.
        cleanup._remove_one(self.client, self.container_id or self.name)
        cleanup.unregister(self.name)
        if self._owns_client:  # its connections; a late call from another thread reconnects by itself
            self.client.close()

    def __enter__(self) -> DockerSandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _require_running(self) -> str:
        if self.container_id is None or self._stopped:
            raise SandboxError("sandbox is not running (call start() first; stop() ends it for good)")
        return self.container_id

    # -- exec --------------------------------------------------------------------------------
    @property
    def user(self) -> str:
        return self.spec.user

    def _container(self) -> Container:
        container_id = self._require_running()  # before the client: a sandbox never started opens none
        return Container(self.client.api, container_id, self.name)

    def exec(
        self,
        cmd: list[str] | str,
        *,
        timeout: float | None = None,
        output_cap: int = 1_000_000,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
    ) -> ExecResult:
        return self._exec(cmd, timeout=timeout, output_cap=output_cap, env=env, workdir=workdir, user=user)[0]

    def _exec(
        self,
        cmd: list[str] | str,
        *,
        timeout: float | None,
        output_cap: int,
        env: dict[str, str] | None,
        workdir: str | None,
        user: str | None,
    ) -> tuple[ExecResult, StreamCapture]:
        # Per-exec env is checked like the spec's (by value: harnesses legitimately pass the dummy
        # sandbox token under a provider key's name here).
        _refuse_secret_values(env or {})
        container = self._container()
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if timeout is not None:
            if timeout <= 0:
                raise ValueError(f"exec timeout must be positive, got {timeout}")
            # `timeout` kills the command's whole process group inside the container; the host's
            # kill by marker, KILL_GRACE_S later, is the backstop for what escaped it.
            argv = ["timeout", "-s", "KILL", f"{timeout:.3f}", *argv]
        run_as = user or self.spec.user
        host_deadline = time.monotonic() + timeout + KILL_GRACE_S if timeout is not None else math.inf
        capture = StreamCapture(cap=output_cap)
        ended = container.run(
            argv, capture, user=run_as, env=env or {}, workdir=workdir, deadline=lambda: host_deadline
        )
        exit_code = ended.exit_code
        timed_out = (
            timeout is not None
            and ended.duration_s >= timeout
            and (exit_code in (None, 124, 137) or ended.reason is not None)
        )
        if timed_out:
            # `timeout` killed its process group; sweep for anything that escaped it (setsid).
            container.kill_marked(ended.marker, run_as)
            exit_code = None
        stderr = capture.text(1)
        if ended.reason == "flood":
            exit_code = None
            stderr += f"\n[benchctl] output went far past the {output_cap}-byte cap; process killed\n"
        if exit_code == 137 and not timed_out and self._new_oom_kill(container):
            stderr += (
                f"\n[benchctl] killed by the out-of-memory killer: the sandbox memory limit "
                f"is {self.spec.limits.memory}\n"
            )
        return ExecResult(
            exit_code=exit_code,
            stdout=capture.text(0),
            stderr=stderr,
            timed_out=timed_out,
            truncated=capture.truncated,
            duration_s=ended.duration_s,
        ), capture

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
        """See Sandbox.exec_stream. Killed with SIGKILL at once, not TERM-then-KILL: a TERM reaches
        the command's running children too (an agent CLI's tool), and an agent CLI would take the
        tool's death as a result and start its next turn after the deadline."""
        _refuse_secret_values(env or {})
        run_as = user or self.spec.user
        started = time.monotonic()
        sink = LineSink(on_line)

        def result(exit_code: int | None, timed_out: bool, cancelled: bool, stopped: bool) -> StreamResult:
            first = None if sink.first_stdout is None else sink.first_stdout - started
            stderr = sink.stderr.decode("utf-8", "replace")
            return StreamResult(exit_code, timed_out, cancelled, stderr, time.monotonic() - started, first, stopped)

        try:
            container = self._container()
            ended = container.run(
                list(argv),
                sink,
                user=run_as,
                env=env or {},
                workdir=workdir,
                deadline=monotonic_deadline(deadline),
                cancel=cancel,
                stop=stop,
                drain_s=STREAM_KILL_GRACE_S,
            )
        except SandboxError:
            if cancel is None or not cancel.is_set():
                raise
            return result(None, False, True, False)  # the cancel removed the sandbox under the command
        finally:
            sink.flush()
        timed_out, stopped = ended.reason == "deadline", ended.reason == "stopped"
        # A cancel stops the sandbox at once, so the output may end before the loop saw the flag:
        # that is still a cancellation, not the command failing.
        cancelled = ended.reason == "cancelled" or (not timed_out and cancel is not None and cancel.is_set())
        if not (timed_out or cancelled or stopped):
            return result(ended.exit_code, False, False, False)
        container.kill_marked(ended.marker, run_as)  # anything that outlived the command itself
        return result(None, timed_out, cancelled, stopped)

    def _new_oom_kill(self, container: Container) -> bool:
        """True if the container's memory cgroup recorded an OOM kill since the last check."""
        try:
            count = int(container.quick(["sh", "-c", OOM_COUNT], self.spec.user).strip())
        except (ValueError, SandboxError):
            return False
        with self._lock:
            new, self._oom_seen = count > self._oom_seen, max(count, self._oom_seen)
        return new

    # -- files -------------------------------------------------------------------------------
    def put_file(self, container_path: str, data: bytes, mode: int = 0o644) -> None:
        parent, base = posixpath.split(_abs(container_path))
        self.put_files(parent, {base: data}, mode=mode)

    def put_files(
        self,
        directory: str,
        files: Mapping[str, bytes],
        *,
        mode: int = 0o644,
        dir_mode: int | None = None,
        as_root: bool = False,
    ) -> None:
        """See Sandbox.put_files: one `put_archive`, whose tar headers carry the owners and modes
        (the daemon unpacks it as root), so even root-owned files take one API round trip."""
        import docker.errors

        container = self._container()
        directory = _abs(directory)
        # With dir_mode the archive holds the directory itself, so it unpacks into its parent.
        target, prefix = posixpath.split(directory) if dir_mode is not None else (directory, "")
        target = target or "/"
        uid, owner = (0, "root") if as_root else (1000, "agent")
        now = int(time.time())

        def entry(name: str, entry_mode: int, kind: bytes) -> tarfile.TarInfo:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, entry_mode, now
            info.uid = info.gid = uid
            info.uname = info.gname = owner
            return info

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            if dir_mode is not None:
                tf.addfile(entry(prefix, dir_mode & 0o7777, tarfile.DIRTYPE))
            for name, data in files.items():
                info = entry(posixpath.join(prefix, name), mode & 0o777, tarfile.REGTYPE)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        archive = buf.getvalue()
        try:
            try:
                ok = container.api.put_archive(container.id, target, archive)
            except docker.errors.NotFound:  # the target directory is missing: make it as the files' owner
                made = self.exec(["mkdir", "-p", target], timeout=30, user="root" if as_root else None)
                if made.exit_code != 0:
                    raise SandboxError(f"could not make {target} in the sandbox: {made.stderr.strip()[:300]}") from None
                ok = container.api.put_archive(container.id, target, archive)
        except docker.errors.APIError as e:
            raise SandboxError(f"could not write into {directory} in the sandbox: {e.explanation or e}") from e
        if not ok:
            raise SandboxError(f"could not write into {directory} in the sandbox")

    def get_file(self, container_path: str, max_bytes: int = 50_000_000) -> bytes:
        cid = self._require_running()
        path = _abs(container_path)
        stream, stat = self._get_archive(cid, path)
        try:
            if stat.get("linkTarget"):
                raise SandboxError(f"{path} is a symlink to {stat['linkTarget']}; not followed")
            if stat.get("size", 0) > max_bytes:
                raise SandboxError(f"{path} is {stat['size']} bytes, over the {max_bytes}-byte cap")
            tf = tarfile.open(fileobj=artifacts._ChunkReader(stream), mode="r|")  # type: ignore[call-overload]
            member = tf.next()
            if member is None or not member.isreg():
                raise SandboxError(f"{path} is not a regular file")
            if member.size > max_bytes:
                raise SandboxError(f"{path} is {member.size} bytes, over the {max_bytes}-byte cap")
            f = tf.extractfile(member)
            return f.read() if f is not None else b""
        finally:
            stream.close()

    def _get_archive(self, cid: str, path: str) -> tuple[Any, dict[str, Any]]:
        """`get_archive`: FileNotFoundError when the path is missing, SandboxError when the container is
        (Docker answers 404 to both; telling them apart keeps "file missing" from hiding a dead sandbox)."""
        import docker.errors

        try:
            return self.client.api.get_archive(cid, path, chunk_size=1 << 20)
        except docker.errors.NotFound as e:
            if "no such container" in str(e.explanation or e).lower():
                raise SandboxError(f"cannot read {path}: sandbox {self.name} no longer exists") from e
            raise FileNotFoundError(f"{path} does not exist in the sandbox") from None
        except docker.errors.APIError as e:
            raise SandboxError(f"cannot read {path} from sandbox {self.name}: {e.explanation or e}") from e

    def collect(self, container_paths: list[str], dest_dir: Path, max_bytes: int = 50_000_000) -> CollectReport:
        """Copy files out safely (see artifacts.py). dest_dir mirrors /work: `/work/a/b.md` lands at
        dest_dir/a/b.md and `/work` contributes its contents; paths outside /work land under their
        basename. `max_bytes` caps each file; every refusal is in the report's `skipped`."""
        report = CollectReport()
        writer = artifacts.SafeWriter(Path(dest_dir))
        for requested in container_paths:
            self._collect_one(_abs(requested), writer, report, max_bytes)
        return report

    def _collect_one(self, root: str, writer: artifacts.SafeWriter, report: CollectReport, max_bytes: int) -> None:
        listing, raw = self._exec(
            ["find", "-P", root, "-printf", artifacts.FIND_PRINTF],
            timeout=60,
            output_cap=50_000_000,
            env=None,
            workdir=None,
            user=None,
        )
        if listing.truncated or listing.timed_out:
            report.skipped.append({"path": root, "reason": "listing too large or too slow; not collected"})
            return
        entries = artifacts.parse_find_listing(bytes(raw.data[0]))
        if not entries:
            if "No such file" in listing.stderr:
                report.missing.append(root)
            else:
                report.skipped.append({"path": root, "reason": f"could not list: {listing.stderr.strip()[:300]}"})
            return
        if listing.exit_code not in (0, None) and listing.stderr.strip():
            report.skipped.append({"path": root, "reason": f"partly unreadable: {listing.stderr.strip()[:300]}"})
        root_is_dir = entries[0].path == root and entries[0].kind == "d"
        if entries[0].kind == "l":  # the requested path itself is a symlink
            report.skipped.append({"path": root, "reason": f"symlink -> {entries[0].link_target} (not followed)"})
            return
        allowed, oversize, refused = artifacts.plan(entries, root, root_is_dir, max_bytes, report)
        if not oversize:
            name = artifacts.dest_name(root)
            prefix = name if root_is_dir else posixpath.dirname(name)
            self._fetch(root, root, root_is_dir, prefix, allowed, refused, writer, report, max_bytes)
            return
        # Something is too big to stream: fetch the remaining files one by one instead.
        for rel, entry in sorted(allowed.items()):
            if entry.kind == "d":
                try:
                    writer.mkdir(rel)
                except OSError as e:
                    report.skipped.append({"path": entry.path, "reason": f"not written on the host: {e}"})
            else:
                self._fetch(
                    root, entry.path, False, posixpath.dirname(rel), allowed, refused, writer, report, max_bytes
                )

    def _fetch(
        self,
        root: str,
        path: str,
        is_dir: bool,
        prefix: str,
        allowed: dict[str, artifacts.Entry],
        refused: set[str],
        writer: artifacts.SafeWriter,
        report: CollectReport,
        max_bytes: int,
    ) -> None:
        try:
            stream, _ = self._get_archive(self._require_running(), path)
        except FileNotFoundError:
            report.missing.append(path)
            return
        try:
            artifacts.extract_archive(
                stream,
                writer,
                report,
                container_root=path,
                root_is_dir=is_dir,
                expected=allowed,
                max_bytes=max_bytes,
                dest_prefix=prefix,
                already_reported=refused,
            )
        finally:
            stream.close()  # stops the daemon sending the rest if we bailed out early


def _refuse_secret_values(env: dict[str, str], already: list[str] | None = None) -> None:
    """SandboxError naming the variables in `already` and those whose value contains a host secret."""
    from benchctl.transcript import secret_values

    secrets = secret_values()
    leaked = list(already or [])
    leaked += sorted(k for k, v in env.items() if k not in leaked and any(sec in str(v) for sec in secrets))
    if leaked:
        raise SandboxError(
            f"refusing to pass provider keys into a sandbox (env {', '.join(leaked)}); "
            "sandboxes reach models only through the gateway"
        )


def _abs(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"sandbox paths must be absolute (e.g. /work/report.md), got {path!r}")
    return posixpath.normpath(path)
