"""The graders, by name: one registry (entry points `benchctl.graders`), built-ins and plugins alike.

A grader says what it needs from a task's [grading] table, whether it runs when the table names
no graders, which artifact of a run it grades, what decides its scores (hashed into each grade's
`rubric_hash`, so a grade made under another rubric is never reused), and how it grades. The
runner (runner.py) knows graders only through this: nothing in benchctl names a grader to decide
what to do with it.

Two scopes:

- `artifact`: one grade per run artifact (the main one and its follow-ups). One that asks the
  judge (`asks_judge`) is reused when a scored grade for the same judge and rubric is on disk,
  and its judge calls count toward `--max-cost`; one that does not reads the grades of others of
  the same artifact (combined), runs after them and is recomputed on every pass.
- `results`: all runs of the tasks that ask for it at once (the tournament).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchctl.grading.config import GRADING_VERSION, GradingConfig, GradingConfigError, config_error, read_grading
from benchctl.grading.judge import Judge, Tally
from benchctl.grading.record import GradeJob
from benchctl.layout import GradeRecord
from benchctl.plugins import Registry, UnknownPlugin

if TYPE_CHECKING:
    from benchctl.tournament.schema import Ratings

Problem = tuple[str, str, str]  # (key of the [grading] table, what is wrong, the fix)


class Grader:
    """One grader. Subclasses set `name` and override what differs from these defaults."""

    name: str
    scope: Literal["artifact", "results"] = "artifact"
    asks_judge: bool = True
    # its score is a success (1.0) or a failure (0.0): `benchctl grade` also shows k of n per configuration
    success: bool = False

    def missing(self, cfg: GradingConfig) -> Problem | None:
        """What the task's [grading] table lacks for this grader (None: nothing)."""
        return None

    def by_default(self, cfg: GradingConfig) -> bool:
        """Run it when the table names no graders (its inputs are there)."""
        return False

    def artifact(self, cfg: GradingConfig) -> str:
        """The artifact of each run it grades (its follow-up versions too)."""
        return cfg.artifact

    def rubric(self, cfg: GradingConfig) -> dict[str, Any]:
        """Everything of the task that decides its scores, besides the judge's system prompt."""
        return {}

    async def grade(self, job: GradeJob, judge: Judge, tally: Tally) -> GradeRecord:
        """One artifact's grade (scope `artifact`). `tally` collects the judge calls (its judge log)."""
        raise NotImplementedError(f"the {self.name} grader grades whole results directories")

    async def grade_results(
        self,
        results: Path,
        judge: Judge,
        *,
        force: bool,
        auditor_key: str,
        tasks: Collection[str],
        verifier: str | None = None,
        verify_stats: Any = None,
    ) -> Ratings:
        """Every finished run of `tasks` at once (scope `results`). `verifier` (None: the judge) and
        `verify_stats` serve a grader that checks claims with agent runs (the tournament's verify = "agent")."""
        raise NotImplementedError(f"the {self.name} grader grades one artifact at a time")


GRADERS: Registry[Grader] = Registry("benchctl.graders", "grader")


def grader(name: str, cfg: GradingConfig | None = None) -> Grader:
    """The grader called `name`; an unknown one is a GradingConfigError (naming the task file when given)."""
    try:
        return GRADERS.load(name)
    except UnknownPlugin as e:
        if cfg is not None:
            raise config_error(cfg.task_file, "graders", str(e), "fix the name or install the grader") from None
        raise GradingConfigError(str(e)) from None


def check_graders(cfg: GradingConfig, names: list[str]) -> None:
    """Each grader exists and has what it needs in the task, or a clear error saying what to add."""
    for name in names:
        problem = grader(name, cfg).missing(cfg)
        if problem is not None:
            raise config_error(cfg.task_file, *problem)


def rubric_hash(cfg: GradingConfig, name: str) -> str:
    """Content hash of everything that decides a grader's scores: prompts, rubric, settings."""
    parts: dict[str, Any] = {"grader": name, "version": GRADING_VERSION, "system": cfg.prompts["system"]}
    parts.update(grader(name, cfg).rubric(cfg))
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()[:16]


def load_grading(task_dir: Path) -> GradingConfig:
    """Read `<task_dir>/task.toml` and return its checked grading configuration. With no `graders`
    key, the graders whose inputs the table has (each grader's `by_default`): those that ask the
    judge, then those that read their grades."""
    cfg, names = read_grading(task_dir)
    if names is None:
        found = [n for n in GRADERS.names() if grader(n).by_default(cfg)]
        names = sorted(found, key=lambda n: (not grader(n).asks_judge, n))
    cfg.graders = list(names)
    check_graders(cfg, cfg.graders)
    return cfg
