#!/usr/bin/env python3
"""Dollars per graded report: coverage grading of an MBAB-sized set at list prices, with and without
prompt caching, synchronously and through the vendors' batch APIs (`benchctl grade --batch`).

The set: 38 findings (8 judge calls per report at batch_size 5), a 6,000-word human reference report
and REPORTS agent reports of 2,500 words each, every one covering a different, fixed part of the
findings. The judge is anthropic/claude-sonnet-4-5 (or --judge) priced at list prices from
benchctl/gateway/prices.toml, served by the fake upstream (benchctl.testing.fake_upstream) through
the real path: `benchctl grade`'s runner -> Judge -> benchctl.gateway.complete -> HTTP -> the fake,
which answers like the fake judge (scores by key-term overlap, deterministic) with a quote and a
reason of realistic length, and reports usage with its prompt-cache simulation
(benchctl.testing.prompt_cache: ~4 characters a token, Anthropic's cache_control breakpoints,
OpenAI's and Gemini's implicit prefix caching).

Columns (one function each in COLUMNS):
  no cache      synchronous judge calls to a fake that caches nothing: every input token at the list
                price, what a judge call cost before its prompts were ordered and marked for the cache
  cache         the fake's prompt cache on: the shared prefix (system, reference, rubric) and each
                report's prefix read from the cache, the first writes at the cache-write price
  batch         the no-cache requests through the fake's batch API (`benchctl grade --batch`:
                Anthropic Message Batches, the OpenAI Batch API or Gemini batch mode, by the judge's
                provider), priced at the batch price
  cache+batch   both: the batch's requests go through the fake's cache one after another (a real
                batch promises only best-effort cache hits: this column is the best case)

Scores must be identical in every column; the script exits 1 if they are not.

    python scripts/bench_grade_cost.py                    # 10 reports, anthropic/claude-sonnet-4-5
    python scripts/bench_grade_cost.py --reports 4 --judge openai/gpt-5
    python scripts/bench_grade_cost.py --reports 4 --judge google/gemini-2.5-pro
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchctl.gateway.complete import reset_upstreams
from benchctl.grading.fake_judge import judge as fake_judge
from benchctl.grading.runner import GradeOptions, grade_results
from benchctl.jsonio import read_json, write_json_atomic
from benchctl.layout import grade_path
from benchctl.testing.fake_upstream import FakeUpstreamServer

N_FINDINGS = 38
REFERENCE_WORDS = 6000
REPORT_WORDS = 2500
_rng = random.Random(31)
_VOCAB = ["".join(_rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_rng.randint(3, 9))) for _ in range(3000)]


def _prose(rng: random.Random, words: int) -> str:
    out, line = [], []
    for i in range(words):
        line.append(rng.choice(_VOCAB))
        if len(line) == 14:
            out.append(" ".join(line) + ("." if i % 3 else ","))
            line = []
    return "\n".join(out + [" ".join(line)])


def finding_text(i: int) -> str:
    rng = random.Random(1000 + i)
    return f"Host 10.{i}.0.{i * 7 % 250} ran {rng.choice(_VOCAB)}-{i} which {' '.join(rng.sample(_VOCAB, 6))}."


def build(root: Path, reports: int) -> Path:
    """The task and `reports` runs under root; returns the results directory."""
    task = root / "task"
    (task / "grading").mkdir(parents=True)
    (task / "grading" / "findings.jsonl").write_text(
        "".join(
            json.dumps({"id": f"F{i}", "text": finding_text(i), "cluster": f"c{i % 5}"}) + "\n"
            for i in range(1, N_FINDINGS + 1)
        )
    )
    rng = random.Random(7)
    body_words = REFERENCE_WORDS - sum(len(finding_text(i).split()) for i in range(1, N_FINDINGS + 1))
    per = body_words // N_FINDINGS
    reference = "# Reference report\n\n## TLDR\nThe reference summary.\n\n" + "\n\n".join(
        f"## Finding {i}\n{finding_text(i)}\n{_prose(rng, per)}" for i in range(1, N_FINDINGS + 1)
    )
    (task / "grading" / "reference.md").write_text(reference)
    (task / "task.toml").write_text(
        'name = "mbab-sized"\n[grading]\ngraders = ["coverage"]\n'
        'findings = "grading/findings.jsonl"\nreference = "grading/reference.md"\n'
    )
    results = root / "results"
    for r in range(reports):
        rng = random.Random(100 + r)
        covered = [i for i in range(1, N_FINDINGS + 1) if rng.random() < 0.5]
        text = " ".join(finding_text(i) for i in covered)
        report = f"# Report {r}\n\n## TLDR\nWhat run {r} found.\n\n{text}\n\n"
        report += _prose(rng, REPORT_WORDS - len(report.split()))
        run = results / "runs" / f"mbab__react__m__1h__s{r}"
        (run / "artifacts").mkdir(parents=True)
        (run / "artifacts" / "report.md").write_text(report)
        write_json_atomic(
            run / "meta.json", {"run_id": run.name, "status": "completed", "spec": {"task_dir": str(task)}}
        )
    return results


def judge_with_reasons(request: Any) -> dict[str, Any]:
    """The fake judge's scores with a quote and a reason of the length a real judge writes (~60
    output tokens a finding), so that output's share of the cost is realistic."""
    out = fake_judge(request)
    head, _, body = out["text"].partition("\n")
    try:
        data = json.loads(body)
    except ValueError:
        return out
    for s in data.get("scores", []):
        s["quote"] = "the report says this host ran the tool and what it did next, in these words"
        s["reason"] = "the report names the host, the tool and the effect, but not the order of events"
    return {"text": head + "\n" + json.dumps(data)}


