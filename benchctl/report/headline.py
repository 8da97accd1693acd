"""Which grade is a run's headline score: chosen per task, so one results directory can mix kinds of task.

A task's headline grader is the first of HEADLINE_ORDER among the graders its own task.toml
`[grading] graders` lists (read through the runs' meta spec.task_dir) that have graded some run of
the task; before any of them has, the first it lists in that order (its runs are then "not graded
yet"). When the task file cannot be read (moved, or no `graders` key) the graders that graded the
task's runs stand in for the list. A grader outside HEADLINE_ORDER (a plugin) comes after those in
it. `--score GRADER` forces one grader for every task.

So a coverage task is ranked by `combined`, a hidden-behaviour audit by `any_of_n` and a tournament
task by `tournament` (the run's mean match share), side by side, and every table says which grader
each number is.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

from benchctl.report.load import Results, Run
from benchctl.report.model import NA

HEADLINE_ORDER = ("combined", "coverage", "tldr", "any_of_n", "tournament")
TASK_FILE = "task.toml"  # as benchctl.tasks.TASK_FILE (not imported here: that module brings in the sandbox)


def task_of(run: Run) -> str:
    """The run's task as the report groups it (`aggregate.config_of`'s task)."""
    task = run.meta.get("task")
    if task is None:
        task = (run.meta.get("spec") or {}).get("task")
    return NA if task is None else str(task)


def declared_graders(task_dir: str) -> list[str] | None:
    """The `[grading] graders` list of the task.toml in `task_dir`; None when there is none to read
    (no such file, not TOML, no list of names: the graders are then inferred from the grades)."""
    if not task_dir:
        return None
    try:
        with open(os.path.join(task_dir, TASK_FILE), "rb") as f:
            grading = tomllib.load(f).get("grading")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    graders = grading.get("graders") if isinstance(grading, dict) else None
    if not isinstance(graders, list) or not graders or not all(isinstance(g, str) for g in graders):
        return None
    return graders


@dataclass(frozen=True)
class Headlines:
    """The headline grader of each task (None: the task has no grade and asks for none we can read)."""

    by_task: dict[str, str | None]
    forced: str | None = None  # --score GRADER

    def of_task(self, task: str) -> str | None:
        return self.forced or self.by_task.get(task)

    def of(self, run: Run) -> str | None:
        return self.of_task(task_of(run))

    @property
    def graders(self) -> list[str]:
        """Every headline grader in use, in HEADLINE_ORDER."""
        if self.forced:
            return [self.forced]
        return sorted({g for g in self.by_task.values() if g}, key=_order)

    @property
    def single(self) -> str | None:
        """The headline grader when every graded task has the same one, else None."""
        graders = self.graders
        return graders[0] if len(graders) == 1 else None

    def label(self) -> str | None:
        """For provenance: the grader, or the graders joined by ", " when tasks differ; None: no grades."""
        return ", ".join(self.graders) or None


def pick_headlines(results: Results, score: str | None = None) -> Headlines:
    """Each task's headline grader (see the module docstring). Raises ValueError when `score` names a
    grader with no grades here."""
    if score:
        if score not in results.graders:
            raise ValueError(
                f"--score {score}: no grades from that grader; found: "
                f"{', '.join(results.graders) or 'none'} (run `benchctl grade` first)"
            )
        return Headlines({task_of(r): score for r in results.runs}, forced=score)
    runs_of: dict[str, list[Run]] = {}
    for r in results.runs:
        task = task_of(r)
        if (runs := runs_of.get(task)) is None:
            runs_of[task] = [r]
        else:
            runs.append(r)
    by_task: dict[str, str | None] = {}
    for task, runs in runs_of.items():
        declared = _declared(runs)
        # candidates in order, each checked until a run has its grade: usually the first run has it
        candidates = sorted(declared if declared is not None else results.graders, key=_order)
        by_task[task] = next(
            (g for g in candidates if any((g, None) in r.grades for r in runs)),
            candidates[0] if declared is not None else None,
        )
    return Headlines(by_task)


def _order(grader: str) -> tuple[int, str]:
    return (HEADLINE_ORDER.index(grader) if grader in HEADLINE_ORDER else len(HEADLINE_ORDER), grader)


def _declared(runs: list[Run]) -> list[str] | None:
    """The graders the task of `runs` lists: from the first of their task directories whose task.toml
    can be read (runs made before the task moved point to its old place)."""
    tried: set[str] = set()
    for r in runs:
        task_dir = (r.meta.get("spec") or {}).get("task_dir")
        if isinstance(task_dir, str) and task_dir not in tried:
            tried.add(task_dir)
            if (declared := declared_graders(task_dir)) is not None:
                return declared
    return None
