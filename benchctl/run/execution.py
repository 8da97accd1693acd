"""Executing a resolved sweep: plan (resume), lock the results directory, start the runs on an
executor, show progress, and turn the outcome into the exit code."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from benchctl.run.config import VARIANT_CACHE, ResolvedRun, write_sweep_json
from benchctl.run.sweep import RunSpec
from benchctl.tasks import TaskError, prepare_data

if TYPE_CHECKING:
    from benchctl.executors import Executor
    from benchctl.limits.run import LimitsPlan
    from benchctl.run.runner import Runner


def execute(r: ResolvedRun, progress_mode: str = "auto", executor: Executor | None = None) -> int:
    """Run everything; returns the exit code (0 all finished, 1 some error, 3 the sweep's cost cap kept
    runs from starting, 130 interrupted).

    `executor` decides where runs execute (benchctl/executors): None = this machine (`local`), or
    e.g. a `RayExecutor`."""
    from benchctl.executors.local import LocalExecutor
    from benchctl.run.progress import make_progress
    from benchctl.run.runner import PreparedData, Runner, plan

    if executor is None:
        executor = LocalExecutor()
    decisions = plan(r.out, r.specs)
    pending = [s for s, a in decisions if a != "skip"]
    if pending:
        problem = executor.check(r.task, pending)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    r.out.mkdir(parents=True, exist_ok=True)
    lock = _lock_results(r.out)  # held (referenced) until this function returns
    if lock is None:
        return 2
    decisions = plan(r.out, r.specs)  # again, now that no other process can change it
    pending = [s for s, a in decisions if a != "skip"]
    _warn_changed_skips(r.out, [s for s, a in decisions if a == "skip"])
    write_sweep_json(r)
    data: dict[str | None, PreparedData] = {}
    try:
        for v in {s.variant for s in pending}:
            path, h, counts = prepare_data(r.task, v, r.out / VARIANT_CACHE)
            data[v] = PreparedData(path, h, counts)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if executor.name == "local":  # runs on this machine's Docker and /tmp
        redo = [s.run_id for s, a in decisions if a == "redo"]
        _remove_dead_owners_containers(redo)
        _remove_dead_owners_gateway_dirs(redo)

    limits_plan = _limits_plan(r, executor)
    cap = r.sweep.limits.max_cost
    if pending and limits_plan.limiter.exhausted():
        print(
            f"error: the sweep's cost cap of ${cap:.2f} is reached: the runs in {r.out} spent "
            f"${limits_plan.limiter.spent():.2f}; {len(pending)} run(s) not started. Fix: raise --max-cost (or "
            f"[limits] max_cost in the sweep file) to continue",
            file=sys.stderr,
        )
        executor.close()
        return EXIT_COST_CAP
    prog = make_progress(len(r.specs), progress_mode)
    runner = Runner(
        r.task,
        r.out,
        data,
        concurrency=executor.parallelism(r.sweep.concurrency),
        progress=prog,
        executor=executor,
        limits=limits_plan,
    )
    restore = _install_signals(runner)
    try:
        with prog:
            results = runner.run_all(r.specs)
        try:
            spent: float | None = limits_plan.limiter.spent()
        except Exception:  # the limiter went away (its Ray node died): the runs are recorded anyway
            spent = None
    finally:
        restore()
        executor.close()
    if runner.cancel.is_set():
        print("interrupted: unfinished runs will be redone when you rerun the same command", file=sys.stderr)
        return 130
    if cap is not None and spent is not None and progress_mode != "quiet":
        print(
            f"spent ${spent:.4f} of the sweep's ${cap:.2f} cost cap (priced calls of every run in {r.out})",
            file=sys.stderr,
        )
    if runner.not_started:
        print(
            f"the sweep's cost cap of ${cap:.2f} is reached: {len(runner.not_started)} run(s) not started; "
            f"raise --max-cost and rerun the same command to continue",
            file=sys.stderr,
        )
        return EXIT_COST_CAP
    if progress_mode != "quiet":
        # --judge is required: a hint without it fails when copied
        print(
            f"results in {r.out}; next: benchctl grade {r.out} --judge MODEL && benchctl report {r.out}",
            file=sys.stderr,
        )
    return 1 if any(m is None or m.get("status") == "error" for _, m in results) else 0


EXIT_COST_CAP = 3  # the sweep's cost cap kept runs from starting


def _limits_plan(r: ResolvedRun, executor: Executor) -> LimitsPlan:
    """The sweep's one limiter (on this machine, or a Ray actor every node shares), its spend
    continuing from what the runs already on disk spent, and the task's per-run settings."""
    from benchctl.limits.run import LimitsPlan
    from benchctl.limits.spend import spent_on_disk

    limits = r.sweep.limits
    spent = spent_on_disk(r.out) if limits.max_cost is not None else 0.0
    return LimitsPlan(
        executor.limiter(limits, spent),
        limits,
        pause_budget=r.task.pause_budget_on_rate_limit,
        run_max_cost=r.task.max_cost,
    )


