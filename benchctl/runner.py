"""Runs: one run's lifecycle, a sweep's worth of them concurrently, resume and cancellation.

One run = a fresh gateway (unix socket in a short, owner-locked /tmp dir mounted at /gateway:
sandbox/gateway_dir.py) + a fresh network-less sandbox + a harness driving the agent until it
stops or the budget ends, then follow-ups, artifact collection and `meta.json` (atomic, written
last). Resume skips runs whose meta.json has a final status and moves any other attempt's files
to `attempts/<n>/`.

The sandbox and the gateway plug in through factories, so the lifecycle is the same code with
Docker and with fakes.
"""
from __future__ import annotations

import shutil
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from benchctl import __version__
from benchctl.jsonio import write_json_atomic
from benchctl.layout import ARTIFACTS, FINAL_STATUSES, META, META_SCHEMA, TRANSCRIPT, RunMeta, read_meta, run_dir
from benchctl.policies import Budget, StopState, parse_duration
from benchctl.sandbox.base import Sandbox, SandboxSpec, WORK_DIR
from benchctl.sandbox.gateway_dir import GatewayDir
from benchctl.sweep import RunSpec
from benchctl.tasks import Task
from benchctl.transcript import TranscriptWriter, WarningCounter
from harnesses import registry
from harnesses.base import HarnessContext, HarnessResult

SOCKET_NAME = "gw.sock"
ATTEMPTS = "attempts"

SandboxFactory = Callable[[SandboxSpec], Sandbox]
GatewayFactory = Callable[[RunSpec, Path, TranscriptWriter], Any]
Action = Literal["skip", "new", "redo"]


# ---- resume decisions (pure, no Docker) ----------------------------------------------------

def resume_action(path: Path) -> Action:
    """skip a finished run, start a new one, or redo an unfinished/errored one."""
    if not path.exists() or not any(p for p in path.iterdir() if p.name != ATTEMPTS):
        return "new"
    try:
        meta = read_meta(path)
    except Exception:          # a torn or corrupt meta.json is not a finished run
        meta = None
    if meta and meta.get("status") in FINAL_STATUSES:
        return "skip"
    return "redo"


def plan(out: Path, specs: list[RunSpec]) -> list[tuple[RunSpec, Action]]:
    return [(s, resume_action(run_dir(out, s.run_id))) for s in specs]


def move_attempt_aside(path: Path) -> Path:
    """Move an unfinished attempt's files to attempts/<n>/ (n = 1, 2, ...) and return that dir."""
    attempts = path / ATTEMPTS
    n = 1
    while (attempts / str(n)).exists():
        n += 1
    dest = attempts / str(n)
    dest.mkdir(parents=True)
    for p in path.iterdir():
        if p.name != ATTEMPTS:
            shutil.move(str(p), str(dest / p.name))
    return dest


def followup_name(artifact: str, index: int) -> str:
    """report.md -> report.followup-1.md; notes -> notes.followup-1."""
    p = Path(artifact)
    suffix = "".join(p.suffixes[-1:])
    stem = p.name[: len(p.name) - len(suffix)] if suffix else p.name
    return str(p.with_name(f"{stem}.followup-{index}{suffix}"))


# ---- default factories -------------------------------------------------------------------

def docker_sandbox(spec: SandboxSpec) -> Sandbox:
    from benchctl.sandbox.docker_sandbox import DockerSandbox
    return DockerSandbox(spec)


def real_gateway(spec: RunSpec, socket_path: Path, transcript: TranscriptWriter) -> Any:
    from benchctl.gateway.server import Gateway, GatewayConfig
    cfg = GatewayConfig(model=spec.model, fallback=spec.fallback, socket_path=socket_path)
    gw = Gateway(cfg, transcript)
    gw.start()
    return gw


# ---- the runner --------------------------------------------------------------------------

@dataclass
class PreparedData:
    path: Path | None
    task_hash: str
    counts: dict[str, int] = field(default_factory=dict)


