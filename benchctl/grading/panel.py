"""Judge repeats and panels: one grade from K answers of each of J judges (`benchctl grade
--repeats K --judge A --judge B`).

Each (judge, repeat) grades the artifact as a whole, exactly as a single judge would (same prompts,
batches and re-asks): a *sub-grading*. The grade record then merges them item by item:

- `judge_scores`: every answer's score for the item, judge by judge in the record's `judges`
  order, K per judge (None where that answer failed);
- the item's score is the mean of its answers (coverage: the strict transform is applied to that
  mean; any-of-N: the item's verdict is "match" when at least half its answers matched); the record's
  score is recomputed from the merged items as the grader computes it;
- `judge_noise`: what the report needs to tell judge noise from run-to-run differences —
  `var`, the variance of the record's score that comes from sampling the judge, estimated from the
  spread of the answers by the delete-one-sub-grading jackknife ((m − 1)/m · Σ (s₍₋ⱼ₎ − s̄)² over the
  m = J·K sub-gradings: it handles the strict transform and the correlation of findings judged in one
  call, and equals s²/m for a plain mean); and for panels the sufficient statistics of
  Krippendorff's α (interval metric) between the judges over the record's items (each judge's value
  = the mean of its repeats), which add up across records.

Repeats are fresh samples: with K ≥ 2 the judge is asked at its provider's default temperature
(repeats at temperature 0 would mostly repeat one answer). A record with a failed answer is
"partial", so a rerun asks again; one whose every answer arrived is kept like any grade.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any

from benchctl.grading.any_of_n import success
from benchctl.grading.coverage import summarise
from benchctl.grading.judge import Judge, Tally
from benchctl.grading.judge_parse import strict_score
from benchctl.grading.record import GradeJob, status_of
from benchctl.layout import GradeItem, GradeRecord

GraderFn = Callable[[GradeJob, Judge, Tally], Any]  # a coroutine function returning a GradeRecord


def panel_label(judges: Sequence[str]) -> str:
    """The record's `judge`: the one model, or the panel's models joined by " + "."""
    return " + ".join(judges)


async def grade_panel(
    grader: str, fn: GraderFn, job: GradeJob, judge: Judge, models: Sequence[str], repeats: int, tally: Tally
) -> GradeRecord:
    temperature = None if repeats > 1 else judge.temperature
    subs = await asyncio.gather(
        *(fn(job, judge.sibling(m, temperature, repeat=r), tally) for m in models for r in range(repeats))
    )
    return merge(grader, list(subs), list(models), repeats, tally)


def _rescore(grader: str, items: list[GradeItem]) -> dict[str, Any]:
    """The record fields the grader derives from its items."""
    if grader == "coverage":
        cov, raw, by_cluster = summarise(items)
        return {"score": cov, "raw_score": raw, "by_cluster": by_cluster}
    if grader == "any_of_n":
        score = success(items)
        return {
            "score": score,
            "raw_score": score,
            "n_matched": sum(1 for it in items if it.get("verdict") == "match"),
        }
    score = items[0].get("score") if items else None  # tldr: one holistic item
    return {"score": score, "raw_score": score}


def _merge_item(grader: str, first: GradeItem, answers: list[float | None]) -> GradeItem:
    item: GradeItem = dict(first)  # type: ignore[assignment]
    got = [a for a in answers if a is not None]
    item["judge_scores"] = answers
    mean = math.fsum(got) / len(got) if got else None
    item["score"] = mean
    if grader == "coverage":
        item["strict"] = None if mean is None else strict_score(mean)
    if grader == "any_of_n":
        item["verdict"] = None if mean is None else ("match" if mean >= 0.5 else "no_match")
    if mean is not None:
        item.pop("error", None)
    return item


def _items(grader: str, subs: list[dict[str, Any]], keep: Sequence[int]) -> list[GradeItem]:
    """Merged items over the sub-gradings `keep` (indices), matched by item id."""
    ids = [it["id"] for it in subs[0]["items"]]
    by_id = [{it["id"]: it for it in s["items"]} for s in subs]
    out = []
    for iid in ids:
        answers = [by_id[j].get(iid, {}).get("score") for j in keep]
        first = next((by_id[j][iid] for j in keep if by_id[j].get(iid, {}).get("score") is not None), by_id[0][iid])
        out.append(_merge_item(grader, first, answers))
    return out


def merge(grader: str, subs: list[dict[str, Any]], models: list[str], repeats: int, tally: Tally) -> GradeRecord:
    m = len(subs)
    everyone = list(range(m))
    items = _items(grader, subs, everyone)
    fields = _rescore(grader, items)
    rec: dict[str, Any] = dict(subs[0])
    rec.update(fields)
    rec["items"] = items
    rec["judge"] = panel_label(models)
    rec["judges"] = models
    rec["repeats"] = repeats
    rec["n_items"] = len(items)
    rec["n_unscored"] = sum(1 for it in items if it.get("score") is None)
    rec["status"] = status_of(rec["n_unscored"], rec["score"])
    failed = sum(1 for it in items for a in it.get("judge_scores", []) if a is None)
    if failed and rec["status"] == "scored":
        rec["status"] = "partial"  # every item scored, but some answers are missing: a rerun asks again
    rec["failed_answers"] = failed
    if "batches" in rec:
        rec["batches"] = [b for s in subs for b in s.get("batches") or []]
    rec["usage"], rec["cost_usd"], rec["judge_calls"] = dict(tally.usage), tally.cost_usd, tally.calls
    rec["judge_noise"] = {"var": jackknife_var(grader, subs, rec["score"])}
    if len(models) > 1:
        rec["judge_noise"]["agreement"] = agreement_stats(items, models, repeats)
    return rec  # type: ignore[return-value]


def jackknife_var(grader: str, subs: list[dict[str, Any]], score: float | None) -> float | None:
    """Variance of the record's score from the judge: the delete-one-sub-grading jackknife."""
    m = len(subs)
    if m < 2 or score is None:
        return None
    loo = []
    for j in range(m):
        s = _rescore(grader, _items(grader, subs, [k for k in range(m) if k != j]))["score"]
        if s is None:
            return None
        loo.append(s)
    mean = math.fsum(loo) / m
    return (m - 1) / m * math.fsum((s - mean) ** 2 for s in loo)


