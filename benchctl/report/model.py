"""The report as data: named tables of raw values, plus provenance and warnings.

Every output format renders the same `Report`. Tables keep raw numbers (floats in 0..1, USD,
seconds, None for "no value") so CSV and JSON round-trip exactly; the human formats (terminal,
markdown, HTML) format cells through `Table.view()`, which may merge raw columns (a mean and
its interval) into one display column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Column:
    key: str
    label: str
    kind: str = "text"  # text | int | score | usd | seconds | pct | float
    hidden: bool = False  # raw-only: in CSV/JSON, not in human tables


Display = Callable[[dict[str, Any]], str]


@dataclass
class Table:
    name: str  # machine name: "leaderboard", "clusters", ...
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    # Human view override: (label, cell function). None = every non-hidden column, formatted.
    display: list[tuple[str, Display]] | None = None
    # The terminal shows only the rows this keeps (every other format shows all), then terminal_note.
    terminal_filter: Callable[[dict[str, Any]], bool] | None = None
    terminal_note: str = ""

    def view(self, rows: list[dict[str, Any]] | None = None) -> tuple[list[str], list[list[str]]]:
        rows = self.rows if rows is None else rows
        if self.display is not None:
            return [lbl for lbl, _ in self.display], [[fn(r) for _, fn in self.display] for r in rows]
        cols = [c for c in self.columns if not c.hidden]
        return [c.label for c in cols], [[fmt(c.kind, r.get(c.key)) for c in cols] for r in rows]

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "columns": [c.key for c in self.columns],
            "rows": [{c.key: r.get(c.key) for c in self.columns} for r in self.rows],
            "notes": self.notes,
        }


@dataclass
class Report:
    tables: list[Table]
    provenance: dict[str, Any]
    warnings: list[str]
    # name -> PNG bytes; filled only when plots are asked for (matplotlib is slow to import)
    plots: dict[str, bytes] = field(default_factory=dict)
    # Data the plot module needs that tables do not carry in plottable form.
    plot_data: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> Table | None:
        return next((t for t in self.tables if t.name == name), None)


NA = "–"


def fmt(kind: str, v: Any) -> str:
    if v is None:
        return NA
    if kind == "score":
        return f"{v:.3f}"
    if kind == "pct":
        return f"{100 * v:.0f}%"
    if kind == "usd":
        return f"${v:.4f}" if v < 1 else f"${v:.2f}"
    if kind == "seconds":
        return f"{v / 60:.1f} min" if v >= 120 else f"{v:.0f} s"
    if kind == "int":
        return f"{int(v):,}"
    if kind == "float":
        return f"{v:.1f}"
    return str(v)


def fmt_interval(mean: float | None, lo: float | None, hi: float | None, kind: str = "score") -> str:
    if mean is None:
        return NA
    if lo is None or hi is None:
        return fmt(kind, mean)
    return f"{fmt(kind, mean)} [{fmt(kind, lo)}, {fmt(kind, hi)}]"
