"""One run's body: gateway, target tools, sandbox, harness, follow-ups, artifact collection.

Every executor runs exactly this, in a thread of `benchctl run` (local) or in a process on a Ray
node (ray). It writes transcript events through the writer it is given and files (artifacts/,
harness/) into `workdir`; it fills in `job.meta` but never writes meta.json (the runner does,
last).
"""

from __future__ import annotations

import shutil
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchctl.executors import RunJob, RunOutcome
from benchctl.harness import Harness, HarnessContext, HarnessResult, create_harness
from benchctl.layout import ARTIFACTS, RunMeta, Usage
from benchctl.policies import Budget, StopState, parse_duration
from benchctl.run.sweep import RunSpec
from benchctl.sandbox.base import WORK_DIR, Sandbox, SandboxSpec
from benchctl.sandbox.gateway_dir import GatewayDir
from benchctl.tasks import Task
from benchctl.transcript import TranscriptWriter

if TYPE_CHECKING:  # imported when a run starts (the task decides which it needs)
    from benchctl.gateway.server import Gateway
    from benchctl.limits.run import RunLimits
    from benchctl.targets.runs import RunTargets
    from benchctl.task_import.open_book import RunTaskTests

SOCKET_NAME = "gw.sock"  # the gateway's socket in the run's gateway directory: /gateway/gw.sock in the sandbox


def docker_sandbox(spec: SandboxSpec) -> Sandbox:
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    return DockerSandbox(spec)


def start_gateway(spec: RunSpec, socket_path: Path, transcript: TranscriptWriter, limits: RunLimits) -> Gateway:
    from benchctl.gateway.server import Gateway, GatewayConfig

    cfg = GatewayConfig(model=spec.model, fallback=spec.fallback, socket_path=socket_path, limits=limits)
    gw = Gateway(cfg, transcript)
    gw.start()
    return gw


def followup_name(artifact: str, index: int) -> str:
    """report.md -> report.followup-1.md; notes -> notes.followup-1."""
    p = Path(artifact)
    suffix = "".join(p.suffixes[-1:])
    stem = p.name[: len(p.name) - len(suffix)] if suffix else p.name
    return str(p.with_name(f"{stem}.followup-{index}{suffix}"))


class Cancelled(Exception):
    pass


