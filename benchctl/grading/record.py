"""Building GradeRecords (benchctl.layout.GradeRecord) the same way for every grader."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl.grading.config import GradingConfig
from benchctl.grading.judge import Tally
from benchctl.layout import GRADE_SCHEMA, GradeItem, GradeRecord, RunMeta

MAX_ARTIFACT_CHARS = 400_000  # a runaway artifact is graded on its head, and the record says so


@dataclass
class GradeJob:
    """One artifact of one run, to be graded by one or more graders."""

    results: Path
    run_id: str
    run_path: Path
    meta: RunMeta
    cfg: GradingConfig
    artifact: str  # path relative to the run's artifacts/ dir
    artifact_tag: str | None  # None for the main artifact, "followup-1", ...

    def read_text(self) -> tuple[str | None, bool]:
        """(text, truncated); text None when the artifact does not exist."""
        p = self.run_path / "artifacts" / self.artifact
        if not p.is_file():
            return None, False
        with open(p, "rb") as f:
            data = f.read(MAX_ARTIFACT_CHARS * 4 + 1)
        text = data.decode("utf-8", "replace")
        if len(text) > MAX_ARTIFACT_CHARS:
            return text[:MAX_ARTIFACT_CHARS], True
        return text, len(data) > MAX_ARTIFACT_CHARS * 4


def status_of(n_unscored: int, score: float | None) -> str:
    if score is None:
        return "unscored"
    return "partial" if n_unscored else "scored"


def make_record(
    grader: str,
    job: GradeJob,
    judge: str,
    rubric_hash: str,
    *,
    items: list[GradeItem],
    score: float | None,
    tally: Tally | None,
    raw_score: float | None = None,
    **extra: Any,
) -> GradeRecord:
    n_unscored = sum(1 for it in items if it.get("score") is None)
    rec: dict[str, Any] = {
        "schema": GRADE_SCHEMA,
        "grader": grader,
        "run_id": job.run_id,
        "artifact": job.artifact,
        "artifact_tag": job.artifact_tag,
        "judge": judge,
        "rubric_hash": rubric_hash,
        "status": status_of(n_unscored, score),
        "score": score,
        "raw_score": raw_score,
        "items": items,
        "n_items": len(items),
        "n_unscored": n_unscored,
        "usage": dict(tally.usage) if tally else {},
        "cost_usd": tally.cost_usd if tally else 0.0,
        "judge_calls": tally.calls if tally else 0,
        "created_at": time.time(),
    }
    rec.update(extra)
    return rec  # type: ignore[return-value]
