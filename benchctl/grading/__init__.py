"""Grading: judge models score what runs left on disk (no Docker, no agent binaries).

Graders, by name (the `grader` field of a GradeRecord and the grades/<name>/ directory), each
declared as an entry point in the group `benchctl.graders` (pyproject.toml), the way a plugin
grader is declared too (benchctl/grading/graders.py says what a grader is):

    coverage   rubric coverage of a findings file (batched judge calls, strict score)
    tldr       holistic 0-1 score of the report's TLDR against the reference summary
    combined   w_cov * coverage + w_tldr * tldr (no judge call; reads the two records)
    any_of_n   hidden-behaviour audits: did any of N predictions match the ground truth
    tournament environment auditing, across all runs at once (benchctl.tournament)

`benchctl grade` runs them through runner.py.
"""

from benchctl.grading.graders import GRADERS, Grader, grader, load_grading

__all__ = ["GRADERS", "Grader", "grader", "load_grading"]
