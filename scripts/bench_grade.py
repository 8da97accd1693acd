#!/usr/bin/env python3
"""Grading throughput: N reports x 8 coverage batches against a fake judge with a fixed latency.

The judge is a scripted model (`scripted/py:__main__:fixed_latency_judge`) that waits LATENCY
seconds (the scripted provider's `delay`, an asyncio sleep) and answers every finding 0.7. The
calls go through the real path: benchctl.grading runner -> Judge semaphore -> benchctl.gateway.complete
-> retrying upstream -> scripted provider -> Anthropic wire JSON -> wire.summarize -> judge_parse.
Ideal wall time = calls x latency / concurrency. Goal: <= 1.2x ideal at concurrency 64.

    python scripts/bench_grade.py                     # 1,000 reports, latency 0.25 s, K=64
    python scripts/bench_grade.py --reports 200 --latency 0.1 --concurrency 16 64
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchctl.grading.runner import GradeOptions, grade_results
from benchctl.jsonio import write_json_atomic

LATENCY = [0.25]
_IDS = re.compile(r"^- id (\S+):", re.MULTILINE)


def fixed_latency_judge(request):  # the scripted provider calls this for every judge request
    ids = _IDS.findall(request.last_user_text)
    body = json.dumps({"scores": [{"id": i, "quote": "", "reason": "fixed", "score": 0.7} for i in ids]})
    return {"text": body, "delay": LATENCY[0], "usage": {"input_tokens": 3000, "output_tokens": 200}}


def build(root: Path, reports: int, findings: int, batch_size: int) -> Path:
    task = root / "task"
    (task / "grading").mkdir(parents=True)
    (task / "grading" / "findings.jsonl").write_text(
        "".join(
            json.dumps({"id": f"F{i}", "text": f"Finding number {i} about host 10.0.0.{i}", "cluster": f"c{i % 4}"})
            + "\n"
            for i in range(1, findings + 1)
        )
    )
    (task / "grading" / "reference.md").write_text("## TLDR\nReference summary.\n\n" + "Reference body. " * 400)
    (task / "task.toml").write_text(
        'name = "bench"\n[grading]\ngraders = ["coverage"]\n'
        f'findings = "grading/findings.jsonl"\nreference = "grading/reference.md"\n'
        f"batch_size = {batch_size}\n"
    )
    words = " ".join(f"word{i % 97}" for i in range(2800))  # a ~2,800-word report
    results = root / "results"
    for r in range(reports):
        run = results / "runs" / f"bench__react__m__10m__s{r}"
        (run / "artifacts").mkdir(parents=True)
        (run / "artifacts" / "report.md").write_text(f"# Report {r}\n\n## TLDR\nSummary {r}.\n\n{words}\n")
        write_json_atomic(
            run / "meta.json", {"run_id": run.name, "status": "completed", "spec": {"task_dir": str(task)}}
        )
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reports", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=8, help="coverage batches per report (5 findings each)")
    ap.add_argument("--latency", type=float, default=0.25, help="fake judge latency, seconds")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64])
    args = ap.parse_args()
    LATENCY[0] = args.latency
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        results = build(Path(tmp), args.reports, args.batches * 5, 5)
        for k in args.concurrency:
            opts = GradeOptions(
                judge="scripted/py:__main__:fixed_latency_judge", graders=["coverage"], concurrency=k, force=True
            )
            t0 = time.perf_counter()
            session = asyncio.run(grade_results(results, opts))
            wall = time.perf_counter() - t0
            calls = session.judge_calls
            ideal = max(calls * args.latency / k, 1e-9)
            unscored = sum(o.n_unscored for o in session.outcomes)
            rows.append((args.reports, calls, args.latency, k, ideal, wall, wall / ideal, unscored))
    print(
        f"{'reports':>7} {'calls':>6} {'latency_s':>9} {'K':>4} {'ideal_s':>8} {'wall_s':>7} {'ratio':>6} {'unscored':>8}"
    )
    for r in rows:
        ratio = f"{r[6]:>6.2f}x" if r[2] > 0 else "    n/a"
        print(f"{r[0]:>7} {r[1]:>6} {r[2]:>9.3f} {r[3]:>4} {r[4]:>8.2f} {r[5]:>7.2f} {ratio} {r[7]:>8}")


if __name__ == "__main__":
    main()
