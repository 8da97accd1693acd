"""Rubric coverage: how many of the human reference's findings the run's report covers.

Findings are judged in batches (batch_size per call). Each judge score s in [0, 1] (0.1 steps)
is mapped to the strict score max(2s - 1, 0); coverage = (weighted) mean strict score over the
scored findings, raw_score = the (weighted) mean of s, by_cluster = strict coverage per cluster.
Findings whose batch failed stay unscored (score None) and are counted, never averaged as 0.
"""

from __future__ import annotations

import asyncio
from typing import Any

from benchctl.grading.config import Finding, GradingConfig
from benchctl.grading.graders import Grader, Problem, rubric_hash
from benchctl.grading.judge import DEFAULT_MAX_TOKENS, Judge, JudgeFailed, Tally
from benchctl.grading.judge_json import JudgeParseError
from benchctl.grading.judge_parse import ItemScore, parse_scores, strict_score
from benchctl.grading.record import GradeJob, make_record
from benchctl.grading.templates import fence, nonce_for, render, render_prompt
from benchctl.layout import GradeItem, GradeRecord


def weighted_mean(pairs: list[tuple[float, float]]) -> float | None:
    """Mean of values weighted by weights; None when there is nothing (or no weight) to average."""
    total_w = sum(w for _, w in pairs)
    if not pairs or total_w <= 0:
        return None
    return sum(v * w for v, w in pairs) / total_w


def summarise(items: list[GradeItem]) -> tuple[float | None, float | None, dict[str, float]]:
    """(coverage, raw mean, strict coverage per cluster) over the scored items."""
    scored = [it for it in items if it.get("score") is not None]
    coverage = weighted_mean([(it["strict"], it.get("weight", 1.0)) for it in scored])  # type: ignore[misc]
    raw = weighted_mean([(it["score"], it.get("weight", 1.0)) for it in scored])  # type: ignore[misc]
    clusters: dict[str, list[tuple[float, float]]] = {}
    for it in scored:
        if it.get("cluster") is not None:
            clusters.setdefault(it["cluster"], []).append((it["strict"], it.get("weight", 1.0)))  # type: ignore[arg-type]
    by_cluster = {c: v for c, v in ((c, weighted_mean(p)) for c, p in sorted(clusters.items())) if v is not None}
    return coverage, raw, by_cluster


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def quote_found(quote: str, squashed_report: str) -> bool | None:
    """Whether the judge's supporting quote really occurs in the report (None: no quote given).
    A judge that invents quotes is worth knowing about when validating it."""
    q = _squash(quote).strip("\"'“”‘’. …")
    if not q:
        return None
    return q in squashed_report


def format_findings(batch: list[Finding]) -> str:
    return "\n".join(f"- id {f.id}: {f.text}" for f in batch)


def batch_max_tokens(n_findings: int) -> int:
    """Room for a quote, a reason and a score per finding: the default up to ~10 findings per batch."""
    return max(DEFAULT_MAX_TOKENS, 400 * n_findings)


async def judge_batch(
    job: GradeJob, judge: Judge, batch: list[Finding], report: str, nonce: str, tally: Tally, shared: bool = True
) -> tuple[dict[str, ItemScore], dict[str, Any]]:
    """Scores for one batch, re-asking once for ids the judge missed. Returns (scores, batch info).
    `shared`: other batches are asked about the same report (so the report is worth caching)."""
    cfg = job.cfg
    ids = [f.id for f in batch]
    # The built-in system prompt names no nonce, so it is the same for every report; a custom one
    # may still use {{nonce}} (then only the calls about one report share a cached prefix).
    system = render(cfg.prompts["system"], nonce=nonce)
    # Cached prefixes (templates.render_prompt): up to the report, shared by every call of the
    # session; up to the end of the report, shared by its batches. The batch's findings come last.
    user = render_prompt(
        cfg.prompts["coverage"],
        fenced="report",
        varying=("findings", "ids") if shared else ("findings", "ids", "report"),
        reference=cfg.reference,
        findings=format_findings(batch),
        report=fence(report, nonce),
        ids=", ".join(ids),
    )
    info: dict[str, Any] = {"ids": ids, "calls": 1}
    scores: dict[str, ItemScore] = {}  # kept across both answers: the re-ask asks only for what is missing

    def parse(answer: str) -> dict[str, ItemScore]:
        got = parse_scores(answer, [i for i in ids if i not in scores])
        scores.update(got.scores)
        if got.missing:
            raise JudgeParseError(got.error or f"no usable score for {', '.join(got.missing)}")
        return scores

    def reask(_: JudgeParseError) -> str:
        missing = [i for i in ids if i not in scores]
        info.update(reasked=missing, calls=2)
        return render(cfg.prompts["reask"], ids=", ".join(missing))

    try:
        got = await judge.ask_structured(
            user,
            parse,
            reask,
            system=system,
            tally=tally,
            max_tokens=batch_max_tokens(len(batch)),
            label=f"findings {', '.join(ids)}",
        )
        error = None if got.error is None else f"{got.error} after one re-ask"
    except JudgeFailed as e:
        error = str(e)
    missing = [i for i in ids if i not in scores]
    info["status"] = "ok" if not missing else ("failed" if not scores else "partial")
    if missing:
        info["error"] = error
    return scores, info


