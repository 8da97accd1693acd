"""The `comparisons` table: every pair of leaderboard rows that differ in exactly one dimension,
with the difference of their headline scores, its 95 % interval, p, Holm-adjusted p and the
design's minimum detectable effect (statistics in `inference`).

Rows:
- per task: two configurations of one task that differ in one of DIMENSIONS;
- across tasks (when the results hold several tasks with the same headline grader): the same pair
  with the task left open, paired by task — and by data variant, unless the variant is the
  dimension compared — so each (task, variant) cell gives its own difference and the row is their
  equally weighted mean (`inference.stratified`);
- tournament: every pair of rated auditors, the Elo difference with its bootstrap interval over
  environments, as the tournament grader wrote it into ratings.json (`pairwise`).

Only runs that count towards the leaderboard's mean count here (`aggregate.averaged`, a headline
score). Scores are compared within one task's headline grader (`headline_of(task)`): a difference
of two different graders' scores is never taken. Any-of-N success (score ≥ 0.5, as the any-of-N
table counts) is compared as proportions, with exact p-values (`exact`). Per-run tournament shares
are not compared (matches within an environment are not independent); the Elo rows are.

Holm's adjustment runs over every row of the table that has a p-value (one family: the table).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from benchctl.report.aggregate import PROPORTION_GRADERS, SUCCESS_AT, Config, Grouping, averaged, field_of
from benchctl.report.inference import (
    Z80,
    Z975,
    Cell,
    Result,
    Summary,
    TDiff,
    by_seed,
    holm,
    paired_t,
    proportions,
    stratified,
    summary,
    t_results,
    welch,
)
from benchctl.report.model import NA, Column, Display, Table, fmt

HeadlineOf = Callable[[str], "str | None"]  # task -> the grader whose score is that task's headline
DIMENSIONS = ("model", "harness", "budget", "variant", "tools", "fell_back")
NOT_COMPARED = frozenset({"tournament"})
SIGNIFICANT = 0.05

Scores = list[tuple[Any, float]]  # (seed, headline score) of one configuration's averaged runs


def scores_by_config(grouping: Grouping, headline_of: HeadlineOf) -> dict[Config, Scores]:
    out: dict[Config, Scores] = {}
    for c, runs in grouping.groups.items():
        grader = headline_of(c.task)
        if grader is None or grader in NOT_COMPARED:
            continue
        out[c] = [(field_of(r, "seed"), s) for r in runs if averaged(r) and (s := r.score(grader)) is not None]
    return out


def _value(c: Config, dim: str) -> Any:
    return (c.budget_s, c.budget) if dim == "budget" else getattr(c, dim)


def _order(dim: str, v: Any) -> tuple[Any, ...]:
    """The `a` side is the earlier: smaller budget, the original data, runs that kept their model."""
    if dim == "variant":
        return (v != "original", v)
    return (v,) if dim in ("budget", "fell_back") else (str(v),)


def _rest(c: Config, dim: str, pooled: tuple[str, ...] = ()) -> tuple[Any, ...]:
    return tuple(_value(c, d) for d in ("task", *DIMENSIONS) if d != dim and d not in pooled)


def _label(dim: str, c: Config) -> str:
    if dim == "budget":
        return c.budget
    if dim == "fell_back":
        return "fell back" if c.fell_back else "kept its model"
    return str(getattr(c, dim))


def compare(a: Scores, b: Scores, grader: str, pair_seeds: bool, summaries: dict[int, Summary]) -> TDiff | Cell:
    """One cell's difference b − a: a proportions cell for success rates, else a t-difference —
    paired by seed when asked for and both sides have the same seeds, else Welch. `summaries`
    keeps each configuration's mean and variance (a configuration is in many pairs)."""
    if grader in PROPORTION_GRADERS:
        return Cell(sum(s >= SUCCESS_AT for _, s in a), len(a), sum(s >= SUCCESS_AT for _, s in b), len(b))
    pairs = by_seed(a, b) if pair_seeds else None
    if pairs is not None:
        return paired_t(pairs)
    for x in (a, b):
        if id(x) not in summaries:
            summaries[id(x)] = summary([s for _, s in x])
    return welch(summaries[id(a)], summaries[id(b)])


