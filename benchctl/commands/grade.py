"""`benchctl grade`: score finished runs with judge models; `benchctl grade validate`: check the judge.

`benchctl grade RESULTS_DIR --judge MODEL` is shorthand for `benchctl grade runs RESULTS_DIR ...`:
the group dispatches to `runs` whenever its first argument is not a subcommand name.
Heavy imports live inside the command bodies so `benchctl --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:
    # typer 0.28 carries its own copy of click (typer._click): the context a group is handed is that
    # copy's, not the separately installed click's (which only uvicorn brings)
    from typer._click.core import Context

from benchctl.commands.batch_option import BatchProgressView, batch_option, check_batch_judges, interrupted
from benchctl.commands.limit_options import allow_unpriced_option, cli_limits, max_cost_option

DEFAULT_COMMAND = "runs"


class DefaultCommandGroup(TyperGroup):
    """A group whose first argument, when it is not a subcommand, goes to DEFAULT_COMMAND.

    The default command is what users type (`benchctl grade RESULTS --judge M`), so it speaks under
    the group's name: the group's --help ends with its usage and options, and its usage errors say
    `benchctl grade [OPTIONS] RESULTS`, not `benchctl grade runs ...`, a command nobody typed."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [DEFAULT_COMMAND, *args]
            ctx.meta[_IMPLICIT] = ctx
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None and ctx.meta.get(_IMPLICIT) is ctx:
            return name, _UnderGroupName(cmd, ctx), rest
        return name, cmd, rest

    def format_help(self, ctx: Context, formatter: Any) -> None:
        super().format_help(ctx, formatter)
        cmd = self.commands.get(DEFAULT_COMMAND)
        if cmd is not None:
            with _UnderGroupName(cmd, ctx).make_context(None, [], resilient_parsing=True) as sub:
                cmd.format_help(sub, formatter)


_IMPLICIT = "benchctl.default_command_of"  # ctx.meta is shared down the chain: keyed by the group's context


class _UnderGroupName:
    """The default command, its context made under the group's own name and parent, so that its
    command path (usage lines, 'Try ... --help') is the one the user typed. Everything else is the
    command's: `make_context` is the only call a group makes on the command it resolved."""

    def __init__(self, cmd: Any, group_ctx: Context) -> None:
        self._cmd, self._group_ctx = cmd, group_ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cmd, name)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        g = self._group_ctx
        return self._cmd.make_context(g.info_name, args, parent=g.parent, **extra)


grade_app = typer.Typer(
    cls=DefaultCommandGroup,
    no_args_is_help=True,
    add_completion=False,
    help="Grade finished runs with a judge model (`benchctl grade RESULTS_DIR --judge MODEL`), "
    "or validate a judge against human scores (`benchctl grade validate`).",
)


