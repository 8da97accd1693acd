"""One self-contained HTML page: warnings, every table, the plots as base64 PNG, provenance.
No external CSS, fonts or scripts, so the file can be mailed or archived as is."""

from __future__ import annotations

import base64
import html

from benchctl.jsonio import dumps
from benchctl.report.model import Report, Table
from benchctl.report.provenance import provenance_lines

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:.5em 0 .3em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;white-space:nowrap}
th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}
.note{color:#666;font-size:12px;margin:.2em 0}
.warn{background:#fff3cd;border:1px solid #e0c36a;padding:.5em 1em;margin:.5em 0}
.prov{color:#555;font-size:12px}img{max-width:100%;margin:1em 0;border:1px solid #eee}
"""


def _table(t: Table) -> str:
    header, rows = t.view()
    e = html.escape
    out = [f'<section id="{e(t.name)}"><h2>{e(t.title)}</h2>']
    if rows:
        out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>")
        out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
        out.append("</tbody></table>")
    else:
        out.append('<p class="note">(no rows)</p>')
    out += [f'<p class="note">{e(n)}</p>' for n in t.notes]
    out.append("</section>")
    return "\n".join(out)


def to_html(report: Report) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>benchctl report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>benchctl report</h1>",
    ]
    parts += [f'<div class="warn">Warning: {e(w)}</div>' for w in report.warnings]
    for t in report.tables:
        parts.append(_table(t))
    if report.plots:
        parts.append('<section id="plots"><h2>Plots</h2>')
        for name, png in report.plots.items():
            b64 = base64.b64encode(png).decode("ascii")
            parts.append(
                f'<figure><img alt="{e(name)}" src="data:image/png;base64,{b64}">'
                f'<figcaption class="note">{e(name)}</figcaption></figure>'
            )
        parts.append("</section>")
    parts.append('<section id="provenance"><h2>Provenance</h2><ul class="prov">')
    parts += [f"<li>{e(line)}</li>" for line in provenance_lines(report.provenance)]
    full = dumps(report.provenance, pretty=True).decode()
    parts.append(
        f'</ul><details><summary>full provenance (JSON)</summary><pre class="prov">{e(full)}</pre>'
        "</details></section></body></html>"
    )
    return "\n".join(parts) + "\n"