class _Rows:
    """Rows waiting for their statistics: t-differences are finished together (vectorised)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.pending: list[tuple[dict[str, Any], TDiff]] = []

    def add(self, row: dict[str, Any], stat: TDiff | Cell | list[Cell] | Result) -> None:
        """A row with its statistic: a t-difference (finished later), cells of success counts (one:
        Newcombe; several: stratified over tasks), or a finished Result."""
        if isinstance(stat, TDiff):
            self.pending.append((row, stat))
        elif isinstance(stat, Result):
            _fill(row, stat)
        elif isinstance(stat, Cell):
            _fill(row, proportions([stat]))
        else:
            _fill(row, proportions(stat))
        self.rows.append(row)

    def finish(self) -> list[dict[str, Any]]:
        for (row, _), res in zip(self.pending, t_results([t for _, t in self.pending])):
            _fill(row, res)
        for row, p in zip(self.rows, holm([r["p"] for r in self.rows])):
            row["p_holm"] = p
        return self.rows


def _fill(row: dict[str, Any], r: Result) -> None:
    row.update(diff=r.diff, lo=r.lo, hi=r.hi, p=r.p, mde=r.mde, n_a=r.n_a, n_b=r.n_b, paired=r.paired, method=r.method)


def _fields(grouping: Grouping, c: Config, drop: Iterable[str]) -> dict[str, Any]:
    return {k: v for k, v in grouping.key_fields(c).items() if k not in drop}


def _row(grouping: Grouping, dim: str, a: Config, b: Config, task: str | None, grader: str) -> dict[str, Any]:
    drop = ("task",) if task is not None else ("task", *(("variant",) if dim != "variant" else ()))
    return {
        "dimension": dim,
        "a": _fields(grouping, a, drop),
        "b": _fields(grouping, b, drop),
        "task": task,
        "grader": grader,
        "_labels": (_label(dim, a), _label(dim, b), _where(grouping, a, dim, drop)),
    }


def _where(grouping: Grouping, c: Config, dim: str, drop: tuple[str, ...]) -> str:
    """The fields both sides share, for the human view."""
    parts = []
    if dim != "model":
        parts.append(c.model)
    if dim != "harness" and c.harness:
        parts.append(c.harness)
    if dim != "budget":
        parts.append(c.budget)
    for d in ("variant", "tools"):
        if d != dim and d not in drop and grouping.varies[d]:
            parts.append(getattr(c, d))
    if dim != "fell_back" and c.fell_back:
        parts.append("fell back")
    return " · ".join(p for p in parts if p)


def _pairs(configs: Iterable[Config], dim: str) -> Iterable[tuple[Config, Config]]:
    """Pairs of configurations equal in everything but `dim`, the earlier one first."""
    buckets: dict[tuple[Any, ...], list[Config]] = defaultdict(list)
    for c in configs:
        buckets[_rest(c, dim)].append(c)
    for key in sorted(buckets, key=repr):
        group = sorted(buckets[key], key=lambda c: _order(dim, _value(c, dim)))
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                yield a, b


def comparisons_table(
    grouping: Grouping, headline_of: HeadlineOf, ratings: dict[str, Any] | None = None
) -> Table | None:
    scores = scores_by_config(grouping, headline_of)
    summaries: dict[int, Summary] = {}
    out = _Rows()
    by_task: dict[str, list[Config]] = defaultdict(list)
    for c, s in scores.items():
        if s:
            by_task[c.task].append(c)
    for task in sorted(by_task):
        grader = headline_of(task)
        assert grader is not None  # scores_by_config keeps only tasks with a headline
        for dim in DIMENSIONS:
            for a, b in _pairs(by_task[task], dim):
                out.add(
                    _row(grouping, dim, a, b, task, grader),
                    compare(scores[a], scores[b], grader, dim == "variant", summaries),
                )
    tasks_of: dict[str, list[str]] = defaultdict(list)
    for task in by_task:
        tasks_of[headline_of(task) or ""].append(task)
    for grader, tasks in sorted(tasks_of.items()):
        if len(tasks) > 1:
            _across(grouping, out, [c for t in tasks for c in by_task[t]], scores, grader, summaries)
    for row in elo_rows(ratings):
        out.add(row, row.pop("_result"))
    rows = out.finish()
    if not rows:
        return None
    return _table(rows)


def _across(
    grouping: Grouping,
    out: _Rows,
    configs: list[Config],
    scores: dict[Config, Scores],
    grader: str,
    summaries: dict[int, Summary],
) -> None:
    """Rows across tasks: each pair of configurations (task — and variant, unless compared — left
    open) over the (task, variant) cells where both were run, when those span at least two tasks."""
    for dim in DIMENSIONS:
        pooled = ("task",) if dim == "variant" else ("task", "variant")
        buckets: dict[tuple[Any, ...], dict[Any, dict[tuple[Any, ...], Config]]] = defaultdict(
            lambda: defaultdict(dict)
        )
        for c in configs:
            unit = tuple(_value(c, d) for d in pooled)
            buckets[_rest(c, dim, pooled)][_value(c, dim)][unit] = c
        for key in sorted(buckets, key=repr):
            values = sorted(buckets[key], key=lambda v: _order(dim, v))
            for i, va in enumerate(values):
                for vb in values[i + 1 :]:
                    cells_a, cells_b = buckets[key][va], buckets[key][vb]
                    units = sorted(set(cells_a) & set(cells_b), key=repr)
                    if len({u[0] for u in units}) < 2:
                        continue
                    a0, b0 = cells_a[units[0]], cells_b[units[0]]
                    parts = [
                        compare(scores[cells_a[u]], scores[cells_b[u]], grader, dim == "variant", summaries)
                        for u in units
                    ]
                    row = _row(grouping, dim, a0, b0, None, grader)
                    row["_units"] = len(units)
                    if grader in PROPORTION_GRADERS:
                        out.add(row, [p for p in parts if isinstance(p, Cell)])
                    else:
                        out.add(row, stratified([p for p in parts if isinstance(p, TDiff)]))


def elo_rows(ratings: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Pairwise Elo differences from ratings.json (`pairwise`: the tournament grader's bootstrap)."""
    if not ratings:
        return []
    # n_a / n_b are runs, as in every other row ("runs a / b"), not the matches they played: an
    # auditor's 3 runs against another's 3 play 9 matches
    runs = {r.get("auditor"): r.get("runs") or 0 for r in ratings.get("leaderboard") or []}
    rows = []
    for pw in ratings.get("pairwise") or []:
        a, b, se = pw.get("a"), pw.get("b"), pw.get("se")
        res = Result(
            pw.get("diff"),
            pw.get("lo"),
            pw.get("hi"),
            pw.get("p"),
            (Z975 + Z80) * se if isinstance(se, (int, float)) else None,
            int(runs.get(a, 0)),
            int(runs.get(b, 0)),
            True,
            "elo-bootstrap",
        )
        rows.append(
            {
                "dimension": "auditor",
                "a": {"auditor": a},
                "b": {"auditor": b},
                "task": None,
                "grader": "tournament",
                "_labels": (str(a), str(b), f"auditor = {ratings.get('auditor_key', '?')}"),
                "_result": res,
            }
        )
    return rows