def agreement_stats(items: list[GradeItem], models: list[str], repeats: int) -> dict[str, Any]:
    """Additive pieces of Krippendorff's α (interval) between the judges over these items: n (values
    in pairable units), their sum and sum of squares, and the observed disagreement Σ_u Σ_{k≠l}
    (v_k − v_l)² / (m_u − 1); plus each judge's [sum, count] for its mean. α over many records =
    1 − (d_o / n) / (2·(n·Σv² − (Σv)²) / (n·(n − 1))) of the summed pieces (grading.stats)."""
    n = 0
    total = sumsq = d_o = 0.0
    per_judge: dict[str, list[float]] = {m: [0.0, 0.0] for m in models}
    for it in items:
        answers = it.get("judge_scores") or []
        values = []
        for j, model in enumerate(models):
            got = [a for a in answers[j * repeats : (j + 1) * repeats] if a is not None]
            if got:
                v = math.fsum(got) / len(got)
                values.append(v)
                per_judge[model][0] += v
                per_judge[model][1] += 1
        if len(values) < 2:
            continue
        n += len(values)
        total += math.fsum(values)
        sumsq += math.fsum(v * v for v in values)
        d_o += math.fsum((a - b) ** 2 for i, a in enumerate(values) for k, b in enumerate(values) if i != k) / (
            len(values) - 1
        )
    return {"n": n, "sum": total, "sumsq": sumsq, "d_o": d_o, "judge_sums": per_judge}
