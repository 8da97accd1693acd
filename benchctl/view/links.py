"""Where the runs behind a report row are in `benchctl view`: a path on the viewer for each row of
the tables that are about runs, used by the viewer's report page and by the HTML report
(`benchctl report --html`, whose links point at a running `benchctl view`).

- leaderboard, any-of-N: the runs page filtered to the row's configuration;
- per-finding hit rates: the runs page filtered to the runs that found the finding;
- runs without a score: the run;
- tournament: the runs page filtered to the auditor's runs; a match: the two runs compared.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from benchctl.report.model import NA

# The row keys that name a configuration, as the runs page filters them.
CONFIG_KEYS = ("task", "harness", "model", "budget", "variant", "tools")


def _runs(filters: dict[str, Any]) -> str | None:
    given = {k: str(v) for k, v in filters.items() if v not in (None, "", NA)}
    return "/?" + urlencode(given) if given else None


def row_link(table: str, row: dict[str, Any]) -> tuple[str, str] | None:
    """(link text, viewer path) of a report row's runs, or None for rows that are not about runs."""
    if table in ("leaderboard", "any_of_n"):
        path = _runs({k: row.get(k) for k in CONFIG_KEYS})
        return ("runs", path) if path else None
    if table == "findings":
        path = _runs({"found": row.get("finding")})
        return ("runs that found it", path) if path else None
    if table == "unscored" and row.get("run_id"):
        return "run", "/run/" + quote(str(row["run_id"]), safe="")
    if table == "tournament":
        path = _runs({"auditor": row.get("auditor")})
        return ("runs", path) if path else None
    if table == "matches" and row.get("run_a") and row.get("run_b"):
        return "compare", "/compare?" + urlencode([("run", str(row["run_a"])), ("run", str(row["run_b"]))])
    return None


def table_links(table: str, rows: list[dict[str, Any]]) -> list[tuple[str, str] | None] | None:
    """row_link for each row, or None when no row of the table has one."""
    links = [row_link(table, r) for r in rows]
    return links if any(links) else None
