"""A run's artifacts with the grades given to each: the full grade records (judge reasons and
quotes included, which the report loader drops), grouped by the artifact they graded, and what
each grade was judged against (`Rubrics`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchctl.grading.config import GradingConfig, GradingConfigError
from benchctl.grading.graders import load_grading, rubric_hash
from benchctl.grading.tldr import extract_tldr
from benchctl.jsonio import read_json
from benchctl.layout import GRADES
from benchctl.view.paths import RunFiles, artifact_file, list_artifacts

MAX_RENDER = 2_000_000  # bytes of an artifact rendered in the page; larger ones are linked
GRADER_ORDER = ("combined", "coverage", "tldr", "any_of_n", "tournament")


@dataclass
class Artifact:
    name: str
    size: int
    text: str | None  # None: binary or too large to show
    kind: str  # markdown | json | text | binary | large
    grades: list[dict[str, Any]] = field(default_factory=list)


def grade_records(root: str, run_id: str) -> list[dict[str, Any]]:
    """Every grade record of `run_id` (main artifact and follow-ups), in grader order."""
    gdir = os.path.join(root, GRADES)
    out: list[dict[str, Any]] = []
    try:
        graders = sorted(e.name for e in os.scandir(gdir) if e.is_dir(follow_symlinks=False))
    except OSError:
        return out
    for grader in graders:
        with os.scandir(os.path.join(gdir, grader)) as it:
            names = sorted(
                e.name
                for e in it
                if e.name.endswith(".json")
                and e.is_file(follow_symlinks=False)
                and (e.name == f"{run_id}.json" or e.name.startswith(f"{run_id}~"))
            )
        for name in names:
            try:
                rec = read_json(os.path.join(gdir, grader, name))
            except (OSError, ValueError) as e:
                rec = {"grader": grader, "status": "unreadable", "error": str(e)}
            if isinstance(rec, dict):
                rec.setdefault("grader", grader)
                out.append(rec)
    rank = {g: i for i, g in enumerate(GRADER_ORDER)}
    out.sort(key=lambda r: (str(r.get("artifact_tag") or ""), rank.get(str(r.get("grader")), 99), str(r.get("grader"))))
    return out


def _load(path: str, size: int, name: str) -> tuple[str | None, str]:
    if size > MAX_RENDER:
        return None, "large"
    with open(path, "rb") as f:
        data = f.read(MAX_RENDER)
    if b"\x00" in data:
        return None, "binary"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "binary"
    low = name.lower()
    kind = "markdown" if low.endswith((".md", ".markdown")) else "json" if low.endswith((".json", ".jsonl")) else "text"
    return text, kind


def artifacts_with_grades(
    root: str, files: RunFiles, meta: dict[str, Any] | None
) -> tuple[list[Artifact], list[dict[str, Any]]]:
    """(artifacts, grades whose artifact is missing). The main artifacts come first (the order
    of the task's `artifacts`), then follow-ups' (`name.followup-N.ext`), then everything else."""
    grades = grade_records(root, files.run_id) if files.attempt is None else []
    arts: list[Artifact] = []
    for rel, size in list_artifacts(files):
        text, kind = _load(artifact_file(files, rel), size, rel)
        arts.append(Artifact(rel, size, text, kind))
    by_name = {a.name: a for a in arts}
    orphans: list[dict[str, Any]] = []
    for g in grades:
        a = by_name.get(str(g.get("artifact")))
        (a.grades if a is not None else orphans).append(g)
    declared = list(((meta or {}).get("spec") or {}).get("artifacts") or (meta or {}).get("artifacts") or [])

    def order(a: Artifact) -> tuple[int, int, int, str]:
        for i, d in enumerate(declared):
            stem, ext = os.path.splitext(str(d))
            if a.name == d:
                return (0, i, 0, a.name)
            if a.name.startswith(stem + ".followup-") and a.name.endswith(ext):
                return (0, i, 1, a.name)
        return (1 if a.grades else 2, 0, 0, a.name)

    arts.sort(key=order)
    return arts, orphans


@dataclass
class RubricText:
    """What one grade was judged against, for the reader: the findings' texts by id (coverage)
    or the expected text (tldr: the reference's TLDR; any_of_n: the hidden behaviour).
    `source` is "record" (the grade carries it), "task" (read from the task's rubric, whose
    hash is the grade's) or "" (not available: `note` says why)."""

    findings: dict[str, str] = field(default_factory=dict)
    expected: str | None = None
    source: str = ""
    note: str = ""


class Rubrics:
    """The rubric text of each grade record of one run. Graders write it into the record (the
    coverage items' `text`, the record's `expected`); for a record written before they did, it
    is read from the task named by meta.json's spec.task_dir — only when that task's rubric hash
    for the grader equals the record's `rubric_hash`, so text from a rubric edited (or a task
    moved and replaced) since the grade is never shown beside it. The task is loaded at most
    once, and only when a record needs it."""

    GRADERS = ("coverage", "tldr", "any_of_n")

    def __init__(self, meta: dict[str, Any] | None) -> None:
        self._task_dir = str(((meta or {}).get("spec") or {}).get("task_dir") or "")
        self._cfg: GradingConfig | None = None
        self._why = ""
        self._loaded = False

    def _config(self) -> tuple[GradingConfig | None, str]:
        if not self._loaded:
            self._loaded = True
            if not self._task_dir:
                self._why = "meta.json names no task directory"
            else:
                try:
                    self._cfg = load_grading(Path(self._task_dir))
                except (GradingConfigError, OSError, ValueError) as e:
                    self._why = f"the task could not be read ({e})"
        return self._cfg, self._why

    def __call__(self, g: dict[str, Any]) -> RubricText | None:
        grader = str(g.get("grader"))
        if grader not in self.GRADERS:
            return None
        items = [it for it in g.get("items") or [] if isinstance(it, dict)]
        recorded = {str(it.get("id")): it["text"] for it in items if isinstance(it.get("text"), str)}
        expected = g.get("expected") if isinstance(g.get("expected"), str) else None
        if (grader == "coverage" and len(recorded) == len(items)) or (grader != "coverage" and expected is not None):
            return RubricText(recorded, expected, "record")
        cfg, why = self._config()
        if cfg is not None and (now := rubric_hash(cfg, grader)) != g.get("rubric_hash"):
            cfg, why = (
                None,
                f"the task's rubric has changed since this grade (its hash is {now}, the grade's {g.get('rubric_hash')})",
            )
        if cfg is None:
            return RubricText(recorded, expected, "", f"rubric text not available: {why}")
        if grader == "coverage":
            return RubricText(
                {f.id: f.text for f in cfg.findings} | recorded,
                None,
                "task",
                f"finding texts from {cfg.task_file} (same rubric hash as this grade)",
            )
        expected = extract_tldr(cfg.reference)[0] if grader == "tldr" else cfg.ground_truth
        return RubricText({}, expected, "task", f"read from {cfg.task_file} (same rubric hash as this grade)")
