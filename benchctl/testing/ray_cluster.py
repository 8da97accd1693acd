"""A real multi-node Ray cluster on one machine, inside a private network namespace.

    with RayCluster(tmp_dir, nodes=2, slots=2) as cluster:
        p = cluster.spawn([...benchctl run ... --ray cluster.address], env=...)
        cluster.kill_node(1)                 # SIGKILL a worker node's whole process tree
        rc = cluster.wait(p)

The cluster runs under `unshare -n` (root): loopback is brought up and every Ray process binds
to 127.0.0.1 — outside a private namespace Ray picks the machine's interface address. The
head and each worker are separate `ray start --block` processes (separate raylets and object
stores: separate Ray nodes); commands that must talk to the cluster (the benchctl driver) are
spawned inside the same namespace by the rig process (`python -m benchctl.testing.ray_cluster`),
which takes JSON commands on stdin. Docker still works there through its unix socket.

Teardown is precise: every process the rig starts carries BENCHCTL_RAY_RIG=<unique id> in its
environment (Ray's own children inherit it), so stopping kills exactly those processes and no
other Ray process on the machine, also when the rig itself was killed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

MARK = "BENCHCTL_RAY_RIG"
NODE = "BENCHCTL_RAY_RIG_NODE"
PORT = 6379  # free: the namespace is private
# fast node-death detection (Ray's defaults take ~30 s)
HEAD_ENV = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def marked_pids(mark: str, node: int | None = None) -> list[int]:
    """Processes whose environment carries MARK=mark (and NODE=node when given)."""
    want = [f"{MARK}={mark}".encode()] + ([f"{NODE}={node}".encode()] if node is not None else [])
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if all(w in env for w in want):
            out.append(int(d.name))
    return out


def kill_marked(mark: str, node: int | None = None, sig: int = signal.SIGKILL) -> list[int]:
    pids = marked_pids(mark, node)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    return pids


# ---- the rig process (inside the namespace) ------------------------------------------------------


class _Rig:
    def __init__(self, workdir: Path, ray_dir: Path, nodes: int, slots: int, mark: str) -> None:
        self.workdir, self.ray_dir, self.nodes, self.slots, self.mark = workdir, ray_dir, nodes, slots, mark
        self.address = f"127.0.0.1:{PORT}"
        self.node_procs: dict[int, subprocess.Popen[bytes]] = {}  # node index -> `ray start --block`
        self.spawned: dict[int, subprocess.Popen[bytes]] = {}  # pid -> a command run in the namespace

    def _env(self, node: int | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
        # RAY_AUTH_MODE set explicitly: with it unset, a token left in ~/.ray/auth_token (e.g. by a
        # local `ray.init()`) turns token auth on for the head but not for connecting clients.
        env = {**os.environ, MARK: self.mark, "RAY_AUTH_MODE": "disabled", **(extra or {})}
        if node is not None:
            env[NODE] = str(node)
            env["BENCHCTL_NODE_DIR"] = str(self.workdir / "node-runs")  # runs unpack here (per machine), not in /tmp
        return env

    def start(self) -> None:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        tmp = self.ray_dir
        for i in range(self.nodes):
            argv = [
                "ray",
                "start",
                "--block",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=1",
                f"--resources={json.dumps({'benchctl_sandbox': self.slots})}",
                "--disable-usage-stats",
                f"--dashboard-agent-listen-port={52365 + i}",
                f"--metrics-export-port={8090 + i}",
            ]
            argv += (
                [f"--port={PORT}", "--head", f"--temp-dir={tmp}", "--include-dashboard=false"]
                if i == 0
                else [f"--address={self.address}"]
            )
            log = open(self.workdir / f"node{i}.log", "wb")
            self.node_procs[i] = subprocess.Popen(
                argv, env=self._env(i, HEAD_ENV), stdout=log, stderr=subprocess.STDOUT
            )
            self._wait_nodes(i + 1)

    def _wait_nodes(self, n: int, timeout: float = 180) -> None:
        probe = (
            f"import ray, logging; ray.init(address={self.address!r}, logging_level=logging.ERROR, log_to_driver=False); "
            "print(sum(1 for x in ray.nodes() if x['Alive']))"
        )
        end = time.time() + timeout
        while time.time() < end:
            dead = [i for i, p in self.node_procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"`ray start` of node {dead[0]} exited; see {self.workdir}/node{dead[0]}.log")
            try:
                r = subprocess.run(
                    [sys.executable, "-c", probe], env=self._env(), capture_output=True, text=True, timeout=60
                )
            except subprocess.TimeoutExpired:
                print("cluster probe: no answer in 60 s", file=sys.stderr, flush=True)
                continue
            if r.returncode == 0 and r.stdout.strip().isdigit() and int(r.stdout.strip()) >= n:
                return
            print(
                f"cluster probe: rc {r.returncode} {r.stdout.strip()[-200:]!r} {r.stderr.strip()[-500:]!r}",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(1)
        raise RuntimeError(f"Ray cluster did not reach {n} nodes; see {self.workdir}/node*.log")

    def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        kind = cmd["cmd"]
        if kind == "spawn":
            out = open(cmd["stdout"], "wb") if cmd.get("stdout") else subprocess.DEVNULL
            err = open(cmd["stderr"], "wb") if cmd.get("stderr") else subprocess.DEVNULL
            p = subprocess.Popen(
                cmd["argv"],
                env=self._env(extra=cmd.get("env")),
                cwd=cmd.get("cwd"),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
            self.spawned[p.pid] = p
            return {"pid": p.pid}
        if kind == "signal":
            self.spawned[cmd["pid"]].send_signal(cmd["sig"])
            return {}
        if kind == "wait":
            try:
                return {"rc": self.spawned[cmd["pid"]].wait(timeout=cmd.get("timeout"))}
            except subprocess.TimeoutExpired:
                return {"rc": None}
        if kind == "nodes":  # node index -> Ray node id (from each raylet's command line)
            return {"nodes": {str(i): nid for i, nid in self.node_ids().items()}}
        if kind == "kill_node":  # a node dies: its `ray start`, raylet, workers, all at once
            return {"killed": kill_marked(self.mark, cmd["index"])}
        raise ValueError(f"unknown command {kind!r}")

    def node_ids(self) -> dict[int, str]:
        out = {}
        for i in self.node_procs:
            for pid in marked_pids(self.mark, i):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
                except OSError:
                    continue
                if argv and argv[0].endswith("/raylet"):
                    out[i] = next(a.split("=", 1)[1] for a in argv if a.startswith("--node_id="))
        return out

    def stop(self) -> None:
        for p in self.spawned.values():
            if p.poll() is None:
                p.kill()
        for i in sorted(self.node_procs, reverse=True):
            if self.node_procs[i].poll() is None:
                self.node_procs[i].terminate()  # `ray start --block` stops its node's processes on SIGTERM
        for p in self.node_procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        kill_marked(self.mark)


def _serve(workdir: Path, ray_dir: Path, nodes: int, slots: int, mark: str) -> None:
    rig = _Rig(workdir, ray_dir, nodes, slots, mark)
    try:
        rig.start()
        print(json.dumps({"ready": rig.address}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd["cmd"] == "stop":
                break
            try:
                reply = rig.handle(cmd)
            except Exception as e:
                reply = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(reply), flush=True)
    finally:
        rig.stop()


# ---- the test side ----------------------------------------------------------------------------------


class RayCluster:
    """Start the rig under `unshare -n`; talk to it; always tear everything down."""

    def __init__(self, workdir: Path, nodes: int = 2, slots: int = 2, env: dict[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.env = dict(env or {})  # over this process's environment, for every process of the cluster
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.nodes, self.slots = nodes, slots
        self.mark = uuid.uuid4().hex
        # Ray's temp dir (sessions, logs, sockets): short, since AF_UNIX socket paths must stay < 108 bytes
        self.ray_dir = Path(tempfile.mkdtemp(prefix="bcray-", dir="/tmp"))
        self.address = ""
        self._p: subprocess.Popen[str] | None = None

    def __enter__(self) -> RayCluster:
        self._p = subprocess.Popen(
            [
                "unshare",
                "-n",
                sys.executable,
                "-m",
                "benchctl.testing.ray_cluster",
                str(self.workdir),
                str(self.ray_dir),
                str(self.nodes),
                str(self.slots),
                self.mark,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.workdir / "rig.log", "w"),
            text=True,
            env={**os.environ, **self.env},
        )
        try:
            first = self._read()
            if "ready" not in first:
                raise RuntimeError(f"Ray cluster rig failed: {first}; see {self.workdir}")
            self.address = first["ready"]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _read(self) -> dict[str, Any]:
        assert self._p is not None and self._p.stdout is not None
        line = self._p.stdout.readline()
        if not line:
            return {"error": f"rig exited ({self._p.poll()}); see {self.workdir}/rig.log and node*.log"}
        return json.loads(line)

    def _ask(self, **cmd: Any) -> dict[str, Any]:
        assert self._p is not None and self._p.stdin is not None
        self._p.stdin.write(json.dumps(cmd) + "\n")
        self._p.stdin.flush()
        reply = self._read()
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply

    def spawn(
        self,
        argv: list[str],
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        stdout: Path | None = None,
        stderr: Path | None = None,
    ) -> int:
        return int(
            self._ask(
                cmd="spawn",
                argv=argv,
                env=env or {},
                cwd=cwd,
                stdout=str(stdout) if stdout else None,
                stderr=str(stderr) if stderr else None,
            )["pid"]
        )

    def signal(self, pid: int, sig: int) -> None:
        self._ask(cmd="signal", pid=pid, sig=int(sig))

    def wait(self, pid: int, timeout: float) -> int | None:
        return self._ask(cmd="wait", pid=pid, timeout=timeout)["rc"]

    def node_ids(self) -> dict[int, str]:
        """Node index (0 = head) -> Ray node id (hex)."""
        return {int(k): v for k, v in self._ask(cmd="nodes")["nodes"].items()}

    def kill_node(self, index: int) -> list[int]:
        if index == 0:
            raise ValueError("node 0 is the head; kill a worker node")
        return self._ask(cmd="kill_node", index=index)["killed"]

    def __exit__(self, *exc: object) -> None:
        p = self._p
        if p is not None:
            try:
                if p.poll() is None and p.stdin is not None:
                    p.stdin.write(json.dumps({"cmd": "stop"}) + "\n")
                    p.stdin.flush()
                    p.stdin.close()
                p.wait(timeout=60)
            except Exception:
                p.kill()
                p.wait()
        kill_marked(self.mark)  # whatever survived (also if the rig died): only our processes
        shutil.rmtree(self.ray_dir, ignore_errors=True)


if __name__ == "__main__":
    _serve(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
