"""The tournament as a grader: rates auditors against each other across every finished run of the
tasks that ask for it (the rating itself: benchctl.tournament, imported only when one is graded)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchctl.grading.graders import Grader
from benchctl.grading.judge import Judge

if TYPE_CHECKING:
    from benchctl.tournament.schema import Ratings


class Tournament(Grader):
    name = "tournament"
    scope = "results"

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
        from benchctl.tournament.grader import agrade_tournament

        return await agrade_tournament(
            results,
            judge,
            force=force,
            auditor_key=auditor_key,
            tasks=tasks,
            verifier=verifier,
            verify_stats=verify_stats,
        )


GRADER = Tournament()
