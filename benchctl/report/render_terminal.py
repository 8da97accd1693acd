"""Rich tables for the terminal (the default `--format table`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from benchctl.console import wide_console
from benchctl.report.model import Report
from benchctl.report.provenance import provenance_lines

# Long per-run listings are cut in the terminal (rich renders ~1 ms per row); the note says how
# to get all of them. Tables of configurations are never cut.
LISTINGS = frozenset({"unscored", "matches"})
# Columns of a report printed anywhere but a terminal (report tables have more columns than grading's).
REPORT_WIDTH = 200


def print_report(report: Report, console: Console | None = None, max_listing_rows: int = 40) -> None:
    console = console or wide_console(REPORT_WIDTH)
    for w in report.warnings:
        console.print(Text(f"WARNING: {w}", style="bold yellow"))
    for t in report.tables:
        header, rows = t.view(None if t.terminal_filter is None else [r for r in t.rows if t.terminal_filter(r)])
        rt = RichTable(title=t.title, title_justify="left", show_lines=False, header_style="bold")
        for h in header:
            rt.add_column(h, overflow="fold")
        cut = len(rows) - max_listing_rows if t.name in LISTINGS and len(rows) > max_listing_rows else 0
        for row in rows[: len(rows) - cut]:
            # cells are data, some of it agent- or judge-written (reasons, errors): text, never rich markup
            rt.add_row(*(Text(cell) for cell in row))
        console.print(rt)
        if cut:
            console.print(
                Text(
                    f"... {cut} more rows: `benchctl report DIR --format csv --table {t.name}` lists all.",
                    style="yellow",
                )
            )
        if t.terminal_note:
            console.print(Text(t.terminal_note, style="yellow"))
        for n in t.notes:
            console.print(Text(n, style="dim"))
        console.print()
    for line in provenance_lines(report.provenance):
        console.print(Text(line, style="dim"))
