"""`benchctl export RESULTS_DIR --to inspect|atif -o OUT_DIR`: runs as Inspect eval logs or ATIF
trajectories, for the viewers and tools researchers already use.

Only typer and the standard library at module level (see benchctl/cli.py); inspect-ai and atif
are imported inside the command.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer


class Target(str, Enum):
    inspect = "inspect"
    atif = "atif"


def export(
    results_dir: Path = typer.Argument(..., help="A results directory written by `benchctl run` (contains runs/)."),
    to: Target = typer.Option(
        ..., "--to", help="inspect: one Inspect eval log per configuration; atif: one ATIF trajectory per run."
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="Directory to write into (created; earlier exports of the same configurations / runs are replaced).",
    ),
    run: str | None = typer.Option(None, "--run", help="Only runs whose id matches this glob, e.g. 'demo__react__*'."),
) -> None:
    """Export finished runs with their transcripts, grades, usage and cost. Reads files only: no
    Docker, no network. Open the result with `inspect view --log-dir OUT` or an ATIF viewer."""
    from benchctl.export import MissingExtra
    from benchctl.export import export as run_export

    if not results_dir.is_dir():
        raise typer.BadParameter(
            f"{results_dir} is not a directory; pass the directory `benchctl run --out` wrote.",
            param_hint="RESULTS_DIR",
        )
    try:
        result = run_export(results_dir, to.value, out, run)
    except (MissingExtra, FileNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    for run_id, why in result.skipped:
        typer.echo(f"skipped {run_id}: {why}", err=True)
    if not result.runs:
        what = f"matching --run {run!r} " if run else ""
        typer.echo(f"error: no finished run {what}in {results_dir}/runs; nothing was written", err=True)
        raise typer.Exit(2)
    kind = "eval logs" if to is Target.inspect else "trajectories"
    typer.echo(f"wrote {len(result.written)} {kind} ({len(result.runs)} runs) to {out}", err=True)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
