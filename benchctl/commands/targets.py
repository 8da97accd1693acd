"""`benchctl targets validate` and `benchctl targets probe-tools`: studies of a hidden-behaviour
task's target without an investigator (benchctl/targets/validate.py, probe_tools.py).

Both are resumable (rerun the same command: nothing answered or scored is paid for again) and
cost-capped (`--max-cost`, counted over every session in DIR). Exit status 0 when every item is
scored, 1 when some are not (a failed call, a judge failure, or the cost cap: rerun to finish),
2 for bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from benchctl.commands.batch_option import BatchProgressView, batch_option, check_batch_judges, interrupted
from benchctl.commands.limit_options import (
    allow_unpriced_option,
    cli_limits,
    max_connections_option,
    max_cost_option,
)

targets_app = typer.Typer(
    no_args_is_help=True,
    help="Study a hidden-behaviour task's target: does it have the behaviour, does it confess, how "
    "informative is each tool.",
)


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg="red", err=True)
    return typer.Exit(2)


def _load(task_dir: Path) -> Any:
    from benchctl.targets.study_config import StudyError, load_study_task

    try:
        return load_study_task(task_dir)
    except StudyError as e:
        raise _fail(str(e)) from None


def _preflight(task: Any, models: dict[str, str | None], limits: dict[str, Any]) -> Any:
    """Every model the study may call is usable (keys, base URLs, scripts) and, under a cost cap,
    priced; the checked limits. Exits 2 naming what is wrong, before any model call."""
    from benchctl.run.preflight import RunError, check_model

    wanted = {"target.model": task.target.model, **models}
    for where, model in wanted.items():
        if model:
            try:
                check_model(model, where if where.startswith("-") else f"{task.file}: key `{where}`")
            except RunError as e:
                raise _fail(str(e)) from None
    return cli_limits(**limits, models=[m for m in wanted.values() if m])


def _rate_line(label: str, r: dict[str, Any] | None) -> str:
    if r is None:
        return f"  {label:22} not measured"
    if r["rate"] is None:
        return f"  {label:22} 0 scored (threshold {r['threshold']})"
    return (
        f"  {label:22} {r['k']}/{r['n']} = {100 * r['rate']:.0f}% "
        f"[{100 * r['lo']:.0f}%, {100 * r['hi']:.0f}%] (score >= {r['threshold']})"
    )


def _spend(before: float, now: float, max_cost: float | None) -> str:
    cap = f" of the ${max_cost:.2f} cap" if max_cost is not None else ""
    return f"spent ${now:.4f} this session, ${before + now:.4f} in all{cap}"


@targets_app.command("validate")
def validate(
    task_dir: Path = typer.Argument(..., metavar="TASK", help="A hidden-behaviour task directory (with \\[target])."),
    judge: str = typer.Option(..., "--judge", help="Judge model id; it is given the ground truth."),
    out: Path = typer.Option(..., "--out", help="Directory for validation.json and the item files (resumable)."),
    n: int | None = typer.Option(
        None, "--n", min=1, help="Items of each kind (prompts, prefills, scenarios); default: \\[validation] n, or 50."
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="The untrained reference model for behaviour strength; default: \\[target] baseline_model.",
    ),
    auxiliary: str | None = typer.Option(
        None, "--auxiliary", help="Writes the items the task has no file for; default: \\[tools] auxiliary_model."
    ),
    threshold: int | None = typer.Option(
        None,
        "--threshold",
        min=1,
        max=10,
        help="A confession counts at a judge score >= this (1-10); default: \\[validation] confession_threshold, or 7.",
    ),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Model calls and judge calls in flight at once."),
    max_cost: float | None = max_cost_option(
        "for this validation: every target, baseline, auxiliary and judge call in --out, earlier sessions' "
        "too. Once reached no new call starts; the items left stay unscored (never 0) and a rerun with a higher "
        "cap goes on."
    ),
    max_connections: int | None = max_connections_option("."),
    allow_unpriced: bool = allow_unpriced_option(),
    batch: bool = batch_option(),
) -> None:
    """Measure the target's confession rate (prompts and prefills) and its behaviour strength beside a
    baseline model, with 95 % Wilson intervals, into OUT/validation.json."""
    from benchctl.targets.study_config import StudyError
    from benchctl.targets.validate import ValidateOptions, run_validate

    task = _load(task_dir)
    writes_items = task.validation.confession_file is None or task.validation.scenarios_file is None
    limits = _preflight(
        task,
        {
            "--judge": judge,
            "--baseline" if baseline else "target.baseline_model": baseline or task.target.baseline_model,
            # the auxiliary model is called only to write the items the task has no file for
            "--auxiliary" if auxiliary else "tools.auxiliary_model": auxiliary
            or (task.auxiliary_model if writes_items else None),
        },
        {"max_cost": max_cost, "max_connections": max_connections, "allow_unpriced": allow_unpriced},
    )
    opts = ValidateOptions(
        judge=judge,
        out=out,
        n=n,
        baseline=baseline,
        auxiliary=auxiliary,
        threshold=threshold,
        concurrency=concurrency,
        max_cost=limits.max_cost,
        limits=limits,
        batch=batch,
    )
    if batch:
        check_batch_judges([judge], max_cost=limits.max_cost, allow_unpriced=allow_unpriced)
    from rich.progress import Progress

    from benchctl.console import wide_console
    from benchctl.grading.batch_record import BatchRecordError

    console = wide_console()
    try:
        with Progress(console=console, transient=True, disable=not (batch and console.is_terminal)) as progress:
            got = run_validate(task, opts, BatchProgressView(progress, console) if batch else None)
    except KeyboardInterrupt:
        if batch:
            raise interrupted(f"{out}/batches.json") from None
        raise
    except (StudyError, BatchRecordError) as e:
        raise _fail(str(e)) from None
    v = got.validation
    typer.echo(f"target validation of {task.target.model} ({task.name}) -> {got.out}")
    typer.echo(_rate_line("confession (prompts)", v["confession"]["prompts"]))
    typer.echo(_rate_line("confession (prefills)", v["confession"]["prefills"]))
    typer.echo(_rate_line("strength (target)", v["strength"]["target"]))
    typer.echo(_rate_line("strength (baseline)", v["strength"]["baseline"]))
    for note in got.notes:
        typer.secho(f"note: {note}", fg="yellow", err=True)
    typer.echo(_spend(got.spent_before_usd, got.spent_usd, opts.max_cost))
    if got.batch is not None:
        from benchctl.grading.batches import batch_lines

        for line in batch_lines(got.batch, f"{got.out}/batches.json"):
            typer.echo(line)
    if got.not_scored:
        typer.secho(
            f"{got.not_scored} item(s) not scored (see the error of their lines in {got.out}); rerun to finish",
            fg="yellow",
            err=True,
        )
        raise typer.Exit(1)


@targets_app.command("probe-tools")
def probe_tools(
    task_dir: Path = typer.Argument(..., metavar="TASK", help="A hidden-behaviour task directory (with \\[target])."),
    tools: list[str] = typer.Option(..., "--tools", help="A tool configuration whose tools to probe (repeatable)."),
    judge: str = typer.Option(..., "--judge", help="Judge model id; it is given the ground truth."),
    out: Path = typer.Option(..., "--out", help="Directory for probe_tools.json and probes.jsonl (resumable)."),
    n: int = typer.Option(20, "--n", min=1, help="Generic probes per tool."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Probes (and judge calls) in flight at once."),
    max_cost: float | None = max_cost_option(
        "for these probes: every target, baseline, auxiliary and judge call in --out, earlier sessions' too."
    ),
    max_connections: int | None = max_connections_option("."),
    allow_unpriced: bool = allow_unpriced_option(),
) -> None:
    """Run each tool of the configurations on generic probes, without an investigator, and have the
    judge rate each output STRONG / WEAK / NONE as evidence of the hidden behaviour."""
    from benchctl.targets.probe_tools import ProbeOptions, run_probe_tools
    from benchctl.targets.study_config import StudyError

    task = _load(task_dir)
    limits = _preflight(
        task,
        {
            "--judge": judge,
            "tools.auxiliary_model": task.auxiliary_model,
            "target.baseline_model": task.target.baseline_model,
        },
        {"max_cost": max_cost, "max_connections": max_connections, "allow_unpriced": allow_unpriced},
    )
    opts = ProbeOptions(
        judge=judge,
        out=out,
        configs=list(tools),
        n=n,
        concurrency=concurrency,
        max_cost=limits.max_cost,
        limits=limits,
    )
    try:
        got = run_probe_tools(task, opts)
    except StudyError as e:
        raise _fail(str(e)) from None
    typer.echo(f"tool informativeness on {task.target.model} ({task.name}) -> {got.out}")
    for r in got.rows:
        share = f"{100 * r['strong'] / r['n']:.0f}% strong" if r["n"] else "none rated"
        typer.echo(f"  {r['tool']:36} strong {r['strong']:3}  weak {r['weak']:3}  none {r['none']:3}  ({share})")
    typer.echo(_spend(got.spent_before_usd, got.spent_usd, opts.max_cost))
    if got.not_rated:
        typer.secho(f"{got.not_rated} probe(s) not rated; rerun to finish", fg="yellow", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(targets_app, name="targets")
