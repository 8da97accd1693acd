"""The Ray executor (driver side): each run on a Ray node with a free `benchctl_sandbox` slot.

    benchctl run TASK ... --ray ADDRESS         (ADDRESS: host:port, ray://..., `auto` or `local`)

A run executes in a `RunActor` (benchctl/executors/ray_node.py) holding one `benchctl_sandbox`
slot: Ray places it on a node with a free slot (or queues it until one frees), and the whole
run — gateway, harness, sandbox — executes there. Actors whose run ended are reused by the next
run (no new process and imports per run), so a sweep keeps at most one actor per run thread.
The driver long-polls the actor for transcript lines and appends them to the run's transcript
as they come (so progress and Ctrl-C work as for local runs), and at the end unpacks the run's
files into the results directory; the runner writes meta.json last, as always. Nodes need no shared filesystem: the task and data travel as
a bundle in Ray's object store (benchctl/executors/bundle.py), API keys as a `SecretEnv`
argument that only the run's own process on the node reads.

A node that dies mid-run makes its actor die: the attempt is recorded as `error` ("lost with
node ..."), moved to attempts/ by the runner and run again on another node, up to `retries`.
Ctrl-C cancels every actor (each stops its sandbox and gateway at once), waits for the runs to
record themselves, then kills what is left.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchctl.executors import RunJob, RunOutcome
from benchctl.executors.ray_node import SLOT, SecretEnv
from benchctl.harness import HarnessResult
from benchctl.run.sweep import RunSpec
from benchctl.tasks import Task
from benchctl.transcript import SECRET_ENV_VARS, SECRET_SUFFIXES, TranscriptWriter

if TYPE_CHECKING:
    from benchctl.limits.config import LimitsConfig
    from benchctl.limits.ray_limiter import RayLimiter

INSTALL_HINT = (
    "`--ray` needs Ray: pip install 'benchctl[ray]' (the same benchctl and Ray versions on the "
    "driver and on every node)"
)
RETRIES = 2  # runs lost with a node are redone this many times
POLL_S = 1.0  # long-poll wait for transcript lines
CANCEL_GRACE_S = 60.0  # after Ctrl-C, how long a run may take to stop and record itself
CHECK_TIMEOUT_S = 900.0  # node checks may build the sandbox image


class RayUnavailable(RuntimeError):
    """Ray is not installed or the cluster cannot be reached; the message says what to do."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable(INSTALL_HINT) from None
    return ray


def forwarded_env() -> dict[str, str]:
    """What a run's gateway needs from the driver's environment: API keys (the names the
    transcript redacts) and upstream base URLs. Nothing else of the driver's environment travels."""
    out = {}
    for k, v in os.environ.items():
        if (
            k in SECRET_ENV_VARS
            or k.endswith(SECRET_SUFFIXES)
            or k.endswith("_BASE_URL")
            or k in ("BENCHCTL_GATEWAY_HTTP_CLIENT",)
        ):
            out[k] = v
    return out


def _reachable(address: str) -> str | None:
    """For a HOST:PORT address, None when something listens there, else the problem. (ray.init
    itself retries an unreachable cluster for minutes.)"""
    import socket

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return None  # auto, local, ray://...: Ray's own resolution
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        return f"nothing answers at {address} ({e.strerror or e})"
    return None


def connect(address: str) -> Any:
    """ray.init for a driver: `local` starts a one-machine Ray in this process (slots = CPUs)."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    problem = _reachable(address)
    if problem:
        raise RayUnavailable(
            f"cannot connect to the Ray cluster at {address!r}: {problem}. Fix: start it "
            f"(`ray start --head --port=...`), or pass its address: --ray HOST:PORT"
        )
    try:
        if address == "local":
            ray.init(
                resources={SLOT: os.cpu_count() or 1},
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except Exception as e:
        raise RayUnavailable(
            f"cannot connect to the Ray cluster at {address!r}: {type(e).__name__}: {e}. "
            f"Fix: start it (`ray start --head ...`), or pass its address: --ray HOST:PORT"
        ) from None
    return ray


def driver_image_digest(image: str) -> str | None:
    """The image's digest on the driver's own Docker, if it has one; nodes must match it."""
    try:
        from benchctl.sandbox import images
        from benchctl.sandbox.docker_client import docker_client

        with closing(docker_client()) as client:
            info = images.image_info(client, image)
    except Exception:
        return None
    return info.id if info else None


def slot_nodes(ray: Any) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(SLOT, 0) > 0]


def on_each_node(ray: Any, fn: Any, *args: Any) -> list[tuple[dict[str, Any], Any]]:
    """Run fn(*args) on every alive node with slots (no slot used); (node, result or exception)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(fn)
    nodes = slot_nodes(ray)
    refs = [
        remote.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
            *args
        )
        for n in nodes
    ]
    out = []
    for n, ref in zip(nodes, refs):
        try:
            out.append((n, ray.get(ref, timeout=CHECK_TIMEOUT_S)))
        except Exception as e:
            out.append((n, e))
    return out


