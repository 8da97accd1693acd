"""`benchctl run`: run a task over models × harnesses × budgets × variants × seeds.

Everything is validated before anything starts (task file, harness names, model ids and their
keys, variants, the sandbox image); then runs execute with live progress, resumably.
"""

from __future__ import annotations

from pathlib import Path

import typer

from benchctl.commands.limit_options import allow_unpriced_option, max_connections_option, max_cost_option


def register(app: typer.Typer) -> None:
    app.command("run", help=run.__doc__)(run)


def run(
    task: Path | None = typer.Argument(None, help="Task directory (containing task.toml)."),
    model: list[str] = typer.Option([], "--model", "-m", help="Model id (provider/name); repeat for several."),
    harness: list[str] = typer.Option(
        [], "--harness", help="react | claude-code | codex; repeat for several (default react)."
    ),
    budget: list[str] = typer.Option(
        [], "--budget", "-b", help="Time budget, e.g. 10m; repeat for several (default: the task's)."
    ),
    seeds: int | None = typer.Option(
        None, "--seeds", help="Runs per configuration, seeds 0..N-1 (default 1, or the sweep file's)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Results directory (a sweep)."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", "-j", help="Runs at the same time (default 1, or the sweep file's)."
    ),
    fallback: str | None = typer.Option(None, "--fallback", help="Model to switch to when the model refuses."),
    variant: list[str] = typer.Option(
        [], "--variant", help="Data variant (a name from the task's variants table); repeat; 'base' = unmodified data."
    ),
    sweep: Path | None = typer.Option(None, "--sweep", help="Sweep file (TOML) instead of the options above."),
    progress: str = typer.Option("auto", "--progress", help="auto | rich | json | quiet."),
    tools: list[str] = typer.Option(
        [],
        "--tools",
        help="Tool configuration for a task with a \\[target] "
        "(default, prefill, sample_user, complete, scaffolded_*); repeat for several.",
    ),
    allow_changed: bool = typer.Option(
        False,
        "--allow-changed",
        help="Run an imported task even though its files no longer match their pin (meta.json records what changed).",
    ),
    max_cost: float | None = max_cost_option(
        "for the whole sweep: when the priced spend of its runs reaches it, no new run starts and running agents "
        "stop (budget_exhausted). A rerun continues the count from disk."
    ),
    max_connections: int | None = max_connections_option(  # \\[: rich markup would eat "[limits]"
        ", shared by every run (and every Ray node). Per-provider and per-model limits: \\[limits] in a sweep file."
    ),
    allow_unpriced: bool = allow_unpriced_option(),
    ray: str | None = typer.Option(
        None,
        "--ray",
        metavar="ADDRESS",
        help="Run on a Ray cluster: HOST:PORT, ray://HOST:PORT, auto (RAY_ADDRESS, else "
        "the cluster `ray start` runs here) or local. Each node needs Docker, the "
        "sandbox image and `benchctl_sandbox` slots; needs benchctl\\[ray].",
    ),
) -> None:
    """Run agents on a task in network-less sandboxes; rerun the same command to resume."""
    import sys

    from benchctl.run import RunError, execute, resolve_config
    from benchctl.run.progress import PROGRESS_MODES

    if progress not in PROGRESS_MODES:  # before anything runs: a typo must not start a sweep
        typer.secho(f"error: --progress {progress!r}: use one of {', '.join(PROGRESS_MODES)}", fg="red", err=True)
        raise typer.Exit(2)
    try:
        cfg = resolve_config(
            task=task,
            models=model,
            harnesses=harness,
            budgets=budget,
            seeds=seeds,
            out=out,
            concurrency=concurrency,
            fallback=fallback,
            variants=variant,
            sweep=sweep,
            tools=tools,
            allow_changed=allow_changed,
            max_cost=max_cost,
            max_connections=max_connections,
            allow_unpriced=allow_unpriced,
        )
    except RunError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    executor = None
    if ray is not None:
        from benchctl.executors.ray_driver import RayExecutor, RayUnavailable

        try:
            executor = RayExecutor(ray)
        except RayUnavailable as e:
            typer.secho(f"error: {e}", fg="red", err=True)
            raise typer.Exit(2) from None
        if concurrency is None and not _sweep_sets_concurrency(sweep):
            cfg.sweep.concurrency = max(1, executor.slots())  # default: every slot of the cluster
    code = execute(cfg, progress_mode=progress, executor=executor)
    sys.stdout.flush()
    raise typer.Exit(code)


def _sweep_sets_concurrency(sweep: Path | None) -> bool:
    if sweep is None:
        return False
    import tomllib

    try:
        return "concurrency" in tomllib.loads(sweep.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
