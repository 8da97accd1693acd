"""Tool use per configuration, for every task: which tools the agents called, how often.

One row per (configuration, tool): `runs_called` of `n_runs` runs called the tool at least once,
`calls_per_run` is the mean number of calls per run (0 for a run that never called it), and for
hidden-behaviour audits `target_probes_per_run` is the mean number of calls the target answered
per run (a scaffolded batch of 20 is 20 probes; meta `target_tools.target.calls`). An audit's
rows list every target tool its configuration offered, called or not, so "the agents never call
text completion in two-thirds of the runs" reads off the table.

A run's counts come from meta.json `tool_calls` (the runner counts the transcript's `tool_call`
events as they are written). Runs that count towards means (`aggregate.averaged`) are counted; a
run recorded before that field existed is left out and the note says how many (reading every
transcript instead would cost a large sweep's report more than the rest of it together).
"""

from __future__ import annotations

from benchctl.report.aggregate import Grouping, averaged
from benchctl.report.load import Run
from benchctl.report.model import Column, Table, fmt
from benchctl.stats import mean_or_none


def run_tool_calls(run: Run) -> dict[str, int] | None:
    """Tool name -> calls in one run (meta.json `tool_calls`); None for a run recorded without them."""
    counts = run.meta.get("tool_calls")
    if not isinstance(counts, dict):
        return None
    return {str(k): v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)}


def _offered(runs: list[Run]) -> list[str]:
    """The target tools the runs' tool configuration offered (audits), in its order."""
    out: dict[str, None] = {}
    for r in runs:
        tt = r.meta.get("target_tools")
        if isinstance(tt, dict) and isinstance(tt.get("tools"), list):
            out.update(dict.fromkeys(str(t) for t in tt["tools"]))
    return list(out)


def _target_probes(runs: list[Run]) -> float | None:
    calls = []
    for r in runs:
        tt = r.meta.get("target_tools")
        target = tt.get("target") if isinstance(tt, dict) else None
        if isinstance(target, dict) and isinstance(target.get("calls"), int):
            calls.append(float(target["calls"]))
    return mean_or_none(calls)


def tool_use(grouping: Grouping) -> Table | None:
    rows = []
    unknown = 0
    for c in grouping.sorted_keys():
        counted: list[tuple[Run, dict[str, int]]] = []
        for r in grouping.groups[c]:
            if not averaged(r):
                continue
            calls = run_tool_calls(r)
            if calls is None:
                unknown += 1
            else:
                counted.append((r, calls))
        if not counted:
            continue
        offered = _offered([r for r, _ in counted])
        others = sorted({t for _, calls in counted for t in calls} - set(offered))
        probes = _target_probes([r for r, _ in counted])
        n = len(counted)
        for tool in offered + others:
            per_run = [calls.get(tool, 0) for _, calls in counted]
            k = sum(1 for v in per_run if v > 0)
            rows.append(
                {"tools": c.tools or None}
                | grouping.key_fields(c)
                | {
                    "tool": tool,
                    "target_tool": tool in offered,
                    "runs_called": k,
                    "n_runs": n,
                    "share_called": k / n,
                    "calls_per_run": sum(per_run) / n,
                    "target_probes_per_run": probes,
                }
            )
    if not rows:
        return None
    key_cols = grouping.key_columns()
    if not any(c.key == "tools" for c in key_cols) and any(r["tools"] for r in rows):
        key_cols.append(Column("tools", "tools"))  # an audit's one tool configuration: named all the same
    cols = key_cols + [
        Column("tool", "tool"),
        Column("target_tool", "target tool", hidden=True),
        Column("runs_called", "runs that called it", "int"),
        Column("n_runs", "runs", "int"),
        Column("share_called", "share of runs", "pct"),
        Column("calls_per_run", "calls per run", "float"),
        Column("target_probes_per_run", "target probes per run", "float"),
    ]
    display = [
        (c.label, (lambda k, kind: lambda r: fmt(kind, r.get(k)))(c.key, c.kind)) for c in key_cols if not c.hidden
    ] + [
        ("tool", lambda r: r["tool"] + (" (target)" if r["target_tool"] else "")),
        ("called in", lambda r: f"{r['runs_called']}/{r['n_runs']} = {fmt('pct', r['share_called'])}"),
        ("calls per run", lambda r: f"{r['calls_per_run']:.2f}"),
        ("target probes per run", lambda r: fmt("float", r["target_probes_per_run"])),
    ]
    notes = [
        "Per configuration and tool: runs that called the tool at least once, and calls per run (runs that "
        "never called it count 0). Audits list every target tool their configuration offered; target probes "
        "per run = calls the target answered (a scaffolded batch counts each input). Error and unfinished "
        "runs are left out."
    ]
    if unknown:
        notes.append(
            f"{unknown} run(s) left out: recorded before benchctl counted tool calls (no meta.json tool_calls)."
        )
    return Table("tool_use", "Tool use", cols, rows, notes, display)