class Runner:
    def __init__(self, task: Task, out: Path, data: dict[str | None, PreparedData], *,
                 concurrency: int = 1, progress: Any = None, sandbox_factory: SandboxFactory = docker_sandbox,
                 gateway_factory: GatewayFactory = real_gateway) -> None:
        self.task, self.out, self.data = task, Path(out), data
        self.concurrency = max(1, concurrency)
        self.progress = progress
        self.sandbox_factory, self.gateway_factory = sandbox_factory, gateway_factory
        self.cancel = threading.Event()
        self._live: dict[str, tuple[Any, Any]] = {}     # run_id -> (sandbox, gateway)
        self._lock = threading.Lock()
        from benchctl.task_import.run_checks import pin_meta
        self._pin = pin_meta(task)      # an imported task's pin and what was verified against it; else None

    # cancellation: called from a signal handler's thread
    def request_cancel(self) -> None:
        self.cancel.set()
        with self._lock:
            live = list(self._live.values())
        for sandbox, gateway in live:
            for thing in (sandbox, gateway):
                if thing is None:
                    continue
                try:       # stopping makes blocked exec/model calls return at once
                    (thing.stop if hasattr(thing, "stop") else thing.close)()
                except Exception:
                    pass

    def run_all(self, specs: list[RunSpec]) -> list[tuple[RunSpec, RunMeta | None]]:
        decisions = plan(self.out, specs)
        todo = [s for s, a in decisions if a != "skip"]
        for s, a in decisions:
            if a == "skip" and self.progress:
                self.progress.skipped(s, read_meta(run_dir(self.out, s.run_id)))
        results: list[tuple[RunSpec, RunMeta | None]] = []
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="run") as pool:
            futures = [(s, pool.submit(self._run_guarded, s)) for s in todo]
            for s, f in futures:
                results.append((s, f.result()))
        return results

    def _run_guarded(self, spec: RunSpec) -> RunMeta | None:
        if self.cancel.is_set():
            return None            # never started: nothing written, resume will do it
        try:
            return self.run_one(spec)
        except Exception as e:     # e.g. the results disk is full: other runs go on; no meta = redo
            print(f"run {spec.run_id} could not be recorded: {type(e).__name__}: {e}", file=sys.stderr)
            return None

    def run_one(self, spec: RunSpec) -> RunMeta:
        path = run_dir(self.out, spec.run_id)
        if resume_action(path) == "redo":
            move_attempt_aside(path)
        (path / ARTIFACTS).mkdir(parents=True, exist_ok=True)
        transcript = TranscriptWriter(path / TRANSCRIPT)
        warnings = WarningCounter()            # every `warning` event, listed in meta.json
        transcript.listeners.append(warnings)
        if self.progress:
            self.progress.started(spec)
            transcript.listeners.append(lambda ev, s=spec: self.progress.event(s, ev))
        prepared = self.data[spec.variant]
        meta: RunMeta = self._base_meta(spec, prepared)
        gwdir = GatewayDir(spec.run_id, self.out)   # locked while this run lives; resume/cleanup remove it after a SIGKILL
        sockdir = gwdir.mounted
        sandbox = gateway = targets = None
        result = HarnessResult("error", error="run did not start")
        try:
            harness = registry.create(spec.harness, spec.options)
            meta["tool_versions"] = dict(harness.tool_versions())
            gateway = self.gateway_factory(spec, sockdir / SOCKET_NAME, transcript)
            self._register(spec.run_id, None, gateway)
            from benchctl.targets.runs import RunTargets     # hidden-behaviour audits; None for other tasks
            from benchctl.task_import.open_book import RunTaskTests   # imported tasks' run_task_tests; else None
            targets = RunTargets.start(self.task.task_dir, spec, gateway, transcript) or RunTaskTests.start(
                self.task, spec, prepared.path, gateway, transcript, self.sandbox_factory)
            sandbox = self.sandbox_factory(SandboxSpec(
                image=self.task.image, run_id=spec.run_id, data_dir=prepared.path, gateway_dir=sockdir,
                extra_mounts=list(harness.mounts()), limits=self.task.limits))
            self._register(spec.run_id, sandbox, gateway)
            if self.cancel.is_set():
                raise _Cancelled()
            sandbox.start()
            meta["image_digest"] = getattr(sandbox, "image_digest", None)
            budget = Budget(time.time(), spec.budget_s)
            meta["started_at"] = budget.start
            if hasattr(gateway, "set_deadline"):
                gateway.set_deadline(budget.deadline)
            transcript.emit("run_start", "runner", run_id=spec.run_id, spec=meta["spec"], task_hash=prepared.task_hash,
                            image=self.task.image, image_digest=meta["image_digest"], budget_s=spec.budget_s)
            ctx = HarnessContext(run_id=spec.run_id, model=spec.model, instructions=self.task.instructions,
                                 sandbox=sandbox, gateway=gateway, transcript=transcript, budget=budget,
                                 policies=self.task.policies, run_dir=path,
                                 options={"tool_timeout": self.task.tool_timeout, **spec.options},
                                 cancel=self.cancel, target_tools=targets.tools if targets else None,
                                 token_budget=targets.token_budget if targets else None)
            try:
                result = harness.run(ctx)
            finally:       # a crashed harness still leaves its files to look at
                meta["reprompts"] = ctx.stop_state.reprompts
                meta["revision_requests"] = ctx.stop_state.revisions
                if not self.cancel.is_set():
                    self._collect(sandbox, path, meta, transcript)
            if result.status in ("completed", "timeout") and self.task.followups and not self.cancel.is_set():
                meta["followups"] = self._followups(spec, ctx, harness, result, sandbox, path, meta, transcript)
        except _Cancelled:
            result = HarnessResult("error", error="cancelled")
        except Exception as e:
            transcript.emit("error", "runner", message=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
            # after a cancel the sandbox is already gone, so failures are its consequence
            result = HarnessResult("error", error="cancelled" if self.cancel.is_set() else f"{type(e).__name__}: {e}")
        finally:
            # The gateway closes before its summary is read: a call it cuts off as it closes is counted too.
            for closer in (lambda: sandbox and sandbox.stop(), lambda: gateway and gateway.close(),
                           lambda: gateway and self._gateway_summary(gateway, meta),
                           lambda: targets and self._targets_summary(targets, meta)):
                try:
                    closer()
                except Exception as e:   # cleanup trouble is recorded, never fatal
                    transcript.emit("error", "runner", message=f"cleanup: {type(e).__name__}: {e}")
            with self._lock:
                self._live.pop(spec.run_id, None)
            gwdir.remove()
        if self.cancel.is_set() and result.status != "error":
            result = HarnessResult("error", error="cancelled", turns=result.turns)   # cut short: redo on resume
        meta["warnings"] = warnings.summary()
        self._finish(meta, result, path, transcript)
        if self.progress:
            self.progress.finished(spec, meta)
        return meta

    # ---- pieces ----------------------------------------------------------------------------

    def _register(self, run_id: str, sandbox: Any, gateway: Any) -> None:
        with self._lock:
            self._live[run_id] = (sandbox, gateway)
        if self.cancel.is_set():
            raise _Cancelled()

    def _base_meta(self, spec: RunSpec, prepared: PreparedData) -> RunMeta:
        s = spec.to_dict()
        s.update(task_dir=str(self.task.task_dir), task_name=self.task.name, variant_counts=prepared.counts,
                 artifacts=list(self.task.artifacts))
        meta = RunMeta(schema=META_SCHEMA, run_id=spec.run_id, status="running", spec=s, task=self.task.name,
                       harness=spec.harness, model=spec.model, budget=spec.budget, budget_s=spec.budget_s,
                       seed=spec.seed, variant=spec.variant, task_hash=prepared.task_hash, image=self.task.image,
                       image_digest=None, tool_versions={}, benchctl_version=__version__, started_at=time.time(),
                       usage={}, cost_usd=None, served_models={}, fallbacks=[], refusals=0, reprompts=0,
                       revision_requests=0, turns=0, artifacts=[], error=None, exit_code=None)
        if self._pin is not None:
            meta["pin"] = dict(self._pin)
        return meta

    def _collect(self, sandbox: Sandbox, path: Path, meta: RunMeta, transcript: TranscriptWriter,
                 dest: Path | None = None) -> list[str]:
        dest = dest or path / ARTIFACTS
        rep = sandbox.collect([f"{WORK_DIR}/{a}" for a in self.task.artifacts], dest)
        got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        info = {"copied": rep.copied, "skipped": rep.skipped, "missing": rep.missing}
        transcript.emit("harness_event", "runner", kind="collect", **info)
        if dest == path / ARTIFACTS:
            meta["artifacts"] = got
            meta["collect"] = info
        return got

    def _followups(self, spec: RunSpec, ctx: HarnessContext, harness: Any, prev: HarnessResult, sandbox: Sandbox,
                   path: Path, meta: RunMeta, transcript: TranscriptWriter) -> list[dict[str, Any]]:
        out = []
        for i, f in enumerate(self.task.followups, 1):
            if self.cancel.is_set():
                break
            seconds = parse_duration(f.budget) if f.budget else spec.budget_s
            ctx.budget = Budget(time.time(), seconds)
            ctx.stop_state = StopState()
            if hasattr(ctx.gateway, "set_deadline"):
                ctx.gateway.set_deadline(ctx.budget.deadline)
            transcript.emit("followup", "runner", index=i, prompt=f.prompt, budget_s=seconds)
            prev = harness.followup(ctx, f.prompt, prev)
            tmp = path / f".followup-{i}"
            self._collect(sandbox, path, meta, transcript, dest=tmp)
            names = []
            for p in sorted(q for q in tmp.rglob("*") if q.is_file()):
                name = followup_name(str(p.relative_to(tmp)), i)
                target = path / ARTIFACTS / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(p), str(target))
                names.append(name)
            shutil.rmtree(tmp, ignore_errors=True)
            meta["artifacts"] = sorted(set(meta.get("artifacts", [])) | set(names))
            out.append({"index": i, "prompt": f.prompt, "status": prev.status, "error": prev.error,
                        "turns": prev.turns, "artifacts": names, "reprompts": ctx.stop_state.reprompts,
                        "revision_requests": ctx.stop_state.revisions})
        return out

    def _targets_summary(self, targets: Any, meta: RunMeta) -> None:
        """Target and auxiliary calls, usage and cost: kept apart from the investigator's own (meta usage/cost);
        for an imported task, its run_task_tests calls (meta task_tests)."""
        meta[targets.meta_key] = targets.summary()
        targets.close()

    def _gateway_summary(self, gateway: Any, meta: RunMeta) -> None:
        s = gateway.summary() if hasattr(gateway, "summary") else {}
        meta["usage"] = dict(s.get("usage") or {})
        meta["cost_usd"] = s.get("cost_usd")
        meta["served_models"] = dict(s.get("served_models") or {})
        meta["fallbacks"] = list(s.get("fallbacks") or [])
        refusals = s.get("refusals") or 0
        meta["refusals"] = refusals if isinstance(refusals, int) else len(refusals)
        meta["gateway"] = {k: v for k, v in s.items() if k not in ("usage", "served_models", "fallbacks")}

    def _finish(self, meta: RunMeta, result: HarnessResult, path: Path, transcript: TranscriptWriter) -> None:
        ended = time.time()
        meta.update(status=result.status, error=result.error, exit_code=result.exit_code, turns=result.turns,
                    ended_at=ended, elapsed_s=round(ended - meta.get("started_at", ended), 3))
        if result.details:
            meta["harness_details"] = result.details
        transcript.emit("run_end", "runner", status=result.status, error=result.error, usage=meta.get("usage"),
                        cost_usd=meta.get("cost_usd"), turns=result.turns, elapsed_s=meta["elapsed_s"])
        transcript.close()
        write_json_atomic(path / META, meta)      # last: this is what makes the run finished


class _Cancelled(Exception):
    pass
