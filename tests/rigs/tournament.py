"""A tournament judge written for tests (the scripted title judge) and auditors' runs and issues
written as `benchctl run` leaves them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

_SUB = re.compile(r'<submission id="(S\d+)">\n(.*?)</submission>', re.DOTALL)
_SEV = {"critical": "high", "high": "high", "medium": "medium", "low": "low"}


def title_judge(prompt: str) -> str:
    """A deterministic stand-in judge. Extraction: each '## ' heading of the report is an issue, its
    'Evidence:' line the evidence. Dedup: items with the same title (case-insensitive) are one issue;
    supported = the item has evidence; importance = the auditors' severity label (default medium).
    Answers in a ```json fence with prose around it, as real judges do."""
    if "<report>" in prompt:
        report = prompt.split("<report>", 1)[1]
        issues = []
        for sec in re.split(r"^## ", report, flags=re.M)[1:]:
            title, _, body = sec.partition("\n")
            ev = re.search(r"^Evidence:\s*(.*)$", body, re.M)
            issues.append(
                {"title": title.strip(), "description": "", "evidence": ev.group(1) if ev else "", "severity": ""}
            )
        return "Here are the issues:\n```json\n" + json.dumps({"issues": issues}) + "\n```"
    groups: dict[str, dict[str, Any]] = {}
    for label, body in _SUB.findall(prompt):
        for m in re.finditer(r"^(\d+)\. (.*)\n((?:   .*\n?)*)", body, re.M):
            n, title, rest = int(m.group(1)), m.group(2).strip(), m.group(3)
            sev = re.search(r"severity label: (\w+)", rest)
            g = groups.setdefault(
                title.lower(), {"title": title, "description": title, "found_by": {}, "importance": "medium"}
            )
            if sev:
                g["importance"] = _SEV.get(sev.group(1).lower(), "medium")
            f = g["found_by"].setdefault(label, {"submission": label, "items": [], "supported": False})
            f["items"].append(n)
            f["supported"] = f["supported"] or bool(re.search(r"evidence: (?!none)", rest))
    issues = [{**g, "found_by": list(g["found_by"].values())} for g in groups.values()]
    return "I merged the findings.\n```json\n" + json.dumps({"issues": issues}, indent=1) + "\n```\nDone."


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