def zero_record(job: GradeJob, judge: str, rubric_hash: str, why: str) -> GradeRecord:
    """A report that does not exist or is empty covers nothing: a real 0, no judge needed."""
    items: list[GradeItem] = [
        {
            "id": f.id,
            "text": f.text,
            "score": 0.0,
            "strict": 0.0,
            "cluster": f.cluster,
            "weight": f.weight,
            "quote": "",
            "reason": why,
        }
        for f in job.cfg.findings
    ]
    cov, raw, by_cluster = summarise(items)
    return make_record(
        "coverage",
        job,
        judge,
        rubric_hash,
        items=items,
        score=cov,
        raw_score=raw,
        by_cluster=by_cluster,
        tally=Tally(),
        batches=[],
        note=why,
    )


async def grade_coverage(job: GradeJob, judge: Judge, tally: Tally) -> GradeRecord:
    cfg = job.cfg
    rubric = rubric_hash(cfg, "coverage")
    report, truncated = job.read_text()
    if report is None:
        return zero_record(job, judge.model, rubric, f"artifact {job.artifact} missing")
    if not report.strip():
        return zero_record(job, judge.model, rubric, f"artifact {job.artifact} is empty")
    batches = [cfg.findings[i : i + cfg.batch_size] for i in range(0, len(cfg.findings), cfg.batch_size)]
    nonce = nonce_for(report)
    shared = len(batches) > 1
    results = await asyncio.gather(*(judge_batch(job, judge, b, report, nonce, tally, shared) for b in batches))
    items: list[GradeItem] = []
    squashed = _squash(report)
    for batch, (scores, info) in zip(batches, results):
        for f in batch:
            s = scores.get(f.id)
            # the finding's text goes with its score: a reader (the viewer, an export) sees what was
            # credited without the task's rubric, which may have moved or changed since
            item: GradeItem = {"id": f.id, "text": f.text, "cluster": f.cluster, "weight": f.weight}
            if s is None:
                item.update({"score": None, "strict": None, "error": info.get("error", "unscored")})
            else:
                item.update(
                    {
                        "score": s.score,
                        "strict": strict_score(s.score),
                        "quote": s.quote,
                        "reason": s.reason,
                        "quote_found": quote_found(s.quote, squashed),
                    }
                )
            items.append(item)
    cov, raw, by_cluster = summarise(items)
    return make_record(
        "coverage",
        job,
        judge.model,
        rubric,
        items=items,
        score=cov,
        raw_score=raw,
        by_cluster=by_cluster,
        tally=tally,
        batches=[info for _, info in results],
        truncated=truncated,
    )


class Coverage(Grader):
    name = "coverage"

    def missing(self, cfg: GradingConfig) -> Problem | None:
        if not cfg.findings:
            return "findings", "the coverage grader needs a findings file", 'add findings = "grading/findings.jsonl"'
        if not cfg.reference:
            return "reference", "the coverage grader needs a reference report", 'add reference = "grading/reference.md"'
        return None

    def by_default(self, cfg: GradingConfig) -> bool:
        return bool(cfg.findings)

    def rubric(self, cfg: GradingConfig) -> dict[str, Any]:
        return {
            "findings": [f.__dict__ for f in cfg.findings],
            "reference": cfg.reference,
            "batch_size": cfg.batch_size,
            "prompt": cfg.prompts["coverage"],
            "reask": cfg.prompts["reask"],
        }

    async def grade(self, job: GradeJob, judge: Judge, tally: Tally) -> GradeRecord:
        return await grade_coverage(job, judge, tally)


GRADER = Coverage()
