"""Grading: judge models score what runs left on disk (no Docker, no agent binaries).

Graders, by name (the `grader` field of a GradeRecord and the grades/<name>/ directory):

    coverage   rubric coverage of a findings file (batched judge calls, strict score)
    tldr       holistic 0-1 score of the report's TLDR against the reference summary
    combined   w_cov * coverage + w_tldr * tldr (no judge call; reads the two records)
    any_of_n   hidden-behaviour audits: did any of N predictions match the ground truth
    tournament environment auditing; delegated to benchctl.tournament.grader

`GRADERS` maps the per-artifact graders that call a judge to their coroutine functions;
combined and tournament are handled by the runner (they read other grades or all runs).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from benchctl.grading.any_of_n import grade_any_of_n
from benchctl.grading.coverage import grade_coverage
from benchctl.grading.judge import Judge, Tally
from benchctl.grading.record import GradeJob
from benchctl.grading.tldr import grade_tldr
from benchctl.layout import GradeRecord

# (job, judge, tally): the tally collects the grade's judge usage and exchanges (its judge log)
GraderFn = Callable[[GradeJob, Judge, Tally], Awaitable[GradeRecord]]

GRADERS: dict[str, GraderFn] = {
    "coverage": grade_coverage,
    "tldr": grade_tldr,
    "any_of_n": grade_any_of_n,
}
DERIVED = ("combined",)  # computed from other grade records
WHOLE_RESULTS = ("tournament",)  # graded across all runs at once

__all__ = ["GRADERS", "DERIVED", "WHOLE_RESULTS", "GraderFn"]