class LiveRuns:
    """The sandbox and gateway of every run in flight, so a cancel can stop them at once."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self._live: dict[str, tuple[Sandbox | None, Gateway | None]] = {}  # run_id -> (sandbox, gateway)
        self._lock = threading.Lock()

    def register(self, run_id: str, sandbox: Sandbox | None, gateway: Gateway | None) -> None:
        with self._lock:
            self._live[run_id] = (sandbox, gateway)
        if self.cancel.is_set():
            raise Cancelled()

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._live.pop(run_id, None)

    def stop_all(self) -> None:
        with self._lock:
            live = list(self._live.values())
        for sandbox, gateway in live:
            stops = ([sandbox.stop] if sandbox else []) + ([gateway.close] if gateway else [])
            for stop in stops:
                try:  # stopping makes blocked exec/model calls return at once
                    stop()
                except Exception:
                    pass


def run_body(job: RunJob, workdir: Path, transcript: TranscriptWriter, live: LiveRuns) -> RunOutcome:
    """Run `job` to its end. `workdir` receives artifacts/ and harness/ (the driver's run dir
    locally, a scratch dir on a Ray node); `live.cancel` set means stop as soon as possible."""
    spec, task, prepared, meta = job.spec, job.task, job.data, job.meta
    cancel = live.cancel
    (workdir / ARTIFACTS).mkdir(parents=True, exist_ok=True)
    # short and owner-locked while this run lives (AF_UNIX paths must stay < 108 bytes); resume and
    # `benchctl cleanup` remove it after a SIGKILL (sandbox/gateway_dir.py)
    gwdir = GatewayDir(spec.run_id, job.run_dir.parent.parent)
    sockdir = gwdir.mounted
    sandbox: Sandbox | None = None
    gateway: Gateway | None = None
    targets: RunTargets | RunTaskTests | None = None
    result = HarnessResult("error", error="run did not start")
    # the sweep's shared limiter as this run sees it: waits, budget pause, spend and cost caps (benchctl/limits)
    from benchctl.limits.run import RunLimits

    limits = RunLimits(job.limits, transcript, holder=f"{spec.run_id}:{uuid.uuid4().hex[:8]}")
    transcript.listeners.append(limits.on_event)
    try:
        harness = create_harness(spec.harness, spec.options)
        meta["tool_versions"] = dict(harness.tool_versions())
        gateway = start_gateway(spec, sockdir / SOCKET_NAME, transcript, limits)
        live.register(spec.run_id, None, gateway)
        from benchctl.targets.runs import RunTargets  # hidden-behaviour audits; None for other tasks
        from benchctl.task_import.open_book import RunTaskTests  # imported tasks' run_task_tests; else None

        targets = RunTargets.start(task.task_dir, spec, gateway, transcript) or RunTaskTests.start(
            task, spec, prepared.path, gateway, transcript, docker_sandbox
        )
        sandbox = docker_sandbox(
            SandboxSpec(
                image=task.image,
                run_id=spec.run_id,
                data_dir=prepared.path,
                gateway_dir=sockdir,
                extra_mounts=list(harness.mounts()),
                limits=task.limits,
            )
        )
        live.register(spec.run_id, sandbox, gateway)
        if cancel.is_set():
            raise Cancelled()
        sandbox.start()
        meta["image_digest"] = getattr(sandbox, "image_digest", None)
        budget = Budget(time.time(), spec.budget_s, paused=_pause_of(limits))
        meta["started_at"] = budget.start
        gateway.set_deadline(budget.start + budget.seconds)  # the phase starts: its pause is 0
        where = {"node": meta["node"]} if "node" in meta else {}
        transcript.emit(
            "run_start",
            "runner",
            run_id=spec.run_id,
            spec=meta["spec"],
            task_hash=prepared.task_hash,
            image=task.image,
            image_digest=meta["image_digest"],
            budget_s=spec.budget_s,
            **where,
        )
        ctx = HarnessContext(
            run_id=spec.run_id,
            model=spec.model,
            instructions=task.instructions,
            sandbox=sandbox,
            gateway=gateway,
            transcript=transcript,
            budget=budget,
            policies=task.policies,
            run_dir=workdir,
            options={"tool_timeout": task.tool_timeout, **spec.options},
            cancel=cancel,
            target_tools=targets.tools if targets else None,
            token_budget=targets.token_budget if targets else None,
            stop=limits.stop,
        )
        try:
            result = harness.run(ctx)
        finally:  # a crashed harness still leaves its files to look at
            meta["reprompts"] = ctx.stop_state.reprompts
            meta["revision_requests"] = ctx.stop_state.revisions
            if not cancel.is_set():
                _collect(task, sandbox, workdir, meta, transcript)
        if (
            result.status in ("completed", "timeout")
            and task.followups
            and not cancel.is_set()
            and not limits.stop.is_set()
        ):
            meta["followups"] = _followups(task, spec, ctx, harness, result, sandbox, workdir, meta, transcript, cancel)
    except Cancelled:
        result = HarnessResult("error", error="cancelled")
    except Exception as e:
        transcript.emit("error", "runner", message=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        # after a cancel the sandbox is already gone, so failures are its consequence
        result = HarnessResult("error", error="cancelled" if cancel.is_set() else f"{type(e).__name__}: {e}")
    finally:
        # The gateway closes before its summary is read: a call it cuts off as it closes is counted too.
        closers: list[Callable[[], None]] = []
        if sandbox:
            closers.append(sandbox.stop)
        if gateway:
            closers += [gateway.close, lambda: _gateway_summary(gateway, meta)]
        if targets:
            closers.append(lambda: _targets_summary(targets, meta))
        for closer in closers:
            try:
                closer()
            except Exception as e:  # cleanup trouble is recorded, never fatal
                transcript.emit("error", "runner", message=f"cleanup: {type(e).__name__}: {e}")
        live.forget(spec.run_id)
        gwdir.remove()
        limits.close()
    meta["rate_limits"] = limits.summary()
    if limits.stop.is_set():  # a cost cap was reached during this run (it may still have finished first)
        meta["cost_cap"] = {k: v for k, v in limits.stop.info.items() if k != "notice"}
        if result.status == "error" and result.error != "cancelled":
            # its calls were refused after the cap (a harness that does not know the stop fails on them):
            # a finished run stopped by the cap, kept out of scores
            result = HarnessResult(
                "budget_exhausted",
                error=limits.stop.reason,
                exit_code=result.exit_code,
                turns=result.turns,
                session_id=result.session_id,
                details=result.details,
            )
    return RunOutcome(result, meta)


def _pause_of(limits: RunLimits) -> Callable[[], float] | None:
    """The Budget's pause: the rate-limit waits of the current phase, when the task pauses for them."""
    return limits.extension if limits.pause_budget else None


