"""Plain-text formats: Markdown, CSV and JSON. Each carries the provenance and the warnings.

CSV holds one table (the leaderboard unless another is named) with raw values; provenance and
warnings come first as `# ` comment lines (read it with `pandas.read_csv(f, comment="#")` or
skip lines starting with '#').
"""

from __future__ import annotations

import csv
import io
from typing import Any

from benchctl.jsonio import dumps
from benchctl.report.model import Report, Table
from benchctl.report.provenance import provenance_lines


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def table_markdown(t: Table) -> str:
    header, rows = t.view()
    out = [f"## {t.title}", ""]
    if not rows:
        out.append("_(no rows)_")
    else:
        out.append("| " + " | ".join(_md_cell(h) for h in header) + " |")
        out.append("|" + "|".join("---" for _ in header) + "|")
        out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    if t.notes:
        out.append("")
        out += [f"> {n}" for n in t.notes]
    return "\n".join(out)


def to_markdown(report: Report) -> str:
    parts = ["# benchctl report", ""]
    if report.warnings:
        parts += [f"**Warning:** {w}" for w in report.warnings] + [""]
    parts += ["\n\n".join(table_markdown(t) for t in report.tables), "", "## Provenance", ""]
    parts += [f"- {line}" for line in provenance_lines(report.provenance)]
    return "\n".join(parts) + "\n"


def to_csv(report: Report, table: str = "leaderboard") -> str:
    t = report.table(table)
    if t is None:
        raise ValueError(
            f"no table named {table!r} in this report; available: {', '.join(x.name for x in report.tables)}"
        )
    buf = io.StringIO()
    for line in provenance_lines(report.provenance):
        buf.write(f"# {line}\n")
    for warning in report.warnings:
        buf.write(f"# WARNING: {warning}\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.key for c in t.columns])
    for r in t.rows:
        w.writerow([_csv_cell(r.get(c.key)) for c in t.columns])
    return buf.getvalue()


def _csv_cell(v: Any) -> Any:
    """None as an empty cell; a dict or list (a comparison's configuration) as JSON, which any
    reader can parse back."""
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return dumps(v).decode()
    return v


def to_json_obj(report: Report) -> dict[str, Any]:
    return {
        "provenance": report.provenance,
        "warnings": report.warnings,
        "tables": {t.name: t.to_json() for t in report.tables},
    }


def to_json(report: Report) -> str:
    return dumps(to_json_obj(report), pretty=True).decode() + "\n"
