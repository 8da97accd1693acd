"""Turning `benchctl run` arguments (or a sweep file) into validated runs.

All validation happens here, before anything starts: a bad task file, unknown harness, bad model
id, missing API key, unknown variant or missing sandbox image is a `RunError` with the fix, and
nothing is written into the results directory (`benchctl.run.execution` then runs them).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl import __version__
from benchctl.jsonio import read_json, write_json_atomic
from benchctl.policies import parse_duration
from benchctl.run.preflight import RunError, check_model
from benchctl.run.sweep import RunSpec, SweepConfig, SweepError, expand, load_sweep_file, normalize_variant, seeds_list
from benchctl.tasks import TASK_FILE, Task, TaskError, check_limits_fit_host, load_task

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
        _check_harness(h, t, cfg, where["harnesses"], sweep_file)
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


def _check_harness(name: str, task: Task, cfg: SweepConfig, origin: str, sweep_file: Path | None) -> None:
    """A known harness whose agent binary is found with the options it will get."""
    from benchctl.harness import HARNESSES, create_harness
    from benchctl.plugins import UnknownPlugin

    try:
        HARNESSES.check(name)
    except UnknownPlugin as e:
        raise RunError(f"{origin}: {e}") from None
    _check_tool_timeout_option(name, task, cfg, sweep_file)
    try:
        create_harness(name, {**task.options_for(name), **cfg.harness_options}).mounts()  # finds agent binaries
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