def _collect(
    task: Task, sandbox: Sandbox, path: Path, meta: RunMeta, transcript: TranscriptWriter, dest: Path | None = None
) -> list[str]:
    dest = dest or path / ARTIFACTS
    rep = sandbox.collect([f"{WORK_DIR}/{a}" for a in task.artifacts], dest)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    info = {"copied": rep.copied, "skipped": rep.skipped, "missing": rep.missing}
    transcript.emit("harness_event", "runner", kind="collect", **info)
    if dest == path / ARTIFACTS:
        meta["artifacts"] = got
        meta["collect"] = info
    return got


def _followups(
    task: Task,
    spec: RunSpec,
    ctx: HarnessContext,
    harness: Harness,
    prev: HarnessResult,
    sandbox: Sandbox,
    path: Path,
    meta: RunMeta,
    transcript: TranscriptWriter,
    cancel: threading.Event,
) -> list[dict[str, Any]]:
    out = []
    for i, f in enumerate(task.followups, 1):
        if cancel.is_set():
            break
        seconds = parse_duration(f.budget) if f.budget else spec.budget_s
        ctx.budget = Budget(time.time(), seconds, paused=ctx.budget.paused)
        ctx.stop_state = StopState()
        ctx.gateway.set_deadline(ctx.budget.start + seconds)  # (a new phase: its pause starts at 0)
        transcript.emit("followup", "runner", index=i, prompt=f.prompt, budget_s=seconds)
        prev = harness.followup(ctx, f.prompt, prev)
        tmp = path / f".followup-{i}"
        _collect(task, sandbox, path, meta, transcript, dest=tmp)
        names = []
        for p in sorted(q for q in tmp.rglob("*") if q.is_file()):
            name = followup_name(str(p.relative_to(tmp)), i)
            target = path / ARTIFACTS / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(p), str(target))
            names.append(name)
        shutil.rmtree(tmp, ignore_errors=True)
        meta["artifacts"] = sorted(set(meta.get("artifacts", [])) | set(names))
        out.append(
            {
                "index": i,
                "prompt": f.prompt,
                "status": prev.status,
                "error": prev.error,
                "turns": prev.turns,
                "artifacts": names,
                "reprompts": ctx.stop_state.reprompts,
                "revision_requests": ctx.stop_state.revisions,
            }
        )
    return out


def _targets_summary(targets: RunTargets | RunTaskTests, meta: RunMeta) -> None:
    """Target and auxiliary calls, usage and cost: kept apart from the investigator's own (meta usage/cost);
    for an imported task, its run_task_tests calls (meta task_tests)."""
    meta[targets.meta_key] = targets.summary()
    targets.close()


def _gateway_summary(gateway: Gateway, meta: RunMeta) -> None:
    s = gateway.summary()
    meta["usage"] = Usage(**(s.get("usage") or {}))
    meta["cost_usd"] = s.get("cost_usd")
    meta["served_models"] = dict(s.get("served_models") or {})
    meta["fallbacks"] = list(s.get("fallbacks") or [])
    refusals = s.get("refusals") or 0
    meta["refusals"] = refusals if isinstance(refusals, int) else len(refusals)
    meta["gateway"] = {k: v for k, v in s.items() if k not in ("usage", "served_models", "fallbacks")}
