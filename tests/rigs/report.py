"""Build results directories in the on-disk shapes that `benchctl run` and `benchctl grade`
write (benchctl.layout: runs/<run_id>/meta.json, grades/<grader>/<run_id>[~tag].json), for
report tests and the report benchmark. Plain writes (no fsync): these are throwaway dirs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from benchctl.layout import grade_path, make_run_id, run_dir


def _write(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(obj))


def add_run(
    root: Path,
    *,
    model: str,
    budget: str = "10m",
    budget_s: float = 600,
    seed: int = 0,
    task: str = "wiki",
    harness: str = "react",
    status: str = "completed",
    variant: str | None = None,
    tools: str | None = None,
    cost_usd: float | None = 1.0,
    elapsed_s: float = 500.0,
    usage: dict[str, int] | None = None,
    fallbacks: list[dict[str, Any]] | None = None,
    task_hash: str = "sha256:task1",
    error: str | None = None,
    version: str = "0.1.0",
    target_tools: dict[str, Any] | None = None,
) -> str:
    run_id = make_run_id(task, harness, model, budget, seed, variant, tools)
    meta = {
        "schema": 1,
        "run_id": run_id,
        "status": status,
        "task": task,
        "harness": harness,
        "model": model,
        "budget": budget,
        "budget_s": budget_s,
        "seed": seed,
        "variant": variant,
        "task_hash": task_hash,
        "spec": {
            "task": task,
            "harness": harness,
            "model": model,
            "budget_s": budget_s,
            "seed": seed,
            "variant": variant,
            "tools": tools,
        },
        "usage": usage if usage is not None else {"input_tokens": 1000, "output_tokens": 100},
        "cost_usd": cost_usd,
        "elapsed_s": elapsed_s,
        "benchctl_version": version,
        "served_models": {model: 10},
        "fallbacks": fallbacks or [],
        "refusals": 1 if (fallbacks or status == "refused") else 0,
        "error": error,
    }
    if target_tools is not None:  # hidden-behaviour runs: benchctl.targets' summary, as the runner writes it
        meta["target_tools"] = target_tools
    _write(run_dir(root, run_id) / "meta.json", meta)
    return run_id


def add_grade(
    root: Path,
    grader: str,
    run_id: str,
    score: float | None,
    *,
    tag: str | None = None,
    judge: str = "judge/model-1",
    rubric_hash: str = "rub1",
    status: str | None = None,
    by_cluster: dict[str, float] | None = None,
    items: list[dict[str, Any]] | None = None,
    cost_usd: float | None = 0.01,
    n_unscored: int = 0,
) -> None:
    rec = {
        "schema": 1,
        "grader": grader,
        "run_id": run_id,
        "artifact": "report.md" if tag is None else f"report.{tag}.md",
        "artifact_tag": tag,
        "judge": judge,
        "rubric_hash": rubric_hash,
        "status": status or ("unscored" if score is None else "scored"),
        "score": score,
        "raw_score": score,
        "by_cluster": by_cluster or {},
        "items": items or [],
        "n_items": len(items or []),
        "n_unscored": n_unscored,
        "usage": {"input_tokens": 10},
        "cost_usd": cost_usd,
        "created_at": 0.0,
    }
    _write(grade_path(root, grader, run_id, tag), rec)


def coverage_items(strict_by_id: dict[str, float | None], cluster_of: dict[str, str]) -> list[dict[str, Any]]:
    """Items with raw score s such that strict = max(2s-1, 0) equals the given strict value."""
    out = []
    for fid, st in strict_by_id.items():
        raw = None if st is None else (0.5 + st / 2 if st > 0 else 0.3)
        out.append(
            {
                "id": fid,
                "score": raw,
                "strict": st,
                "cluster": cluster_of.get(fid),
                "quote": "q" * 80,
                "reason": "r" * 120,
            }
        )
    return out


def write_ratings(root: Path, obj: dict[str, Any]) -> None:
    _write(Path(root) / "grades" / "tournament" / "ratings.json", obj)
