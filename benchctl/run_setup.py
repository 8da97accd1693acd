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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl import __version__
from benchctl.jsonio import read_json, write_json_atomic
from benchctl.policies import parse_duration
from benchctl.sweep import RunSpec, SweepConfig, SweepError, expand, load_sweep_file, normalize_variant, seeds_list
from benchctl.tasks import Task, TaskError, load_task, prepare_data

SWEEP_FILE = "sweep.json"
VARIANT_CACHE = ".variants"

# provider -> (key variables, base-url variables): a key is needed unless a base URL points elsewhere
_KEYS = {"anthropic": (("ANTHROPIC_API_KEY",), ("ANTHROPIC_BASE_URL",)),
         "openai": (("OPENAI_API_KEY",), ("OPENAI_BASE_URL",)),
         "google": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), ("GOOGLE_GEMINI_BASE_URL",))}


class RunError(ValueError):
    pass


@dataclass
class ResolvedRun:
    task: Task
    sweep: SweepConfig
    specs: list[RunSpec]
    out: Path


def check_model(model: str, what: str = "--model") -> None:
    from benchctl.gateway.upstream import ModelId, ModelIdError
    try:
        mid = ModelId.parse(model)
    except ModelIdError as e:
        raise RunError(f"{what}: {e}") from None
    if mid.provider == "scripted":
        if mid.name.startswith("py:"):
            return
        from benchctl.gateway.scripted import load_script
        try:
            load_script(mid.name)
        except Exception as e:
            raise RunError(f"{what} {model}: {e}") from None
        return
    if mid.provider in _KEYS:
        keys, bases = _KEYS[mid.provider]
        if not any(os.environ.get(k) for k in keys) and not any(os.environ.get(b) for b in bases):
            raise RunError(f"{what} {model}: no API key; export {keys[0]}=... on the host "
                           f"(it stays in the gateway and never reaches the sandbox)")
    if mid.provider == "openai-compatible":
        try:
            from benchctl.gateway.http_upstreams import http_upstream
            http_upstream(mid)
        except Exception as e:
            raise RunError(f"{what} {model}: {e}") from None


def check_image(image: str) -> str | None:
    """None when Docker is reachable and has the image, else the problem and its fix."""
    try:
        import docker
        client = docker.from_env(timeout=20)
        client.ping()
    except Exception as e:
        return f"Docker Engine not reachable ({e}); start Docker, then `benchctl doctor`"
    try:
        client.images.get(image)
    except Exception:
        return f"sandbox image {image} not found; build it with `benchctl images build`"
    finally:
        client.close()
    return None