KEYS = (
    "dimension",
    "a",
    "b",
    "task",
    "grader",
    "diff",
    "lo",
    "hi",
    "p",
    "p_holm",
    "mde",
    "n_a",
    "n_b",
    "paired",
    "method",
)


def significant(row: dict[str, Any]) -> bool:
    return row.get("p_holm") is not None and row["p_holm"] < SIGNIFICANT


def _num(row: dict[str, Any], key: str) -> str:
    v = row.get(key)
    if v is None:
        return NA
    return f"{v:+.0f}" if row["grader"] == "tournament" else f"{v:+.3f}"


def _p(v: float | None) -> str:
    if v is None:
        return NA
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def _diff_cell(r: dict[str, Any]) -> str:
    if r["lo"] is None or r["hi"] is None:
        return _num(r, "diff")
    return f"{_num(r, 'diff')} [{_num(r, 'lo')}, {_num(r, 'hi')}]"


def _mde_cell(r: dict[str, Any]) -> str:
    if r["mde"] is None:
        return NA
    return f"{r['mde']:.0f}" if r["grader"] == "tournament" else fmt("score", r["mde"])


def _task_cell(r: dict[str, Any]) -> str:
    if r["task"] is not None:
        return str(r["task"])
    return "tournament" if r["grader"] == "tournament" else f"all ({r.get('_units')} cells)"