def _warn_changed_skips(out: Path, skipped: list[RunSpec]) -> None:
    """A finished run is skipped by its id, but the id leaves out the fallback model and the
    harness options: say so when they differ from what the finished run recorded, rather
    than silently reusing a run made under other settings."""
    from benchctl.layout import read_meta, run_dir

    for spec in skipped:
        recorded = (read_meta(run_dir(out, spec.run_id)) or {}).get("spec", {})
        changed = [k for k in ("fallback", "options") if k in recorded and recorded[k] != getattr(spec, k)]
        if changed:
            print(
                f"warning: {spec.run_id} is finished and skipped, but it was made with a different "
                f"{' and '.join(changed)}; use another --out (or delete the run) to redo it",
                file=sys.stderr,
            )


LOCK_FILE = ".benchctl-run.lock"


def _lock_results(out: Path) -> IO[str] | None:
    """Hold an exclusive lock on the results directory for this process's lifetime.

    Resume skips finished runs and redoes the rest, which is only safe for one process at a
    time: two `benchctl run` processes on one --out would both redo the same unfinished runs.
    The lock (flock) is released by the kernel when the process exits, even on SIGKILL, so a
    killed run never leaves a stale lock behind. Returns the open lock file, or None (with an
    error printed) when another process holds it.
    """
    import fcntl

    f = open(out / LOCK_FILE, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        print(
            f"error: {out} is in use by another `benchctl run` ({holder}); wait for it to finish, or use another --out",
            file=sys.stderr,
        )
        return None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    f.flush()
    return f


def _remove_dead_owners_containers(run_ids: list[str]) -> None:
    """A SIGKILLed earlier attempt may have left its container; remove it if its owner is gone."""
    if not run_ids:
        return
    try:
        from benchctl.sandbox.cleanup import remove_strays
        from benchctl.sandbox.docker_client import docker_client

        with closing(docker_client()) as client:
            for rid in run_ids:
                remove_strays(client, run_id=rid)
    except Exception:
        pass  # best effort: `benchctl doctor` finds what is left


def _remove_dead_owners_gateway_dirs(run_ids: list[str]) -> None:
    """A SIGKILLed earlier attempt left its gateway directory in /tmp; remove it if its owner is gone."""
    from benchctl.sandbox import gateway_dir

    for rid in run_ids:
        try:
            gateway_dir.remove_stale(run_id=rid)
        except OSError:
            pass  # best effort: `benchctl cleanup` finds what is left


def _install_signals(runner: Runner) -> Callable[[], None]:
    """First SIGINT/SIGTERM: cancel runs, stop every sandbox and gateway, let runs record it.
    A second one: stop waiting and exit at once (containers are still removed)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    from benchctl.sandbox.cleanup import remove_all_live

    hits = {"n": 0}

    def handler(sig: int, frame: Any) -> None:
        hits["n"] += 1
        threading.Thread(target=runner.request_cancel, daemon=True).start()
        if hits["n"] > 1:
            remove_all_live()
            os._exit(130)

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, handler)

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)
        remove_all_live()

    return restore
