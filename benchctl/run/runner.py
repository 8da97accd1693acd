"""Runs: one run's record on disk, a sweep's worth of them concurrently, resume and cancellation.

The runner owns the results layout: it moves an unfinished attempt aside, opens the run's
transcript, hands the run to an executor (benchctl/executors: `local` threads or `ray` nodes,
which start the gateway, sandbox and harness and stream events back), and writes `meta.json`
(atomic, last). Resume skips runs whose meta.json has a final status and moves any other
attempt's files to `attempts/<n>/`. A run an executor lost (a Ray node died) is recorded as an
`error` attempt, moved aside and run again, up to the executor's `retries`.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchctl import __version__
from benchctl.executors import Executor, PreparedData, RunJob, RunOutcome
from benchctl.executors.local import LocalExecutor
from benchctl.executors.run_body import followup_name  # noqa: F401  (re-exported: tests and callers use it)
from benchctl.harness import HarnessResult
from benchctl.jsonio import write_json_atomic
from benchctl.layout import ARTIFACTS, FINAL_STATUSES, META, META_SCHEMA, TRANSCRIPT, RunMeta, read_meta, run_dir
from benchctl.run.sweep import RunSpec
from benchctl.tasks import Task
from benchctl.transcript import ToolCallCounter, TranscriptWriter, WarningCounter

if TYPE_CHECKING:
    from benchctl.limits.run import LimitsPlan

ATTEMPTS = "attempts"

Action = Literal["skip", "new", "redo"]


# ---- resume decisions (pure, no Docker) ----------------------------------------------------


def resume_action(path: Path) -> Action:
    """skip a finished run, start a new one, or redo an unfinished/errored one."""
    if not path.exists() or not any(p for p in path.iterdir() if p.name != ATTEMPTS):
        return "new"
    try:
        meta = read_meta(path)
    except Exception:  # a torn or corrupt meta.json is not a finished run
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


# ---- the runner --------------------------------------------------------------------------


class Runner:
    def __init__(
        self,
        task: Task,
        out: Path,
        data: dict[str | None, PreparedData],
        *,
        concurrency: int = 1,
        progress: Any = None,
        executor: Executor | None = None,
        limits: LimitsPlan | None = None,
    ) -> None:
        self.task, self.out, self.data = task, Path(out), data
        self.concurrency = max(1, concurrency)
        self.progress = progress
        self.executor: Executor = executor or LocalExecutor()
        self.limits = limits  # the sweep's shared limiter and caps (None: none)
        self.not_started: list[str] = []  # runs the sweep's cost cap kept from starting
        self.cancel = threading.Event()
        from benchctl.task_import.run_checks import pin_meta

        self._pin = pin_meta(task)  # an imported task's pin and what was verified against it; else None

    # cancellation: called from a signal handler's thread
    def request_cancel(self) -> None:
        self.cancel.set()
        self.executor.stop_all()

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
            return None  # never started: nothing written, resume will do it
        if self.limits is not None and self.limits.limiter.exhausted():
            self.not_started.append(spec.run_id)  # the sweep's money is spent: nothing written
            if self.progress and hasattr(self.progress, "not_started"):
                self.progress.not_started(spec, "the sweep's cost cap is reached")
            return None
        try:
            meta, lost = self._attempt(spec)
            retries = self.executor.retries
            while lost and retries > 0 and not self.cancel.is_set():
                retries -= 1  # the lost attempt is recorded as `error`; _attempt moves it aside and redoes it
                meta, lost = self._attempt(spec)
            return meta
        except Exception as e:  # e.g. the results disk is full: other runs go on; no meta = redo
            print(f"run {spec.run_id} could not be recorded: {type(e).__name__}: {e}", file=sys.stderr)
            return None

    def run_one(self, spec: RunSpec) -> RunMeta:
        return self._attempt(spec)[0]

    def _attempt(self, spec: RunSpec) -> tuple[RunMeta, bool]:
        """One attempt at a run; also says whether the executor lost it (so it may be redone)."""
        path = run_dir(self.out, spec.run_id)
        if resume_action(path) == "redo":
            move_attempt_aside(path)
        (path / ARTIFACTS).mkdir(parents=True, exist_ok=True)
        transcript = TranscriptWriter(path / TRANSCRIPT)
        warnings = WarningCounter()  # every `warning` event (streamed ones too), listed in meta.json
        tool_calls = ToolCallCounter()  # meta.json `tool_calls`: what the report's tool-use table reads
        transcript.listeners += [warnings, tool_calls]
        if self.progress:
            self.progress.started(spec)
            transcript.listeners.append(lambda ev, s=spec: self.progress.event(s, ev))
        prepared = self.data[spec.variant]
        job = RunJob(spec, self.task, prepared, path, self._base_meta(spec, prepared), self.limits)
        try:
            outcome = self.executor.execute(job, transcript, self.cancel)
        except Exception as e:  # the executor itself failed (not the run): record it, redo on resume
            transcript.emit("error", "runner", message=f"executor: {type(e).__name__}: {e}")
            outcome = RunOutcome(HarnessResult("error", error=f"{type(e).__name__}: {e}"), job.meta)
        meta, result = outcome.meta, outcome.result
        if self.cancel.is_set() and result.status != "error":
            result = HarnessResult("error", error="cancelled", turns=result.turns)  # cut short: redo on resume
        meta["warnings"] = warnings.summary()
        meta["tool_calls"] = tool_calls.summary()
        self._finish(meta, result, path, transcript)
        if self.progress:
            self.progress.finished(spec, meta)
        return meta, outcome.retryable

    # ---- pieces ----------------------------------------------------------------------------

    def _base_meta(self, spec: RunSpec, prepared: PreparedData) -> RunMeta:
        s = spec.to_dict()
        s.update(
            task_dir=str(self.task.task_dir),
            task_name=self.task.name,
            variant_counts=prepared.counts,
            artifacts=list(self.task.artifacts),
        )
        meta = RunMeta(
            schema=META_SCHEMA,
            run_id=spec.run_id,
            status="running",
            spec=s,
            task=self.task.name,
            harness=spec.harness,
            model=spec.model,
            budget=spec.budget,
            budget_s=spec.budget_s,
            seed=spec.seed,
            variant=spec.variant,
            task_hash=prepared.task_hash,
            image=self.task.image,
            image_digest=None,
            tool_versions={},
            benchctl_version=__version__,
            started_at=time.time(),
            usage={},
            cost_usd=None,
            served_models={},
            fallbacks=[],
            refusals=0,
            reprompts=0,
            revision_requests=0,
            turns=0,
            artifacts=[],
            error=None,
            exit_code=None,
        )
        if self._pin is not None:
            meta["pin"] = dict(self._pin)
        return meta

    def _finish(self, meta: RunMeta, result: HarnessResult, path: Path, transcript: TranscriptWriter) -> None:
        ended = time.time()
        meta.update(
            {
                "status": result.status,
                "error": result.error,
                "exit_code": result.exit_code,
                "turns": result.turns,
                "ended_at": ended,
                "elapsed_s": round(ended - meta.get("started_at", ended), 3),
            }
        )
        if result.details:
            meta["harness_details"] = result.details
        transcript.emit(
            "run_end",
            "runner",
            status=result.status,
            error=result.error,
            usage=meta.get("usage"),
            cost_usd=meta.get("cost_usd"),
            turns=result.turns,
            elapsed_s=meta["elapsed_s"],
            **({"rate_limits": meta["rate_limits"]} if "rate_limits" in meta else {}),
        )
        transcript.close()
        write_json_atomic(path / META, meta)  # last: this is what makes the run finished
