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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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


def first_in_order(graders: Iterable[str]) -> str | None:
    """The first of `graders` in HEADLINE_ORDER; graders outside it after those in it, by name."""
    rank = {g: i for i, g in enumerate(HEADLINE_ORDER)}
    return min(graders, key=lambda g: (rank.get(g, len(rank)), g), default=None)


def declared_graders(task_dir: Any) -> list[str] | None:
    """The `[grading] graders` list of the task.toml in `task_dir`; None when there is none to read
    (no such file, not TOML, no list of names: the graders are then inferred from the grades)."""
    if not isinstance(task_dir, str) or not task_dir:
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
        used = {g for g in self.by_task.values() if g}
        return sorted(used, key=lambda g: (HEADLINE_ORDER.index(g) if g in HEADLINE_ORDER else len(HEADLINE_ORDER), g))

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
    graded: dict[str, set[str]] = {}
    task_dirs: dict[str, list[Any]] = {}
    for r in results.runs:
        task = task_of(r)
        graded.setdefault(task, set()).update(g for g, tag in r.grades if tag is None)
        dirs = task_dirs.setdefault(task, [])
        if (d := (r.meta.get("spec") or {}).get("task_dir")) not in dirs:
            dirs.append(d)
    by_task: dict[str, str | None] = {}
    for task, present in graded.items():
        declared = next((g for d in task_dirs[task] if (g := declared_graders(d)) is not None), None)
        if declared is None:
            by_task[task] = first_in_order(present)
        else:
            by_task[task] = first_in_order(present.intersection(declared)) or first_in_order(declared)
    return Headlines(by_task)
