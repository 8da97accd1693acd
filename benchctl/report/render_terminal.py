"""Rich tables for the terminal (the default `--format table`)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from benchctl.report.model import Report
from benchctl.report.provenance import provenance_lines


def print_report(report: Report, console: Console | None = None) -> None:
    console = console or Console()
    for w in report.warnings:
        console.print(Text(f"WARNING: {w}", style="bold yellow"))
    for t in report.tables:
        header, rows = t.view()
        rt = RichTable(title=t.title, title_justify="left", show_lines=False, header_style="bold")
        for h in header:
            rt.add_column(h, overflow="fold")
        for row in rows:
            rt.add_row(*row)
        console.print(rt)
        for n in t.notes:
            console.print(Text(n, style="dim"))
        console.print()
    for line in provenance_lines(report.provenance):
        console.print(Text(line, style="dim"))
