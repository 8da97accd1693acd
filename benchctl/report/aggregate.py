"""Group runs into configurations and build the leaderboard and the "runs without a score" list.

A configuration is (task, model, harness, budget, variant, tools); dimensions with a single
value in the results are left out of the row label. Honesty rules, enforced here:

- a run counts towards a mean only if its headline grade (its task's, see `report.headline`) has a
  score (an unscored grade is never 0) and the run did not end in `error` or is still `running`;
  every mean says "k of m scored" and which grader it is;
- error and unfinished runs, and runs a cost cap stopped (`budget_exhausted`), are counted in
  their row and listed, with their reason, in the `unscored` table — never silently averaged;
- runs that fell back to another model are labelled in their row ("2/3 fell back to X"), can
  be shown as separate rows (`separate_fallback`) or excluded (`exclude_fallback`, with a note).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchctl.report.headline import HEADLINE_ORDER, Headlines
from benchctl.report.load import UNFINISHED, Run
from benchctl.report.model import NA, Column, Table, fmt, fmt_interval
from benchctl.report.stats import mean_ci
from benchctl.stats import mean_or_none, wilson_interval

# "running" is what meta.json says while a run is in progress (never on disk from benchctl itself);
# UNFINISHED is a run directory without meta.json (killed, or still running).
# `budget_exhausted`: a cost cap stopped the run (benchctl/limits): finished, but cut short by money, not skill.
# graders scored 0/1 per run (a success): rates with Wilson / Newcombe intervals, never a t-interval
PROPORTION_GRADERS = frozenset({"any_of_n"})
SUCCESS_AT = 0.5  # an any-of-N score of at least this is a success (the leaderboard, contests, comparisons)
NOT_AVERAGED = frozenset({"error", "running", UNFINISHED, "budget_exhausted"})


@dataclass(frozen=True, order=True)
class Config:
    task: str
    model: str
    harness: str
    budget_s: float
    budget: str
    variant: str
    tools: str
    fell_back: bool = False


@dataclass
class Options:
    by: str = "auto"  # auto | model | model+harness
    exclude_fallback: bool = False
    separate_fallback: bool = False
    score: str | None = None  # headline grader of every task; None = each task's own (report.headline)
    plan: float | None = None  # --plan DELTA: the runs per configuration needed to detect DELTA (report.power)


def field_of(run: Run, key: str, default: Any = None) -> Any:
    """A RunMeta field, falling back to the resolved spec (older or partial metas)."""
    v = run.meta.get(key)
    if v is None:
        v = (run.meta.get("spec") or {}).get(key)
    return default if v is None else v


def budget_label(run: Run) -> tuple[float, str]:
    s = field_of(run, "budget_s")
    lbl = field_of(run, "budget")
    s = float(s) if isinstance(s, (int, float)) else math.inf
    if not lbl:
        lbl = NA if s == math.inf else (f"{s / 60:g}m" if s % 60 == 0 else f"{s:g}s")
    return s, str(lbl)


def fell_back(run: Run) -> bool:
    return bool(run.meta.get("fallbacks"))


def config_of(run: Run, opts: Options, harness_matters: bool) -> Config:
    return Config(*_config_key(run, opts, harness_matters))


def _config_key(run: Run, opts: Options, harness_matters: bool) -> tuple[Any, ...]:
    """Config's fields, in order, as a plain tuple: grouping 10,000 runs by tuples rather than by
    frozen dataclasses (whose __init__, __hash__ and __eq__ are Python code) takes half the time."""
    meta = run.meta
    spec = meta.get("spec") or {}

    def get(key: str) -> Any:  # field_of, with the spec looked up once
        v = meta.get(key)
        return spec.get(key) if v is None else v

    s, lbl = budget_label(run)
    # Tool configuration (any-of-N auditing): a run field, or a harness option of the spec.
    tools = get("tools") or (spec.get("options") or {}).get("tools") or ""
    if isinstance(tools, (list, tuple)):
        tools = "+".join(map(str, tools))
    task, model, harness = get("task"), get("model"), get("harness")
    return (
        NA if task is None else str(task),
        NA if model is None else str(model),
        (NA if harness is None else str(harness)) if harness_matters else "",
        s,
        lbl,
        str(get("variant") or "original"),
        str(tools),
        bool(meta.get("fallbacks")) if opts.separate_fallback else False,
    )


class Grouping:
    """Runs grouped by configuration, with knowledge of which dimensions vary (for labels)."""

    def __init__(self, runs: Iterable[Run], opts: Options):
        runs = list(runs)
        harnesses = {str(field_of(r, "harness", NA)) for r in runs}
        self.harness_matters = opts.by == "model+harness" or (opts.by == "auto" and len(harnesses) > 1)
        by_key: dict[tuple[Any, ...], list[Run]] = {}
        for r in runs:
            k = _config_key(r, opts, self.harness_matters)
            group = by_key.get(k)
            if group is None:
                by_key[k] = [r]
            else:
                group.append(r)
        self.groups: dict[Config, list[Run]] = defaultdict(list, ((Config(*k), g) for k, g in by_key.items()))
        keys = list(self.groups)
        self.varies = {d: len({getattr(k, d) for k in keys}) > 1 for d in ("task", "variant", "tools")}

    def sorted_keys(self) -> list[Config]:
        return sorted(
            self.groups, key=lambda c: (c.task, c.budget_s, c.variant, c.tools, c.model, c.harness, c.fell_back)
        )

    def model_label(self, c: Config) -> str:
        lbl = f"{c.model} / {c.harness}" if c.harness else c.model
        return lbl + (" (fell back)" if c.fell_back else "")

    def key_fields(self, c: Config) -> dict[str, Any]:
        d: dict[str, Any] = {"model": c.model}
        if self.harness_matters:
            d["harness"] = c.harness
        d["budget"] = c.budget
        d["budget_s"] = None if c.budget_s == math.inf else c.budget_s
        if self.varies["task"]:
            d["task"] = c.task
        if self.varies["variant"]:
            d["variant"] = c.variant
        if self.varies["tools"]:
            d["tools"] = c.tools
        d["fell_back"] = c.fell_back
        return d

    def key_columns(self) -> list[Column]:
        cols = [Column("model", "model")]
        if self.harness_matters:
            cols.append(Column("harness", "harness"))
        cols += [Column("budget", "budget"), Column("budget_s", "budget (s)", "float", hidden=True)]
        for d in ("task", "variant", "tools"):
            if self.varies[d]:
                cols.append(Column(d, d))
        cols.append(Column("fell_back", "fallback rows", hidden=True))
        return cols


def clip_interval(
    mean: float | None, lo: float | None, hi: float | None, floor: float = 0.0, ceil: float = 1.0
) -> tuple[float | None, float | None, float | None]:
    """Clip a t-interval to the range the score can take (grades are 0..1): with 3 seeds the
    t-interval is wide and would otherwise print impossible bounds such as -0.39."""
    if lo is None or hi is None:
        return mean, lo, hi
    return mean, max(floor, lo), min(ceil, hi)


def averaged(run: Run) -> bool:
    return run.meta.get("status") not in NOT_AVERAGED


def fallback_label(runs: list[Run]) -> str:
    fb = [r for r in runs if fell_back(r)]
    if not fb:
        return ""
    targets = Counter(str(r.meta["fallbacks"][-1].get("to", "?")) for r in fb)
    if len(targets) == 1:
        return f"{len(fb)}/{len(runs)} fell back to {next(iter(targets))}"
    return f"{len(fb)}/{len(runs)} fell back (" + ", ".join(f"{m} ×{n}" for m, n in targets.most_common()) + ")"


# The gateway's normalized usage keys are disjoint (gateway/wire/neutral.py): uncached input, cached input,
# cache writes and output (reasoning is part of output). Their sum is every token processed.
INPUT_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_tokens")


def token_counts(run: Run) -> tuple[int, int, int] | None:
    """(all, input, output) tokens of a run (input = the three INPUT_KEYS); None when its usage
    is unknown. Each is int() of a left-to-right sum from 0, so float counts round the same way."""
    u = run.meta.get("usage")
    if not isinstance(u, dict) or not u:
        return None
    inp = 0 + (u.get("input_tokens") or 0) + (u.get("cached_input_tokens") or 0) + (u.get("cache_write_tokens") or 0)
    out = u.get("output_tokens") or 0
    return int(inp + out), int(inp), int(0 + out)


def wait_share(run: Run) -> float | None:
    """Share of the run's budget its calls spent held back by rate limits (meta rate_limits.paused_s:
    overlapping waits once); None for runs recorded before benchctl kept it."""
    rl = run.meta.get("rate_limits")
    paused = rl.get("paused_s") if isinstance(rl, dict) else None
    s, _ = budget_label(run)
    if not isinstance(paused, (int, float)) or s in (0, math.inf):
        return None
    return float(paused) / s


def leaderboard(grouping: Grouping, headlines: Headlines) -> Table:
    rows = []
    for c in grouping.sorted_keys():
        runs = grouping.groups[c]
        headline = headlines.of_task(c.task)
        # One pass over the runs, filling the same lists, in the same order, as one comprehension
        # per column did (so every mean is bit-for-bit what it was), in two thirds of the time.
        scores: list[float] = []
        paired_costs: list[float] = []  # (cost, score) pairs: runs with both a known cost and a score
        paired_scores: list[float] = []
        cov: list[float] = []
        tldr: list[float] = []
        costs: list[float] = []
        toks: list[int] = []
        in_toks: list[int] = []
        out_toks: list[int] = []
        elapsed: list[float] = []
        for r in runs:
            meta = r.meta
            if meta.get("status") in NOT_AVERAGED:
                continue
            grades = r.grades
            s = None
            if headline and (g := grades.get((headline, None))) is not None and (s := g.score) is not None:
                scores.append(s)
            if (g := grades.get(("coverage", None))) is not None and g.score is not None:
                cov.append(g.score)
            if (g := grades.get(("tldr", None))) is not None and g.score is not None:
                tldr.append(g.score)
            cost = meta.get("cost_usd")
            if cost is not None:
                costs.append(float(cost))
                if s is not None:
                    paired_costs.append(float(cost))
                    paired_scores.append(s)
            if (t := token_counts(r)) is not None:
                toks.append(t[0])
                in_toks.append(t[1])
                out_toks.append(t[2])
            if (e := meta.get("elapsed_s")) is not None:
                elapsed.append(float(e))
        mean, lo, hi = clip_interval(*mean_ci(scores))
        if headline in PROPORTION_GRADERS and scores:
            # a success (0/1 per run) has the any-of-N table's Wilson interval, not a t-interval
            # (2 of 2 gave [1, 1]), as the comparisons use Newcombe's interval built from it
            lo, hi = wilson_interval(sum(1 for s in scores if s >= SUCCESS_AT), len(scores))
        # Cost per point: over runs with both a known cost and a score; one point = 0.01 of score.
        pts = math.fsum(paired_scores) * 100  # fsum: exactly rounded, whatever the order of the runs
        statuses = Counter([r.meta.get("status") for r in runs])
        row = grouping.key_fields(c) | {
            "grader": headline,
            "n_runs": len(runs),
            "n_scored": len(scores),
            "score_mean": mean,
            "score_lo": lo,
            "score_hi": hi,
            "score_best": max(scores) if scores else None,
            "coverage_mean": mean_or_none(cov),
            "n_coverage": len(cov),
            "tldr_mean": mean_or_none(tldr),
            "n_tldr": len(tldr),
            "fallback_runs": sum(fell_back(r) for r in runs),
            "fallback_label": fallback_label(runs),
            "refused": statuses.get("refused", 0),
            "timeouts": statuses.get("timeout", 0),
            "errors": statuses.get("error", 0),
            "unfinished": statuses.get("running", 0) + statuses.get(UNFINISHED, 0),
            "budget_exhausted": statuses.get("budget_exhausted", 0),
            "wait_share_mean": mean_or_none([w for r in runs if (w := wait_share(r)) is not None]),
            "cost_mean_usd": mean_or_none(costs),
            "n_priced": len(costs),
            "tokens_mean": mean_or_none(toks),
            "input_tokens_mean": mean_or_none(in_toks),
            "output_tokens_mean": mean_or_none(out_toks),
            "elapsed_mean_s": mean_or_none(elapsed),
            # mean_or_none is a float for the non-empty `elapsed` (None only for no values)
            "budget_used": (mean_or_none(elapsed) / c.budget_s)  # type: ignore[operator]
            if elapsed and c.budget_s not in (0, math.inf)
            else None,
            "cost_per_point_usd": (math.fsum(paired_costs) / pts) if pts > 0 else None,
        }
        rows.append(row)
    rows.sort(
        key=lambda r: (
            r.get("task", ""),
            r["budget_s"] if r["budget_s"] is not None else math.inf,
            -(r["score_mean"] if r["score_mean"] is not None else -1),
        )
    )
    single = headlines.single
    score_name = single or "score"
    cols = grouping.key_columns() + [
        Column("grader", "grader"),
        Column("n_runs", "runs", "int"),
        Column("n_scored", "scored", "int"),
        Column("score_mean", f"{score_name} mean", "score"),
        Column("score_lo", "95% lo", "score"),
        Column("score_hi", "95% hi", "score"),
        Column("score_best", "best run", "score"),
        Column("coverage_mean", "coverage", "score"),
        Column("n_coverage", "coverage n", "int"),
        Column("tldr_mean", "TLDR", "score"),
        Column("n_tldr", "TLDR n", "int"),
        Column("fallback_runs", "fallback runs", "int"),
        Column("fallback_label", "fallback"),
        Column("refused", "refused", "int"),
        Column("timeouts", "timeouts", "int"),
        Column("errors", "errors", "int"),
        Column("unfinished", "unfinished", "int"),
        Column("budget_exhausted", "cost-capped", "int"),
        Column("wait_share_mean", "rate-limit wait", "pct"),
        Column("cost_mean_usd", "mean cost", "usd"),
        Column("n_priced", "priced runs", "int"),
        Column("tokens_mean", "mean tokens", "int"),
        Column("input_tokens_mean", "mean input tokens", "int", hidden=True),
        Column("output_tokens_mean", "mean output tokens", "int", hidden=True),
        Column("elapsed_mean_s", "mean time", "seconds"),
        Column("budget_used", "budget used", "pct"),
        Column("cost_per_point_usd", "$ / point", "usd"),
    ]
    key_disp = [
        (c.label, (lambda k, kind: lambda r: fmt(kind, r.get(k)))(c.key, c.kind))
        for c in grouping.key_columns()
        if not c.hidden
    ]
    if any(r["fell_back"] for r in rows):
        key_disp[0] = ("model", lambda r: r["model"] + (" (fell back)" if r["fell_back"] else ""))
    # One grader: the score column is named after it. Several (a coverage task beside an audit): each
    # row says which grader its numbers are.
    display = key_disp + ([] if len(headlines.graders) < 2 else [("grader", lambda r: r["grader"] or NA)])
    display += [
        (f"{score_name} (95% CI)", lambda r: fmt_interval(r["score_mean"], r["score_lo"], r["score_hi"])),
        ("scored", lambda r: f"{r['n_scored']} of {r['n_runs']}"),
        ("best", lambda r: fmt("score", r["score_best"])),
        ("coverage", lambda r: _part(r, "coverage_mean", "n_coverage")),
        ("TLDR", lambda r: _part(r, "tldr_mean", "n_tldr")),
        ("fallback", lambda r: r["fallback_label"] or ""),
        ("refused", lambda r: str(r["refused"]) if r["refused"] else ""),
        (
            "errors",
            lambda r: ", ".join(
                f"{r[k]} {lbl}"
                for k, lbl in (("errors", "error"), ("unfinished", "unfinished"), ("budget_exhausted", "cost-capped"))
                if r[k]
            ),
        ),
        (
            "mean cost",
            lambda r: (
                fmt("usd", r["cost_mean_usd"])
                + ("" if r["n_priced"] in (0, r["n_runs"]) else f" ({r['n_priced']} priced)")
            ),
        ),
        ("tokens", lambda r: fmt("int", r["tokens_mean"])),
        (
            "time",
            lambda r: (
                fmt("seconds", r["elapsed_mean_s"])
                + (f" ({fmt('pct', r['budget_used'])})" if r["budget_used"] is not None else "")
            ),
        ),
        ("$/point", lambda r: fmt("usd", r["cost_per_point_usd"])),
    ]
    if any(r["wait_share_mean"] for r in rows):  # shown when some run waited for rate limits
        display.insert(-1, ("rate-limit wait", lambda r: fmt("pct", r["wait_share_mean"])))
    if not headlines.graders:
        notes = [
            "No grades yet, so no scores: run `benchctl grade RESULTS_DIR --judge MODEL` to score these runs. "
            "Error and unfinished runs are counted, never averaged."
        ]
    else:
        notes = [
            f"Score: mean of {what_score(headlines)} over scored runs with a Student-t 95% interval over seeds "
            f"(exact t quantile; clipped to 0–1; no interval with one run, or when every run has the same score); "
            f"any-of-N success rates with the Wilson interval. Unscored grades are never counted as 0; "
            f"error, unfinished and cost-capped (budget_exhausted) runs are not averaged. $/point = agent cost / "
            f"(100 × score), over runs with a known cost. Rate-limit wait: mean share of the budget the run's model "
            f"calls spent held back by rate limits (a paused budget gave that time back)."
        ]
    return Table("leaderboard", "Leaderboard", cols, rows, notes, display)


def what_score(headlines: Headlines) -> str:
    """The headline score in words, for notes."""
    if headlines.single:
        return f"the `{headlines.single}` grade"
    return (
        "each row's headline grade (column grader: its task's own, the first of "
        + ", ".join(HEADLINE_ORDER)
        + " that the task's [grading] graders list and that has grades; --score forces one)"
    )


def _part(r: dict[str, Any], mean_key: str, n_key: str) -> str:
    """A component mean, saying how many runs it covers when that is not all of them."""
    if r[mean_key] is None:
        return NA
    return fmt("score", r[mean_key]) + ("" if r[n_key] == r["n_runs"] else f" ({r[n_key]} of {r['n_runs']})")


def unscored_runs(runs: list[Run], headlines: Headlines) -> Table:
    """Every run without a headline score, with the reason — the other half of "k of m scored"."""
    rows = []
    for r in runs:
        status = r.meta.get("status")
        headline = headlines.of(r)
        g = r.grade(headline) if headline else None
        if status == "error":
            reason = f"run error: {r.meta.get('error') or 'no message'}"
        elif status == "running":
            reason = "run unfinished (meta.json says running)"
        elif status == UNFINISHED:
            reason = unfinished_reason(r)
        elif status == "budget_exhausted":
            reason = f"stopped by a cost cap: {r.meta.get('error') or 'budget exhausted'} (not graded, never averaged)"
        elif headline is None:
            reason = "not graded yet"
        elif g is None:
            reason = f"no {headline} grade yet"
        elif g.score is None:
            # not always the judge's fault: combined lacks a part, a tournament run had no match
            reason = f"grade {g.status}: " + (g.error or f"no score and no error recorded in grades/{headline}/")
        else:
            continue
        rows.append(
            {
                "run_id": r.run_id,
                "status": status,
                "reason": reason,
                "fallback": fallback_label([r]) and "yes",
                "grader": headline,
            }
        )
    cols = [
        Column("run_id", "run"),
        Column("status", "status"),
        Column("reason", "reason"),
        Column("fallback", "fell back"),
        Column("grader", "headline grader"),
    ]
    single = headlines.single
    what = f"`{single}` score" if single else ("headline score" if headlines.graders else "score (no grades yet)")
    return Table(
        "unscored",
        "Runs without a score",
        cols,
        rows,
        [f"{len(rows)} of {len(runs)} runs have no {what} and are not in any mean."],
    )


def unfinished_reason(r: Run) -> str:
    """Why an unfinished run has no score, and what is known of it."""
    m = r.meta
    known = [f"{len(m.get('artifacts') or [])} artifact(s)"]
    if not m.get("transcript"):
        known.append("no transcript")
    src = m.get("derived_from")
    return (
        f"run unfinished: no meta.json (killed, or still running); {', '.join(known)}; configuration from the {src}"
        if src in ("transcript", "run id")
        else f"run unfinished: no meta.json (killed, or still running); {', '.join(known)}; configuration unknown"
    )