def _table(rows: list[dict[str, Any]]) -> Table:
    n = len(rows)
    tested = sum(r["p"] is not None for r in rows)
    raw = sum(r["p"] is not None and r["p"] < SIGNIFICANT for r in rows)
    adj = sum(significant(r) for r in rows)
    cols = [Column(k, k, "text") for k in KEYS]
    for c in cols:
        if c.key in ("diff", "lo", "hi", "p", "p_holm", "mde"):
            c.kind = "float"
    display: list[tuple[str, Display]] = [
        ("task", _task_cell),
        ("grader", lambda r: r["grader"]),
        ("compared", lambda r: f"{r['dimension']}: {r['_labels'][0]} → {r['_labels'][1]}"),
        ("where", lambda r: r["_labels"][2]),
        ("Δ = b − a (95% CI)", _diff_cell),
        ("p", lambda r: _p(r["p"])),
        ("p (Holm)", lambda r: _p(r["p_holm"])),
        ("MDE", _mde_cell),
        ("runs a / b", lambda r: f"{r['n_a']} / {r['n_b']}"),
        ("method", lambda r: r["method"]),
    ]
    notes = [
        f"{n} comparisons; {tested} with a p-value, {raw} below 0.05 before and {adj} after Holm's adjustment "
        f"over the table.",
        "Δ = b − a of the headline score (Elo points for the tournament); 95% interval; two-sided p; MDE = the "
        "smallest true difference this design detects at α = 0.05 with 80% power. Within a task: Welch's t (runs "
        "are independent; variances may differ), paired by seed for data variants when both sides have the same "
        "seeds; success rates: Newcombe's interval and an exact p (Boschloo's test; across tasks the exact "
        "conditional test), valid at any number of runs — significance is decided by p, and an interval that would "
        "exclude 0 where p ≥ 0.05 is extended to 0. Across tasks (task = all): the mean of the "
        "per-task (and per-variant) differences, each cell weighted equally, paired by task. Tournament: the "
        "bootstrap over environments.",
    ]
    t = Table("comparisons", "Comparisons (b − a)", cols, rows, notes, display)
    t.terminal_filter = significant
    t.terminal_note = (
        f"{adj} of {n} comparisons significant after Holm's adjustment (p < 0.05); all of them: "
        f"`--format csv --table comparisons` or `--format json`."
    )
    return t


VariantKey = tuple[Any, ...]  # (task, budget_s, budget, model, harness, tools, fell_back): a variants-table row


def variant_key(c: Config) -> VariantKey:
    return (c.task, c.budget_s, c.budget, c.model, c.harness, c.tools, c.fell_back)


def variant_deltas(grouping: Grouping, headline_of: HeadlineOf) -> dict[Any, dict[str, Result]]:
    """Δ = variant − original with interval and p for each variants-table row (paired by seed where
    both sides have the same seeds), and under the key ("all", task) the equally weighted mean of
    those Δs over the rows of a task that have both (the lab-bias question: does the variant move
    scores at all?)."""
    scores = scores_by_config(grouping, headline_of)
    cells: dict[VariantKey, dict[str, Scores]] = defaultdict(dict)
    for c, s in scores.items():
        if s:
            cells[variant_key(c)][c.variant] = s
    stats: dict[Any, dict[str, TDiff | Cell | list[Cell]]] = defaultdict(dict)
    pooled: dict[tuple[str, str], list[TDiff | Cell]] = defaultdict(list)
    for key, by_variant in cells.items():
        base = by_variant.get("original")
        if base is None:
            continue
        for v, s in by_variant.items():
            if v != "original":
                part = compare(base, s, headline_of(key[0]) or "", True, {})
                stats[key][v] = part
                pooled[(key[0], v)].append(part)
    for (task, v), parts in pooled.items():
        if len(parts) > 1:
            cell_parts = [p for p in parts if isinstance(p, Cell)]
            stats[("all", task)][v] = cell_parts or stratified([p for p in parts if isinstance(p, TDiff)])
    flat = [(k, v, st) for k, d in stats.items() for v, st in d.items()]
    t_rows = [(k, v, st) for k, v, st in flat if isinstance(st, TDiff)]
    out: dict[Any, dict[str, Result]] = defaultdict(dict)
    for (k, v, _), res in zip(t_rows, t_results([st for _, _, st in t_rows if isinstance(st, TDiff)])):
        out[k][v] = res
    for k, v, st in flat:
        if isinstance(st, Cell):
            out[k][v] = proportions([st])
        elif isinstance(st, list):
            out[k][v] = proportions(st)
    return out