def resolve_config(*, task: Path | None, models: list[str], harnesses: list[str], budgets: list[str],
                   seeds: int | None, out: Path | None, concurrency: int | None, fallback: str | None, variants: list[str],
                   sweep: Path | None, tools: list[str] | None = None) -> ResolvedRun:
    from harnesses import registry
    try:
        if sweep is not None:
            cfg = load_sweep_file(sweep)
            if task is not None:
                cfg.task_dir = task.resolve()
            if out is not None:
                cfg.out = out.resolve()
            # Options given on the command line (None / empty = not given) win over the file.
            if seeds is not None:
                cfg.seeds = seeds_list(seeds)
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
            cfg = SweepConfig(task_dir=task.resolve(), models=list(models), harnesses=list(harnesses) or ["react"],
                              budgets=list(budgets), seeds=seeds_list(1 if seeds is None else seeds),
                              variants=[normalize_variant(v) for v in variants] or [None],
                              concurrency=1 if concurrency is None else concurrency, fallback=fallback,
                              out=out.resolve() if out else None)
    except SweepError as e:
        raise RunError(str(e)) from None
    try:
        t = load_task(cfg.task_dir)
    except TaskError as e:
        raise RunError(str(e)) from None
    if not cfg.models:
        raise RunError("no model: pass --model provider/name (e.g. --model scripted/configs/demo/investigator.json)")
    for m in cfg.models:
        check_model(m)
    if cfg.fallback:
        check_model(cfg.fallback, "--fallback")
    for h in cfg.harnesses:
        try:
            registry.check(h)
            registry.create(h, {**t.options_for(h), **cfg.harness_options}).mounts()   # finds agent binaries
        except registry.UnknownHarness as e:
            raise RunError(f"--harness: {e}") from None
        except Exception as e:
            raise RunError(f"--harness {h}: {e}") from None
    use_budgets = cfg.budgets or t.budgets
    if not use_budgets:
        raise RunError(f"no budget: pass --budget 10m (the task {t.task_file} lists no `budgets`)")
    for b in use_budgets:
        try:
            if parse_duration(b) <= 0:
                raise ValueError(f"budget must be positive, got {b!r}")
        except ValueError as e:
            raise RunError(f"--budget: {e}") from None
    cfg.budgets = use_budgets
    for v in cfg.variants:
        if v is not None and v not in t.variants:
            known = ", ".join(sorted(t.variants)) or "none defined"
            raise RunError(f"--variant {v!r}: not in {t.task_file} [variants] ({known})")
    if cfg.out is None:
        raise RunError("no results directory: pass --out DIR (rerun the same command to resume)")
    if cfg.concurrency < 1:
        raise RunError("--concurrency must be >= 1")
    specs = expand(cfg, t.name, cfg.budgets, t.options_for)
    if tools:
        cfg.tools = list(tools)
    try:    # hidden-behaviour tasks: one run per tool configuration (benchctl.targets)
        from benchctl.targets.runs import expand_tool_configs
        specs = expand_tool_configs(t.task_dir, specs, cfg.tools)
    except ValueError as e:
        raise RunError(str(e)) from None
    return ResolvedRun(task=t, sweep=cfg, specs=specs, out=cfg.out)


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
    entry = {"benchctl_version": __version__, "written_at": time.time(), "config": r.sweep.to_dict(),
             "argv": sys.argv}
    history = list(previous.get("history", [])) + [entry]
    runs = list(dict.fromkeys([*previous.get("runs", []), *(s.run_id for s in r.specs)]))
    write_json_atomic(path, {**entry, "task": r.task.name, "task_dir": str(r.task.task_dir), "runs": runs,
                             "history": history[-50:]})


def execute(r: ResolvedRun, progress_mode: str = "auto", sandbox_factory: Any = None,
            gateway_factory: Any = None, executor: Any = None) -> int:
    """Run everything; returns the exit code (0 all finished, 1 some error, 130 interrupted).

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
    lock = _lock_results(r.out)   # held (referenced) until this function returns
    if lock is None:
        return 2
    decisions = plan(r.out, r.specs)   # again, now that no other process can change it
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
    if getattr(executor, "uses_docker", False):   # a local run on this machine's Docker
        _remove_dead_owners_containers([s.run_id for s, a in decisions if a == "redo"])

    prog = make_progress(len(r.specs), progress_mode)
    runner = Runner(r.task, r.out, data, concurrency=executor.parallelism(r.sweep.concurrency), progress=prog,
                    executor=executor)
    restore = _install_signals(runner)
    try:
        with prog:
            results = runner.run_all(r.specs)
    finally:
        restore()
        executor.close()
    if runner.cancel.is_set():
        print("interrupted: unfinished runs will be redone when you rerun the same command", file=sys.stderr)
        return 130
    if progress_mode != "quiet":
        print(f"results in {r.out}; next: benchctl grade {r.out} && benchctl report {r.out}", file=sys.stderr)
    return 1 if any(m is None or m.get("status") == "error" for _, m in results) else 0


def _warn_changed_skips(out: Path, skipped: list[RunSpec]) -> None:
    """A finished run is skipped by its id, but the id leaves out the fallback model and the
    harness options: say so when they differ from what the finished run recorded, rather
    than silently reusing a run made under other settings."""
    from benchctl.layout import read_meta, run_dir
    for spec in skipped:
        recorded = (read_meta(run_dir(out, spec.run_id)) or {}).get("spec", {})
        changed = [k for k in ("fallback", "options") if k in recorded and recorded[k] != getattr(spec, k)]
        if changed:
            print(f"warning: {spec.run_id} is finished and skipped, but it was made with a different "
                  f"{' and '.join(changed)}; use another --out (or delete the run) to redo it", file=sys.stderr)


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
        print(f"error: {out} is in use by another `benchctl run` ({holder}); wait for it to finish, "
              f"or use another --out", file=sys.stderr)
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
        import docker

        from benchctl.sandbox.cleanup import remove_strays
        client = docker.from_env(timeout=20)
        try:
            for rid in run_ids:
                remove_strays(client, run_id=rid)
        finally:
            client.close()
    except Exception:
        pass     # best effort: `benchctl doctor` finds what is left


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
