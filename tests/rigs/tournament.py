"""A tournament judge written for tests (the scripted title judge) and auditors' runs and issues
written as `benchctl run` leaves them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchctl.grading.fake_judge import tournament_answer


def title_judge(prompt: str) -> str:
    """The deterministic stand-in judge of the tournament tests: the fake judge's tournament answers
    (benchctl.grading.fake_judge.tournament_answer: same title = one issue, supported = has evidence)."""
    return tournament_answer(prompt)


def scripted_title_judge(request: Any) -> dict[str, str]:
    """benchctl's scripted provider calls this: scripted/py:tests.rigs.tournament:scripted_title_judge."""
    return {"text": title_judge(request.last_user_text)}


def scripted_garbage_judge(request: Any) -> dict[str, str]:
    return {"text": "I'm not sure how to answer that."}


TITLE_JUDGE = "scripted/py:tests.rigs.tournament:scripted_title_judge"


GARBAGE_JUDGE = "scripted/py:tests.rigs.tournament:scripted_garbage_judge"


def tournament_run(
    results: Path,
    task: str,
    model: str,
    *,
    issues: list | None = None,
    report: str | None = None,
    status: str = "completed",
    cost: float | None = 1.0,
    harness: str = "react",
    task_dir: Path | None = None,
) -> str:
    run_id = f"{task}__{harness}__{model}__10m__s0"
    d = results / "runs" / run_id
    (d / "artifacts").mkdir(parents=True)
    if issues is not None:
        (d / "artifacts" / "issues.json").write_text(json.dumps(issues))
    if report is not None:
        (d / "artifacts" / "report.md").write_text(report)
    meta = {
        "schema": 1,
        "run_id": run_id,
        "status": status,
        "task": task,
        "harness": harness,
        "model": model,
        "budget": "10m",
        "seed": 0,
        "variant": None,
        "cost_usd": cost,
        "spec": {"task_dir": str(task_dir)} if task_dir else {},
    }
    (d / "meta.json").write_text(json.dumps(meta))
    return run_id


def reported_issue(title: str, severity: str, evidence: str = "file.py:1 shows it") -> dict:
    return {"title": title, "description": f"{title}.", "evidence": evidence, "severity": severity}
