"""One self-contained HTML page: warnings, every table, the plots as base64 PNG, provenance.
No external CSS, fonts or scripts, so the file can be mailed or archived as is. With `view_url`
(the address of `benchctl view` on this results dir), rows about runs link to them there
(`benchctl.view.links`)."""

from __future__ import annotations

import base64
import html

from benchctl.jsonio import dumps
from benchctl.report.model import Report, Table
from benchctl.report.provenance import provenance_lines
from benchctl.view.links import table_links

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:.5em 0 .3em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;white-space:nowrap}
th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}
.note{color:#666;font-size:12px;margin:.2em 0}
.warn{background:#fff3cd;border:1px solid #e0c36a;padding:.5em 1em;margin:.5em 0}
.prov{color:#555;font-size:12px}img{max-width:100%;margin:1em 0;border:1px solid #eee}
"""


def _table(t: Table, view_url: str | None) -> str:
    header, rows = t.view()
    e = html.escape
    links = table_links(t.name, t.rows) if view_url else None
    out = [f'<section id="{e(t.name)}"><h2>{e(t.title)}</h2>']
    if rows:
        head = "".join(f"<th>{e(h)}</th>" for h in header) + ("<th></th>" if links else "")
        out.append(f"<table><thead><tr>{head}</tr></thead><tbody>")
        for k, row in enumerate(rows):
            cells = "".join(f"<td>{e(c)}</td>" for c in row)
            if links:
                link = links[k]
                cells += (
                    f'<td><a href="{e(view_url + link[1])}">{e(link[0])}</a></td>' if link and view_url else "<td></td>"
                )
            out.append(f"<tr>{cells}</tr>")
        out.append("</tbody></table>")
    else:
        out.append('<p class="note">(no rows)</p>')
    out += [f'<p class="note">{e(n)}</p>' for n in t.notes]
    out.append("</section>")
    return "\n".join(out)


def to_html(report: Report, view_url: str | None = None) -> str:
    e = html.escape
    view_url = view_url.rstrip("/") if view_url else None
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>benchctl report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>benchctl report</h1>",
    ]
    parts += [f'<div class="warn">Warning: {e(w)}</div>' for w in report.warnings]
    if view_url:
        parts.append(
            f'<p class="note">Rows about runs link to them in <code>benchctl view</code> at {e(view_url)} '
            "(start it on this results directory to follow them).</p>"
        )
    for t in report.tables:
        parts.append(_table(t, view_url))
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
