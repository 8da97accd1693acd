"""Turning `benchctl run` arguments (or a sweep file) into validated runs, then executing them.

All validation happens here, before anything starts: a bad task file, unknown harness, bad model
id, missing API key, unknown variant or missing sandbox image is a `RunError` with the fix, and
nothing is written into the results directory.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl import __version__
from benchctl.jsonio import read_json, write_json_atomic
from benchctl.policies import parse_duration
from benchctl.preflight import RunError, check_model  # RunError: re-exported (commands/run.py, tests)
from benchctl.sweep import RunSpec, SweepConfig, SweepError, expand, load_sweep_file, normalize_variant, seeds_list
from benchctl.tasks import TASK_FILE, Task, TaskError, check_limits_fit_host, load_task, prepare_data

SWEEP_FILE = "sweep.json"
VARIANT_CACHE = ".variants"


@dataclass
class ResolvedRun:
    task: Task
    sweep: SweepConfig
    specs: list[RunSpec]
    out: Path


def _origin(flag: str, given: bool, sweep_file: Path | None, key: str) -> str:
    """Where a value came from, for error messages: the command-line flag that gave it, or else
    the sweep file's key (never a flag the user did not pass)."""
    return flag if given or sweep_file is None else f"{sweep_file}: key `{key}`"


def resolve_config(
    *,
    task: Path | None,
    models: list[str],
    harnesses: list[str],
    budgets: list[str],
    seeds: int | None,
    out: Path | None,
    concurrency: int | None,
    fallback: str | None,
    variants: list[str],
    sweep: Path | None,
    tools: list[str] | None = None,
    allow_changed: bool = False,
    max_cost: float | None = None,
    max_connections: int | None = None,
    allow_unpriced: bool = False,
) -> ResolvedRun:
    from harnesses import registry

    sweep_file = sweep.expanduser().resolve() if sweep is not None else None
    try:
        if sweep is not None:
            cfg = load_sweep_file(sweep)
            if task is not None:
                cfg.task_dir = task.resolve()
            if out is not None:
                cfg.out = out.resolve()
            # Options given on the command line (None / empty = not given) win over the file.
            if concurrency is not None:
                cfg.concurrency = concurrency
            if models:
                cfg.models = list(models)
            if harnesses:
                cfg.harnesses = list(harnesses)
            if budgets:
                cfg.budgets = list(budgets)
            if variants:
                cfg.variants = [normalize_variant(v) for v in variants]
            if fallback:
                cfg.fallback = fallback
        else:
            if task is None:
                raise RunError("give a task directory (benchctl run TASK --model M ...) or --sweep FILE")
            cfg = SweepConfig(
                task_dir=task.resolve(),
                models=list(models),
                harnesses=list(harnesses) or ["react"],
                budgets=list(budgets),
                variants=[normalize_variant(v) for v in variants] or [None],
                concurrency=1 if concurrency is None else concurrency,
                fallback=fallback,
                out=out.resolve() if out else None,
            )
    except SweepError as e:
        raise RunError(str(e)) from None
    if seeds is not None:
        try:
            cfg.seeds = seeds_list(seeds)
        except SweepError as e:
            raise RunError(f"--seeds: {e}") from None
    if tools:
        cfg.tools = list(tools)
    from benchctl.limits.config import LimitsConfigError, apply_flags

    try:
        apply_flags(cfg.limits, max_cost=max_cost, max_connections=max_connections, allow_unpriced=allow_unpriced)
    except LimitsConfigError as e:
        raise RunError(str(e)) from None
    where = {
        k: _origin(flag, given, sweep_file, k)
        for k, flag, given in (
            ("task", "TASK", task is not None),
            ("models", "--model", bool(models)),
            ("harnesses", "--harness", bool(harnesses)),
            ("budgets", "--budget", bool(budgets)),
            ("variants", "--variant", bool(variants)),
            ("fallback", "--fallback", bool(fallback)),
            ("tools", "--tools", bool(tools)),
        )
    }
    t = _load_task(cfg.task_dir, where["task"] if task is None and sweep_file is not None else None)
    try:  # an imported task's files must still match their pin (benchctl.task_import)
        from benchctl.task_import.run_checks import check_before_run

        check_before_run(t, allow_changed)
    except ValueError as e:
        raise RunError(str(e)) from None
    if not cfg.models:
        raise RunError("no model: pass --model provider/name (e.g. --model scripted/configs/demo/investigator.json)")
    for m in cfg.models:
        check_model(m, where["models"])
    if cfg.fallback:
        check_model(cfg.fallback, where["fallback"])
    for h in cfg.harnesses:
        _check_harness(registry, h, t, cfg, where["harnesses"], sweep_file)
    if cfg.budgets:
        for b in cfg.budgets:
            _check_budget(b, where["budgets"])
    elif t.budgets:  # already checked by load_task, which names the task file
        cfg.budgets = list(t.budgets)
    else:
        raise RunError(f"no budget: pass --budget 10m (the task {t.task_file} lists no `budgets`)")
    for v in cfg.variants:
        if v is not None and v not in t.variants:
            known = ", ".join(sorted(t.variants)) or "none defined"
            raise RunError(
                f"{where['variants']} {v!r}: not in {t.task_file} [variants] ({known}). "
                f"Fix: use one of those, or base for the unmodified data"
            )
    if cfg.out is None:
        raise RunError("no results directory: pass --out DIR (rerun the same command to resume)")
    if cfg.concurrency < 1:
        raise RunError("--concurrency must be >= 1")
    specs = expand(cfg, t.name, cfg.budgets, t.options_for)
    try:  # hidden-behaviour tasks: one run per tool configuration (benchctl.targets)
        from benchctl.targets.runs import expand_tool_configs

        specs = expand_tool_configs(t.task_dir, specs, cfg.tools, origin=where["tools"])
    except ValueError as e:
        raise RunError(str(e)) from None
    _check_priced(t, cfg, max_cost is not None, sweep_file)
    return ResolvedRun(task=t, sweep=cfg, specs=specs, out=cfg.out)


