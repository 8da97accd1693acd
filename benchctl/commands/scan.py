"""`benchctl scan`: ask questions of every transcript; `benchctl scan validate`: check a scanner
against human labels; `benchctl scan list`: the built-in scanners.

`benchctl scan RESULTS_DIR --scanner NAME` is shorthand for `benchctl scan runs RESULTS_DIR ...`
(the group dispatches to `runs` when its first argument is not a subcommand, as `benchctl grade`
does). Heavy imports live inside the command bodies so `benchctl --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from benchctl.commands.batch_option import BatchProgressView, batch_option, check_batch_judges, interrupted
from benchctl.commands.grade import DEFAULT_COMMAND, DefaultCommandGroup
from benchctl.commands.limit_options import allow_unpriced_option, cli_limits, max_cost_option

scan_app = typer.Typer(
    cls=DefaultCommandGroup,
    no_args_is_help=True,
    add_completion=False,
    help="Ask questions of every transcript (`benchctl scan RESULTS_DIR --scanner NAME`), check a scanner "
    "against human labels (`benchctl scan validate`), or list the built-in scanners (`benchctl scan list`).",
)


@scan_app.command(DEFAULT_COMMAND)
def runs(
    results: Path = typer.Argument(..., help="A results directory (holding runs/)."),
    scanner: list[str] = typer.Option(
        ...,
        "--scanner",
        help="A built-in scanner's name (`benchctl scan list`) or a scanner TOML file; repeatable.",
    ),
    judge: str | None = typer.Option(
        None, "--judge", help="Judge model for llm scanners, e.g. anthropic/claude-haiku-4-5 or scripted/judge.json."
    ),
    run: str | None = typer.Option(None, "--run", help="Only runs whose id matches this glob, e.g. 'demo__react__*'."),
    concurrency: int = typer.Option(16, "--concurrency", min=1, help="Judge calls in flight at once."),
    force: bool = typer.Option(
        False, "--force", help="Scan again even when a result for this scanner, transcript and judge exists."
    ),
    segment_chars: int | None = typer.Option(
        None,
        "--segment-chars",
        min=2000,
        help="Characters of transcript per judge call, for every llm scanner (default: each scanner's "
        "segment_chars, 300,000); longer transcripts are split and the answers combined.",
    ),
    max_cost: float | None = max_cost_option(
        "for scanning: once the judge spend of the llm scanners being run reaches it (every judge call of "
        "theirs recorded in RESULTS_DIR, earlier sessions' too) no new judge call starts and their scans stay "
        "unscored (never a 'no'). A rerun continues the count from disk."
    ),
    allow_unpriced: bool = allow_unpriced_option(),
    batch: bool = batch_option(),
) -> None:
    """Scan every finished run in RESULTS_DIR (the default command of `benchctl scan`).

    Writes RESULTS_DIR/scans/<scanner>/<run_id>.json per scanner and run and prints a summary.
    A rerun scans only what is missing, unscored or changed (the scanner's definition, the
    transcript, or the judge). Exit status 1 when any scan is unscored (a judge failure, an answer
    citing events that do not exist, the cost cap), 2 for bad input.
    """
    import asyncio

    from benchctl.gateway.upstream import ModelId, ModelIdError
    from benchctl.grading.batch_record import BatchRecordError
    from benchctl.scan.registry import resolve_all
    from benchctl.scan.runner import ScanConfigError, ScanOptions, scan_results
    from benchctl.scan.spec import ScannerError
    from benchctl.scan.summary import print_summary

    try:
        scanners = resolve_all(list(scanner))
    except ScannerError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if judge is not None:
        try:
            ModelId.parse(judge)
        except ModelIdError as e:
            typer.echo(f"error: --judge: {e}", err=True)
            raise typer.Exit(2) from None
    needs_judge = any(s.kind == "llm" for s in scanners)
    limits = cli_limits(
        max_cost=max_cost,
        max_connections=None,
        allow_unpriced=allow_unpriced,
        models=[judge] if judge and needs_judge else [],
    )
    if batch and judge and needs_judge:
        check_batch_judges([judge], max_cost=limits.max_cost, allow_unpriced=allow_unpriced)
    opts = ScanOptions(
        judge=judge,
        concurrency=concurrency,
        run_glob=run,
        force=force,
        max_cost=limits.max_cost,
        segment_chars=segment_chars,
        batch=batch,
    )
    from rich.progress import Progress

    from benchctl.console import wide_console

    console = wide_console()
    with Progress(console=console, transient=True, disable=not console.is_terminal) as progress:
        bar = progress.add_task("scanning", total=None)
        try:
            session = asyncio.run(
                scan_results(
                    results,
                    scanners,
                    opts,
                    on_done=lambda _o: progress.advance(bar),
                    on_plan=lambda n: progress.update(bar, total=n),
                    on_batch=BatchProgressView(progress, console) if batch else None,
                )
            )
        except KeyboardInterrupt:
            progress.stop()
            if batch:
                raise interrupted(f"{results}/scans/<scanner>/batches.json") from None
            raise
        except (ScanConfigError, FileNotFoundError, BatchRecordError) as e:
            progress.stop()
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
    print_summary(session)
    if not session.outcomes:
        typer.echo("no finished runs matched; nothing scanned", err=True)
    if any(o.status == "unscored" for o in session.outcomes):
        raise typer.Exit(1)


@scan_app.command("validate")
def validate(
    scanner: str = typer.Argument(..., help="The scanner: its name (the scans/<name>/ directory) or its TOML file."),
    labels: Path = typer.Option(
        ..., "--labels", exists=True, dir_okay=False, help="Human labels: CSV with run_id, label and optional event."
    ),
    results: Path = typer.Option(..., "--results", exists=True, file_okay=False, help="The scanned results directory."),
    positive: str | None = typer.Option(
        None, "--positive", help="For a label / labels scanner: the label counted as a hit."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the metrics as one JSON object instead of a table."),
) -> None:
    """Compare a scanner's answers with human labels: accuracy, precision, recall, F1, balanced accuracy.

    Each with a 95% interval; --json prints them as one object (docs/scanning.md, Validation).
    """
    from benchctl.scan.spec import ScannerError, load_scanner_file
    from benchctl.scan.validate import LabelsError, validate_files

    name = scanner
    if scanner.endswith(".toml") or "/" in scanner:
        try:
            name = load_scanner_file(Path(scanner)).name
        except ScannerError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
    try:
        report = validate_files(results, name, labels, positive)
    except LabelsError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if json_out:
        typer.echo(json.dumps(report, indent=2))
        return
    _print_validation(report)


def _print_validation(report: dict[str, object]) -> None:
    from rich.table import Table

    from benchctl.console import wide_console

    intervals = report["intervals"]
    assert isinstance(intervals, dict)
    t = Table(title=f"{report['scanner']} vs human labels")
    for col in ("metric", "value", "95% interval"):
        t.add_column(col)
    for key in ("accuracy", "precision", "recall", "f1", "balanced_accuracy"):
        v, iv = report[key], intervals.get(key)
        value = "n/a" if v is None else f"{v:.3f}"
        ci = f"{iv[0]:.3f}–{iv[1]:.3f}" if iv and iv[0] is not None else ""
        t.add_row(key.replace("_", " "), value, ci)
    console = wide_console()
    console.print(t)
    lines = [
        f"n = {report['n']} labelled runs with a scored result: "
        f"tp {report['tp']}, fp {report['fp']}, tn {report['tn']}, fn {report['fn']}"
    ]
    if report.get("event_n"):
        lines.append(
            f"cited the human's event in {report['event_agreement']:.0%} of {report['event_n']} true positives"
        )
    missing = report.get("missing") or []
    if isinstance(missing, list) and missing:
        lines.append(f"{len(missing)} labelled run(s) have no scored result (not counted): {', '.join(missing[:10])}")
    for line in lines:
        console.print(line, markup=False, highlight=False)


@scan_app.command("list")
def list_scanners() -> None:
    """The scanners found by name: the built-ins and those of installed plugins (use one: --scanner NAME)."""
    from benchctl.scan.registry import SCANNERS, known_scanners

    for name, s in sorted(known_scanners().items()):
        typer.echo(f"{name:<24} {s.kind:<5} {s.answer:<8} {', '.join(s.parts)}")
        typer.echo(f"{'':<24} {s.description}")
        typer.echo(f"{'':<24} from {SCANNERS.provider(name)}")


def register(app: typer.Typer) -> None:
    app.add_typer(scan_app, name="scan")