class RayExecutor:
    name = "ray"

    def __init__(self, address: str, retries: int = RETRIES) -> None:
        self.address = address
        self.retries = retries
        self.ray = connect(address)
        self.expected_digest: str | None = None
        self._secrets = SecretEnv(forwarded_env())
        self._bundles: dict[str | None, Any] = {}
        self._running: dict[str, Any] = {}  # run id -> the actor running it
        self._all_actors: list[Any] = []
        self._idle: list[Any] = []  # actors whose run ended: reused by the next run
        self._limiter: RayLimiter | None = None  # the sweep's limiter actor's client, once made
        self._lock = threading.Lock()
        from benchctl.executors.ray_node import RunActor

        self._actor_cls = self.ray.remote(RunActor)

    def slots(self) -> int:
        return int(self.ray.cluster_resources().get(SLOT, 0))

    def parallelism(self, requested: int) -> int:
        """No more run threads than the cluster has slots now: idle actors keep their slots for
        the whole sweep, so a thread beyond the slots could wait for one until the end."""
        return max(1, min(requested, self.slots()))

    def limiter(self, config: LimitsConfig, spent: float) -> RayLimiter:
        """One named limiter actor for the sweep: every node's gateways ask it (benchctl/limits/ray_limiter.py)."""
        from benchctl.limits.ray_limiter import start_actor

        self._limiter = start_actor(self.ray, config, spent)
        return self._limiter

    # ---- before anything starts ------------------------------------------------------------

    def check(self, task: Task, specs: list[RunSpec]) -> str | None:
        from benchctl import __version__
        from benchctl.executors.ray_node import check_node, image_mismatch

        if self.slots() == 0:
            return (
                f"the Ray cluster at {self.address} has no `{SLOT}` slots. Fix: start each node with "
                f"`ray start ... --resources '{{\"{SLOT}\": 8}}'` (8 = sandboxes the node may run at once)"
            )
        self.expected_digest = driver_image_digest(task.image)
        harnesses = {
            (s.harness, json.dumps(s.options, sort_keys=True, default=str)): (s.harness, s.options) for s in specs
        }  # options may hold lists: dedupe by their JSON
        results = on_each_node(self.ray, check_node, task.image, self.expected_digest, list(harnesses.values()))
        problems = []
        for n, res in results:
            where = f"node {n['NodeManagerAddress']} ({n['NodeID'][:12]})"
            if isinstance(res, Exception):
                problems.append(f"{where}: could not be checked: {type(res).__name__}: {str(res)[:300]}")
                continue
            if res["benchctl_version"] != __version__:
                problems.append(
                    f"{where}: benchctl {res['benchctl_version']}, the driver has {__version__}; "
                    f"install the same version on every node"
                )
            if self.expected_digest is None and res["digest"]:
                self.expected_digest = res["digest"]  # no image on the driver: nodes must agree with each other
            elif res["digest"] and res["digest"] != self.expected_digest and not res["problems"]:
                problems.append(f"{where}: {image_mismatch(task.image, res['digest'], self.expected_digest or '?')}")
            problems += [f"{where}: {p}" for p in res["problems"]]
        if problems:
            return "refused Ray node(s):\n  " + "\n  ".join(problems)
        return None

    # ---- one run ---------------------------------------------------------------------------

    def _bundle(self, job: RunJob) -> Any:
        from benchctl.executors.bundle import make_bundle

        with self._lock:
            if job.spec.variant not in self._bundles:
                models = [job.spec.model, job.spec.fallback, *_target_models(job.task)]
                out_dir = Path(job.run_dir).parent.parent
                self._bundles[job.spec.variant] = self.ray.put(
                    make_bundle(job.task, job.data.path, models, exclude=[out_dir])
                )
            return self._bundles[job.spec.variant]

    def _new_actor(self) -> Any:
        actor = self._actor_cls.options(
            resources={SLOT: 1}, num_cpus=0, max_concurrency=4, max_restarts=0, max_task_retries=0
        ).remote()
        with self._lock:
            self._all_actors.append(actor)
        return actor

    def _kill(self, actor: Any) -> None:
        try:
            self.ray.kill(actor)
        except Exception:
            pass

    def _take_actor(self, cancel: threading.Event) -> tuple[Any, dict[str, Any]] | None:
        """An actor ready for a run, and its node; None when cancelled first. An idle actor (its
        last run ended) is reused, so a run does not pay for a new process and its imports; a new
        one waits until Ray places it — and gives way to an actor that falls idle meanwhile, since
        idle actors keep their slots."""
        from ray.exceptions import GetTimeoutError, RayError

        with self._lock:
            actor = self._idle.pop() if self._idle else None
        actor = actor or self._new_actor()
        begun = actor.begin.remote()
        failures = 0
        while True:
            if cancel.is_set():
                self._kill(actor)
                return None
            try:
                return actor, self.ray.get(begun, timeout=POLL_S)
            except GetTimeoutError:
                with self._lock:
                    idle = self._idle.pop() if self._idle else None
                if idle is None:
                    continue
                self._kill(actor)
            except RayError:  # it died before the run (e.g. an idle actor whose node went away)
                failures += 1
                if failures > 3:
                    raise
                self._kill(actor)
                idle = None
            actor = idle or self._new_actor()
            begun = actor.begin.remote()

    def execute(self, job: RunJob, transcript: TranscriptWriter, cancel: threading.Event) -> RunOutcome:
        ray = self.ray
        from ray.exceptions import RayError, RayTaskError

        taken = self._take_actor(cancel)  # queued until a node has a free slot
        if taken is None:
            return RunOutcome(HarnessResult("error", error="cancelled"), job.meta)
        actor, node = taken
        keep = True  # the actor goes back to the idle pool afterwards
        try:
            job.meta["node"] = {k: node[k] for k in ("id", "ip", "hostname")}
            with self._lock:
                self._running[job.spec.run_id] = actor
            reply_ref = actor.run.remote(job, self._bundle(job), self._secrets, self.expected_digest)
            cancel_sent_at: float | None = None
            done = False
            while not done:
                if cancel.is_set() and cancel_sent_at is None:
                    actor.cancel.remote()
                    cancel_sent_at = time.time()
                if cancel_sent_at is not None and time.time() - cancel_sent_at > CANCEL_GRACE_S:
                    keep = False
                    return RunOutcome(HarnessResult("error", error="cancelled"), job.meta)
                lines, done = ray.get(actor.next_lines.remote(POLL_S))
                for line in lines:
                    transcript.append_line(line)
            reply = ray.get(reply_ref)
            if reply["files"]:
                from benchctl.executors.bundle import unpack_into

                unpack_into(reply["files"], job.run_dir)
            keep = not reply["refused"]  # a refused node's actor is not reused: the redo gets a new one
            return RunOutcome(reply["result"], reply["meta"], retryable=bool(reply["refused"]))
        except RayTaskError as e:  # benchctl's own code failed on the node: not the node's fault
            msg = f"on node {_where(node)}: {str(e).strip().splitlines()[-1][:500]}"
            transcript.emit("error", "runner", message=msg)
            return RunOutcome(HarnessResult("error", error=msg), job.meta)
        except RayError as e:  # the actor (its node, or its process) is gone
            keep = False
            msg = f"lost with node {_where(node)}: {type(e).__name__}"
            transcript.emit("error", "runner", message=msg, detail=str(e)[:2000])
            return RunOutcome(
                HarnessResult("error", error="cancelled" if cancel.is_set() else msg),
                job.meta,
                retryable=not cancel.is_set(),
            )
        finally:
            with self._lock:
                self._running.pop(job.spec.run_id, None)
                if keep:
                    self._idle.append(actor)
            if not keep:
                self._kill(actor)

    def stop_all(self) -> None:
        with self._lock:
            actors = list(self._running.values())
        for a in actors:
            try:
                a.cancel.remote()
            except Exception:
                pass

    def close(self) -> None:
        with self._lock:
            actors, self._all_actors, self._idle = self._all_actors, [], []
        if self._limiter is not None:
            actors.append(self._limiter.actor)
            self._limiter = None
        for a in actors:
            try:
                self.ray.kill(a)
            except Exception:
                pass
        self._bundles.clear()


def _where(node: dict[str, Any] | None) -> str:
    return "?" if node is None else f"{node['ip']} ({node['id'][:12]})"


def _target_models(task: Task) -> list[str | None]:
    """Models a hidden-behaviour task's target tools call (their scripts travel with the run)."""
    try:
        from benchctl.targets.spec import load_hidden_behaviour

        hb = load_hidden_behaviour(task.task_dir)
    except Exception:
        return []
    if hb is None:
        return []
    return [hb.target.model, *(c.auxiliary_model for c in hb.tools.configs.values())]