def _check_priced(task: Task, cfg: SweepConfig, flag: bool, sweep_file: Path | None) -> None:
    """A cost cap counts priced spend: a model without a price would spend uncounted, so a cap
    refuses to start with one unless `allow_unpriced` (their calls then count $0 toward it)."""
    if cfg.limits.allow_unpriced or (cfg.limits.max_cost is None and task.max_cost is None):
        return
    from benchctl.limits.config import refuse_unpriced

    models = [*cfg.models, *([cfg.fallback] if cfg.fallback else [])]
    from benchctl.targets.spec import load_hidden_behaviour  # audits: their target and auxiliary models spend too

    hb = load_hidden_behaviour(task.task_dir)
    if hb is not None:
        models += [m for m in (hb.target.model, *(c.auxiliary_model for c in hb.tools.configs.values())) if m]
    if cfg.limits.max_cost is not None:
        cap = "--max-cost" if flag or sweep_file is None else f"{sweep_file}: key `limits.max_cost`"
    else:
        cap = f"{task.task_file}: key `limits.max_cost`"
    try:
        refuse_unpriced(models, cap)
    except ValueError as e:  # unpriced models, or a broken price file (BENCHCTL_PRICES)
        raise RunError(str(e)) from None


def _load_task(task_dir: Path, sweep_origin: str | None) -> Task:
    """The task, with its [limits] checked against this machine. A task path from a sweep file
    that holds no task file is that sweep file's error."""
    if sweep_origin is not None and not (task_dir.is_file() or (task_dir / TASK_FILE).is_file()):
        raise RunError(
            f"{sweep_origin}: {task_dir} has no {TASK_FILE}. Fix: give the task directory, relative to the sweep file"
        )
    try:
        t = load_task(task_dir)
        check_limits_fit_host(t)
    except TaskError as e:
        raise RunError(str(e)) from None
    return t


