"""`benchctl report RESULTS_DIR`: leaderboards, breakdowns and plots from files on disk alone.

Only typer and the standard library at module level (see benchctl/cli.py); the report
package, rich and matplotlib are imported inside the command.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer


class Format(str, Enum):
    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"


class By(str, Enum):
    auto = "auto"
    model = "model"
    model_harness = "model+harness"


def report(
    results_dir: Path = typer.Argument(..., help="A results directory written by `benchctl run` (contains runs/)."),
    format: Format = typer.Option(Format.table, "--format", "-f", help="Output format on stdout (or --output)."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write the formatted report to this file instead of stdout."
    ),
    html: Path | None = typer.Option(None, "--html", help="Also write one self-contained HTML page (tables + plots)."),
    view_url: str = typer.Option(
        "http://127.0.0.1:8787",
        "--view-url",
        help="In the --html page, rows about runs link to them in `benchctl view` at this address "
        "(its default); '' for no links.",
    ),
    plots: Path | None = typer.Option(None, "--plots", help="Also write PNG plots into this directory."),
    exclude_fallback: bool = typer.Option(
        False, "--exclude-fallback", help="Leave out runs that fell back to another model."
    ),
    separate_fallback: bool = typer.Option(
        False, "--separate-fallback", help="Show runs that fell back as their own rows."
    ),
    by: By = typer.Option(By.auto, "--by", help="Row grouping: model, or model+harness (auto: harness when several)."),
    score: str | None = typer.Option(
        None,
        "--score",
        help="Headline grader of every task (default: each task's own: the first of combined, coverage, tldr, "
        "any_of_n, tournament that its \\[grading] graders list and that has grades).",
    ),
    table: str | None = typer.Option(
        None,
        "--table",
        help="Only this table (leaderboard, clusters, findings, comparisons, ...) in the --format output, in "
        "every format; `all`: every table (the default, except for csv: one table, the leaderboard unless "
        "named; `--format csv --table all -o DIR` writes <table>.csv for each). --html always has every table.",
    ),
    plan: float | None = typer.Option(
        None,
        "--plan",
        metavar="DELTA",
        help="Add a `plan` table: runs (seeds) per configuration that would detect a true score difference "
        "DELTA (e.g. 0.05) at 80% power, from the observed variance.",
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="Re-parse every file; do not read or write RESULTS_DIR/.benchctl-report-cache."
    ),
) -> None:
    """Leaderboard by model x budget (mean over seeds with 95% intervals), breakdowns, any-of-N and
    tournament tables, with provenance and mixed-judge warnings. Reads files only: no Docker, no network."""
    from benchctl.report.aggregate import Options
    from benchctl.report.build import build_report

    if not results_dir.is_dir():
        raise typer.BadParameter(
            f"{results_dir} is not a directory; pass the sweep directory `benchctl run` wrote.",
            param_hint="RESULTS_DIR",
        )
    opts = Options(
        by=by.value, exclude_fallback=exclude_fallback, separate_fallback=separate_fallback, score=score, plan=plan
    )
    try:
        rep = build_report(results_dir, opts, cache=not no_cache)
    except (ValueError, FileNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    # --table picks what the --format output holds (an unknown name fails before any file is written)
    out_rep = rep
    if format is Format.csv:
        table = table or "leaderboard"
    if table not in (None, "all"):
        from dataclasses import replace

        chosen = rep.table(table)
        if chosen is None:
            typer.echo(
                f"error: --table {table}: no table named {table!r} in this report; available: "
                f"{', '.join(t.name for t in rep.tables)}, or all",
                err=True,
            )
            raise typer.Exit(2)
        out_rep = replace(rep, tables=[chosen])
    if plots is not None or html is not None:
        from benchctl.report.plots import make_plots

        make_plots(rep)
    if plots is not None:
        plots.mkdir(parents=True, exist_ok=True)
        for name, png in rep.plots.items():
            (plots / name).write_bytes(png)
        typer.echo(f"wrote {len(rep.plots)} plots to {plots}", err=True)
    if html is not None:
        from benchctl.report.html import to_html

        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(to_html(rep, view_url or None), encoding="utf-8")
        typer.echo(f"wrote {html}", err=True)

    if format is Format.csv and table == "all":
        from benchctl.report.render_text import to_csv

        if output is None:
            typer.echo("error: --table all writes one CSV per table: give a directory with --output DIR", err=True)
            raise typer.Exit(2)
        output.mkdir(parents=True, exist_ok=True)
        for t in rep.tables:
            (output / f"{t.name}.csv").write_text(to_csv(rep, t.name), encoding="utf-8")
        typer.echo(f"wrote {len(rep.tables)} CSV files to {output}", err=True)
        return
    if format is Format.table:
        from benchctl.console import wide_console
        from benchctl.report.render_terminal import REPORT_WIDTH, print_report

        if output is not None:
            with output.open("w", encoding="utf-8") as f:
                print_report(out_rep, wide_console(REPORT_WIDTH, file=f, no_color=True))
            return
        print_report(out_rep)
        return
    from benchctl.report import render_text

    text = {
        Format.markdown: render_text.to_markdown,
        Format.json: render_text.to_json,
        Format.csv: lambda r: render_text.to_csv(r, r.tables[0].name),
    }[format](out_rep)
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