@dataclass
class Column:
    name: str
    dollars: float | None  # None: a token kind the judge used has no (batch) price: unknown, never 0
    usage: dict[str, int]
    calls: int
    scores: dict[str, Any]


def grade_once(results: Path, judge: str, *, cache: bool, batch: bool) -> Column:
    """Grade every report with the fake upstream, its prompt cache on or off, synchronously or
    through its batch API."""
    with FakeUpstreamServer("py:__main__:judge_with_reasons", record=False) as up:
        if not cache:
            up.prompt_cache = None  # the vendor caches nothing: every input token at the full price
        env = {"ANTHROPIC_BASE_URL": up.url, "OPENAI_BASE_URL": up.url + "/v1", "GOOGLE_GEMINI_BASE_URL": up.url}
        keys = {"ANTHROPIC_API_KEY": "sk-bench", "OPENAI_API_KEY": "sk-bench", "GEMINI_API_KEY": "bench"}
        saved = {k: os.environ.get(k) for k in {**env, **keys}}
        os.environ.update({**env, **keys})
        try:
            reset_upstreams()  # a fresh connection to this server
            opts = GradeOptions(judge=judge, graders=["coverage"], force=True, batch=batch)
            session = asyncio.run(grade_results(results, opts))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        if batch and up.batches.requests != session.judge_calls:
            raise SystemExit(f"{up.batches.requests} batch requests for {session.judge_calls} judge calls")
    if any(o.n_unscored for o in session.outcomes):
        raise SystemExit(f"{sum(o.n_unscored for o in session.outcomes)} findings unscored: see the judge logs")
    usage: dict[str, int] = {}
    dollars: float | None = 0.0
    scores = {}
    for o in session.outcomes:
        rec = read_json(grade_path(results, "coverage", o.run_id))
        for k, v in (rec.get("usage") or {}).items():
            usage[k] = usage.get(k, 0) + v
        cost = rec.get("cost_usd")
        dollars = None if dollars is None or cost is None else dollars + cost
        scores[o.run_id] = (rec["score"], [it["score"] for it in rec["items"]])
    name = "+".join(n for n, on in (("cache", cache), ("batch", batch)) if on) or "no cache"
    return Column(name, dollars, usage, session.judge_calls, scores)


def no_cache(results: Path, judge: str) -> Column:
    return grade_once(results, judge, cache=False, batch=False)


def cache(results: Path, judge: str) -> Column:
    return grade_once(results, judge, cache=True, batch=False)


def batch(results: Path, judge: str) -> Column:
    return grade_once(results, judge, cache=False, batch=True)


def cache_batch(results: Path, judge: str) -> Column:
    return grade_once(results, judge, cache=True, batch=True)


COLUMNS: list[Callable[[Path, str], Column]] = [no_cache, cache, batch, cache_batch]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reports", type=int, default=10)
    ap.add_argument("--judge", default="anthropic/claude-sonnet-4-5")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = build(Path(tmp), args.reports)
        cols = []
        for i, column in enumerate(COLUMNS):  # each on a copy of its own: nothing of another (batches.json) is resumed
            shutil.copytree(results, Path(tmp) / f"col{i}", symlinks=True)
            cols.append(column(Path(tmp) / f"col{i}", args.judge))
    base = cols[0]
    print(f"judge {args.judge}, {args.reports} reports x {N_FINDINGS} findings ({base.calls} judge calls a column)")
    print(
        f"{'':<14}{'$ / report':>11}{'vs no cache':>12}{'input':>10}{'cache read':>11}{'cache write':>12}"
        f"{'output':>9}{'scores':>10}"
    )
    same = True
    for c in cols:
        identical = c.scores == base.scores
        same = same and identical
        u = c.usage
        if c.dollars is None:  # e.g. Gemini lists no batch price for cached input
            money = f"{'unknown':>11}{'(no price)':>12}"
        else:
            share = f"{c.dollars / base.dollars:>11.1%} " if base.dollars else f"{'n/a':>12}"
            money = f"{c.dollars / args.reports:>11.4f}{share}"
        print(
            f"{c.name:<14}{money}"
            f"{u.get('input_tokens', 0):>10,}{u.get('cached_input_tokens', 0):>11,}"
            f"{u.get('cache_write_tokens', 0):>12,}{u.get('output_tokens', 0):>9,}"
            f"{'identical' if identical else 'DIFFER':>10}"
        )
    if not same:
        raise SystemExit("scores differ between columns")


if __name__ == "__main__":
    main()
