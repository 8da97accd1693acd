"""Where results live on disk, and the shape of the records there.

This module is the contract between `run` (writes runs), `grade` (reads runs, writes grades)
and `report` (reads both). Nothing else decides paths.

The layout and every field of `meta.json` (RunMeta) are documented in docs/formats/results.md,
grade records (GradeRecord) in docs/formats/grades.md; the TypedDicts here are their shapes in code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypedDict

from benchctl.jsonio import read_json

RUNS = "runs"
GRADES = "grades"
SCANS = "scans"
META = "meta.json"
TRANSCRIPT = "transcript.jsonl"
ARTIFACTS = "artifacts"

RunStatus = Literal["running", "completed", "timeout", "refused", "error", "budget_exhausted"]
# A run in one of these states is finished: resume skips it. `error` runs are redone.
# `budget_exhausted`: a cost cap stopped it cleanly (benchctl/limits); finished, but not graded
# and never averaged into scores (the report counts and lists it).
FINAL_STATUSES: frozenset[str] = frozenset({"completed", "timeout", "refused", "budget_exhausted"})
GRADED_STATUSES: frozenset[str] = frozenset({"completed", "timeout", "refused"})

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    """Make one component of a run id: filesystem-safe, readable (`anthropic/claude-x` -> `anthropic-claude-x`)."""
    return _UNSAFE.sub("-", text).strip("-") or "x"


def make_run_id(
    task: str, harness: str, model: str, budget: str, seed: int, variant: str | None = None, tools: str | None = None
) -> str:
    parts = [task, harness, model, budget]
    if variant:
        parts.append(variant)
    if tools:
        parts.append(tools)
    parts.append(f"s{seed}")
    return "__".join(slug(p) for p in parts)


_SEED_PART = re.compile(r"s(\d+)")


def parse_run_id(run_id: str) -> dict[str, Any] | None:
    """The inverse of `make_run_id`, as far as it goes: task, harness, model, budget and seed, plus
    `extra` (the optional variant / tools parts). Lossy: the parts are slugs (`anthropic/x` comes
    back as `anthropic-x`), and a single extra part may be a variant or a tool configuration.
    None when the id does not have the shape. For runs that left no meta.json (see report.load)."""
    parts = run_id.split("__")
    m = _SEED_PART.fullmatch(parts[-1]) if len(parts) >= 5 else None
    if m is None or len(parts) > 7:
        return None
    task, harness, model, budget = parts[:4]
    return {
        "task": task,
        "harness": harness,
        "model": model,
        "budget": budget,
        "seed": int(m.group(1)),
        "extra": parts[4:-1],
    }


class Usage(TypedDict, total=False):
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int


class RunMeta(TypedDict, total=False):
    schema: int  # META_SCHEMA
    run_id: str
    status: RunStatus
    spec: dict[str, Any]  # task, harness, model, budget_s, seed, variant, tools, fallback, ...
    task: str
    harness: str
    model: str  # requested (configured) model id, e.g. anthropic/claude-x
    budget: str  # as given, e.g. "10m"
    budget_s: float
    seed: int
    variant: str | None
    task_hash: str  # content hash of task file + data (after the variant is applied)
    image: str
    image_digest: str | None
    tool_versions: dict[str, str]
    benchctl_version: str
    started_at: float  # unix seconds
    ended_at: float
    elapsed_s: float
    usage: Usage
    cost_usd: float | None  # None = some call had an unknown price
    served_models: dict[str, int]  # model id -> number of calls it served
    fallbacks: list[dict[str, Any]]  # {"t", "from", "to", "reason": "refusal", "call_id", "upstream_stop_reason"?}
    refusals: int
    reprompts: int
    revision_requests: int
    turns: int
    artifacts: list[str]  # relative to artifacts/
    collect: dict[str, Any]  # CollectReport as dict (skipped / missing files)
    error: str | None
    exit_code: int | None
    followups: list[dict[str, Any]]  # one per follow-up: prompt, status, turns, artifacts
    gateway: dict[str, Any]  # gateway summary: calls, errors, ...
    harness_details: dict[str, Any]  # harness-specific outcome details (CLI exit codes, session ids)
    warnings: list[dict[str, Any]]  # {"kind", "message", "count"}: the run's `warning` transcript events, counted
    tool_calls: dict[str, int]  # tool name -> the run's `tool_call` events (target MCP tools by their own name)
    tools: str | None  # tool configuration (hidden-behaviour audits)
    target_tools: dict[str, Any]  # target / auxiliary model calls, usage and cost (kept apart from `usage`)
    pin: dict[str, Any]  # imported tasks: source, commit, content hash, image (+ digest), verified/changed
    task_tests: dict[str, Any]  # imported tasks: run_task_tests available (or why not), calls and rewards
    node: dict[str, Any]  # runs on Ray: the node it ran on (id, ip, hostname)
    rate_limits: dict[str, Any]  # waits for the limiter / 429 backoff and the budget pause (benchctl/limits/run.py)
    cost_cap: dict[str, Any]  # when a cost cap was reached: cap (run|sweep), max_cost_usd, spent_usd


META_SCHEMA = 1
GRADE_SCHEMA = 1


class GradeItem(TypedDict, total=False):
    id: str  # finding id / prediction index / ...
    text: str  # coverage: the finding's text from the rubric
    score: float | None  # raw judge score 0..1; None = unscored (judge failed)
    strict: float | None  # max(2s-1, 0) for rubric coverage
    cluster: str | None
    weight: float
    quote: str
    reason: str
    error: str
    quote_found: bool | None  # the judge's quote really occurs in the report (None: it gave no quote)
    prediction: str  # any_of_n: the prediction text
    verdict: str | None  # any_of_n: the judge's last verdict
    judge_scores: list[float | None]  # --repeats / panels: every answer's score, judge by judge (grading.panel)


class GradeRecord(TypedDict, total=False):
    schema: int  # GRADE_SCHEMA
    grader: str  # "coverage" | "tldr" | "combined" | "any_of_n" | ...
    run_id: str
    artifact: str  # which artifact was graded, e.g. report.md or report.followup-1.md
    artifact_tag: str | None  # None for the main artifact, "followup-1" for a follow-up's
    judge: str  # judge model id
    rubric_hash: str  # hash of findings + reference + prompt templates
    status: Literal["scored", "partial", "unscored"]
    score: float | None  # the grader's headline number; None when unscored
    raw_score: float | None  # e.g. raw mean before the strict transform
    by_cluster: dict[str, float]
    expected: str  # what was judged against: tldr the reference's TLDR, any_of_n the ground truth
    items: list[GradeItem]
    n_items: int
    n_unscored: int
    usage: Usage
    cost_usd: float | None
    judge_calls: int
    created_at: float
    error: str  # why the grade is unscored (combined: which part is missing or stale)
    note: str  # why no judge was asked (the artifact is missing or empty)
    # per grader
    batches: list[dict[str, Any]]  # coverage: what each judge batch reported (error, usage)
    truncated: bool  # coverage: the report was cut to the judge's limit
    tldr: str  # tldr: the TLDR found in the report
    tldr_rule: str  # tldr: which rule found it
    n_found: int  # any_of_n: predictions read from the artifact
    n_matched: int  # any_of_n: predictions the judge matched to the ground truth
    parts: dict[str, dict[str, Any]]  # combined: the coverage and tldr grades it combines
    weights: dict[str, float]  # combined: their weights
    # judge repeats and panels (grading.panel)
    judges: list[str]  # the panel's models, in the order of each item's judge_scores
    repeats: int  # answers per judge per item
    failed_answers: int  # answers that failed (the items keep the mean of the rest)
    judge_noise: dict[str, Any]  # var: the score's variance from the judge; agreement: α's additive pieces


def runs_dir(results: Path) -> Path:
    return Path(results) / RUNS


def run_dir(results: Path, run_id: str) -> Path:
    return runs_dir(results) / run_id


def grade_path(results: Path, grader: str, run_id: str, artifact_tag: str | None = None) -> Path:
    """grades/<grader>/<run_id>.json for the main artifact; a follow-up artifact gets a tag:
    grades/<grader>/<run_id>~followup-1.json (the record's `artifact` field names the file)."""
    name = run_id if not artifact_tag else f"{run_id}~{slug(artifact_tag)}"
    return Path(results) / GRADES / grader / f"{name}.json"


def scan_path(results: Path, scanner: str, run_id: str) -> Path:
    """scans/<scanner>/<run_id>.json: one scanner's answer about one run (benchctl scan)."""
    return Path(results) / SCANS / scanner / f"{run_id}.json"


def read_meta(run_path: Path) -> RunMeta | None:
    """The run's meta.json, or None when the run never finished writing it."""
    p = Path(run_path) / META
    if not p.exists():
        return None
    return read_json(p)


def is_finished(run_path: Path) -> bool:
    meta = read_meta(run_path)
    return meta is not None and meta.get("status") in FINAL_STATUSES


def iter_runs(results: Path) -> Iterator[tuple[Path, RunMeta]]:
    """Every run directory with a meta.json, sorted by run id."""
    base = runs_dir(results)
    if not base.is_dir():
        return
    for p in sorted(base.iterdir()):
        if p.is_dir():
            meta = read_meta(p)
            if meta is not None:
                yield p, meta