def _check_harness(
    registry: Any, name: str, task: Task, cfg: SweepConfig, origin: str, sweep_file: Path | None
) -> None:
    """A known harness whose agent binary is found with the options it will get."""
    try:
        registry.check(name)
    except registry.UnknownHarness as e:
        raise RunError(f"{origin}: {e}") from None
    _check_tool_timeout_option(name, task, cfg, sweep_file)
    try:
        registry.create(name, {**task.options_for(name), **cfg.harness_options}).mounts()  # finds agent binaries
    except Exception as e:
        sources = ([f"{task.task_file} [harness_options]"] if task.options_for(name) else []) + (
            [f"{sweep_file} [harness_options]"] if cfg.harness_options and sweep_file else []
        )
        raise RunError(
            f"{origin} {name}: {e}" + (f" (with the options from {' and '.join(sources)})" if sources else "")
        ) from None


def _check_tool_timeout_option(name: str, task: Task, cfg: SweepConfig, sweep_file: Path | None) -> None:
    """`tool_timeout` in [harness_options] overrides the task's own `tool_timeout` (seconds per
    tool call); a bad one would only fail once the run has started."""
    sub = task.harness_options.get(name)
    sources = [
        (sweep_file, "harness_options", cfg.harness_options),
        (task.task_file, f"harness_options.{name}", sub if isinstance(sub, dict) else {}),
        (task.task_file, "harness_options", task.harness_options),
    ]
    for file, table, opts in sources:
        if "tool_timeout" not in opts:
            continue
        v = opts["tool_timeout"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 1:
            raise RunError(
                f"{file}: key `{table}.tool_timeout`: {v!r} is not a number of seconds >= 1. "
                f"Fix: e.g. tool_timeout = 120"
            )


def _check_budget(budget: str, origin: str) -> None:
    try:
        seconds = parse_duration(budget)
    except ValueError as e:
        raise RunError(f"{origin}: {e}") from None
    if seconds <= 0:
        raise RunError(f"{origin}: budget must be positive, got {budget!r}. Fix: use e.g. 90s, 10m or 2h")


def write_sweep_json(r: ResolvedRun) -> None:
    """The resolved config of this invocation; earlier invocations into the same directory (a
    resume, or a sweep widened with another model) stay listed in `history` and in `runs`."""
    path = r.out / SWEEP_FILE
    previous: dict[str, Any] = {}
    if path.exists():
        try:
            previous = read_json(path)
        except Exception:
            previous = {}
    entry = {"benchctl_version": __version__, "written_at": time.time(), "config": r.sweep.to_dict(), "argv": sys.argv}
    history = list(previous.get("history", [])) + [entry]
    runs = list(dict.fromkeys([*previous.get("runs", []), *(s.run_id for s in r.specs)]))
    write_json_atomic(
        path, {**entry, "task": r.task.name, "task_dir": str(r.task.task_dir), "runs": runs, "history": history[-50:]}
    )


def execute(
    r: ResolvedRun,
    progress_mode: str = "auto",
    sandbox_factory: Any = None,
    gateway_factory: Any = None,
    executor: Any = None,
) -> int:
    """Run everything; returns the exit code (0 all finished, 1 some error, 3 the sweep's cost cap kept
    runs from starting, 130 interrupted).

    `executor` decides where runs execute (benchctl/executors): None = this machine (`local`,
    with the given sandbox / gateway factories), or e.g. a `RayExecutor`."""
    from benchctl.executors.local import LocalExecutor
    from benchctl.progress import make_progress
    from benchctl.runner import PreparedData, Runner, plan

    if executor is None:
        executor = LocalExecutor(sandbox_factory, gateway_factory)
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
    if getattr(executor, "uses_docker", False):  # a local run on this machine's Docker and /tmp
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
        print(f"results in {r.out}; next: benchctl grade {r.out} && benchctl report {r.out}", file=sys.stderr)
    return 1 if any(m is None or m.get("status") == "error" for _, m in results) else 0


EXIT_COST_CAP = 3  # the sweep's cost cap kept runs from starting


def _limits_plan(r: ResolvedRun, executor: Any) -> Any:
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


def _lock_results(out: Path) -> Any:
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


def _install_signals(runner: Any) -> Any:
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