@grade_app.command(DEFAULT_COMMAND)
def runs(
    results: Path = typer.Argument(..., help="A results directory (holding runs/)."),
    judge: list[str] = typer.Option(
        ...,
        "--judge",
        help="Judge model id, e.g. anthropic/claude-sonnet-5-5 or scripted/judge.json. Repeat it for a panel: "
        "each item takes the mean of the judges' answers and the report shows their agreement (Krippendorff's α).",
    ),
    repeats: int = typer.Option(
        1,
        "--repeats",
        min=1,
        help="Ask each judge K times per item (fresh samples, at the provider's default temperature); the item "
        "takes the mean, and the report's judge_share says how much of the spread between runs is the judge's.",
    ),
    verifier: str | None = typer.Option(
        None,
        "--verifier",
        help='Tournament grader, tasks with \\[grading.tournament] verify = "agent": the model of the verifier '
        "agent that tries each issue in a fresh sandbox of its environment (default: the judge).",
    ),
    grader: list[str] | None = typer.Option(
        None, "--grader", help="Grader to run (repeatable); default: the task's \\[grading] graders."
    ),
    concurrency: int = typer.Option(16, "--concurrency", min=1, help="Judge calls in flight at once."),
    force: bool = typer.Option(False, "--force", help="Regrade even when a grade for this judge and rubric exists."),
    task: Path | None = typer.Option(
        None, "--task", help="Task directory (with task.toml); default: each run's meta spec.task_dir."
    ),
    run: str | None = typer.Option(None, "--run", help="Only runs whose id matches this glob, e.g. 'demo__react__*'."),
    auditor_key: str = typer.Option(
        "model",
        "--auditor-key",
        help="Tournament grader only: what one auditor is, as meta.json fields joined by '+': model (default), "
        "model+harness, model+budget, model+harness+budget, ... (fields: task, harness, model, budget, "
        "variant, tools, seed).",
    ),
    max_cost: float | None = max_cost_option(
        "for grading: once the judge spend of the graders being run reaches it — every judge call of theirs "
        "(and the tournament's verifier runs) recorded in RESULTS_DIR, earlier sessions' too (grades from before "
        "the spend log: estimated from their records) — no new judge call or verifier run starts, a running "
        "verifier stops, and their items stay unscored (never 0). A rerun continues the count from disk."
    ),
    allow_unpriced: bool = allow_unpriced_option(),
    batch: bool = batch_option(),
) -> None:
    """Grade every finished run in RESULTS_DIR (the default command of `benchctl grade`).

    The tournament grader rates auditors across every finished run of the tasks whose runs
    selected it (a --run filter picks those tasks; each environment's auditors are all matched).
    `--grader tournament` covers only the tasks whose \\[grading] lists it (every task when none
    does), unless --run names the runs; the output says which tasks it left out or took in.
    Exit status 1 when any grade is unscored (a judge failure, a missing part, or a tournament run
    that could not be rated; the output says which; re-running retries judge failures), 2 for bad input.
    """
    import asyncio

    from benchctl.gateway.upstream import ModelId, ModelIdError
    from benchctl.grading.batch_record import BatchRecordError
    from benchctl.grading.config import GradingConfigError
    from benchctl.grading.runner import GradeOptions, grade_results
    from benchctl.grading.summary import print_summary
    from benchctl.layout import runs_dir

    if not runs_dir(results).is_dir():
        typer.echo(f"error: {results} has no runs/ directory; pass the results directory of a sweep", err=True)
        raise typer.Exit(2)
    for flag, models in (("--judge", judge), ("--verifier", [verifier] if verifier else [])):
        for model in models:
            try:
                ModelId.parse(model)
            except ModelIdError as e:
                typer.echo(f"error: {flag}: {e}", err=True)
                raise typer.Exit(2) from None
    if len(set(judge)) < len(judge):
        typer.echo("error: --judge: a model is named twice; for several answers of one judge use --repeats K", err=True)
        raise typer.Exit(2)
    limits = cli_limits(
        max_cost=max_cost,
        max_connections=None,
        allow_unpriced=allow_unpriced,
        models=list(judge) + ([verifier] if verifier else []),
    )
    if batch:
        check_batch_judges(list(judge), max_cost=limits.max_cost, allow_unpriced=allow_unpriced)
    from benchctl.tournament.participants import parse_auditor_key

    try:
        parse_auditor_key(auditor_key)  # fail before any judge call, not after the rubric graders
    except ValueError as e:
        typer.echo(f"error: --auditor-key: {e}", err=True)
        raise typer.Exit(2) from None
    opts = GradeOptions(
        judge=judge[0],
        panel=list(judge[1:]),
        repeats=repeats,
        graders=list(grader) if grader else None,
        concurrency=concurrency,
        force=force,
        task_dir=task,
        run_glob=run,
        auditor_key=auditor_key,
        max_cost=limits.max_cost,
        verifier=verifier,
        batch=batch,
    )
    from rich.progress import Progress

    from benchctl.console import wide_console

    console = wide_console()
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        bar = progress.add_task("grading", total=None)
        try:
            session = asyncio.run(
                grade_results(
                    results,
                    opts,
                    on_done=lambda _o: progress.advance(bar),
                    on_plan=lambda n: progress.update(bar, total=n),
                    on_batch=BatchProgressView(progress, console) if batch else None,
                )
            )
        except KeyboardInterrupt:
            progress.stop()
            if batch:
                raise interrupted(f"{results}/grades/<grader>/batches.json") from None
            raise
        except (GradingConfigError, BatchRecordError) as e:
            progress.stop()
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
    print_summary(session)
    if not session.outcomes and not session.tournament:
        typer.echo("no finished runs matched; nothing graded", err=True)
    from benchctl.grading.summary import tournament_lines

    # one rule for every grader: exit 1 when any grade is unscored (for the tournament: a run whose
    # tournament grade is unscored -- judge failure, unreadable issues, or no match played)
    if any(o.status == "unscored" for o in session.outcomes) or tournament_lines(session.tournament_ratings)[1]:
        raise typer.Exit(1)


@grade_app.command("validate")
def validate(
    human: Path = typer.Option(
        ...,
        "--human",
        exists=True,
        dir_okay=False,
        help="Human scores (CSV or JSONL; see docs/grading.md, Judge validation).",
    ),
    grades: Path = typer.Option(..., "--grades", exists=True, help="A results directory, or its grades/ directory."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the metrics as JSON here."),
) -> None:
    """Compare judge grades with human scores: MAE, bias, within 0.1, correlations, pairwise accuracy, α."""
    from benchctl.grading.validate import HumanScoresError, print_validation, validate_files
    from benchctl.jsonio import write_json_atomic

    try:
        report = validate_files(human, grades)
    except HumanScoresError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    print_validation(report)
    if json_out:
        write_json_atomic(json_out, report)


def register(app: typer.Typer) -> None:
    app.add_typer(grade_app, name="grade")
