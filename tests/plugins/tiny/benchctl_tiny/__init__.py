"""A third-party harness, grader and scanner written only against benchctl's public plugin contract.

`tiny` writes its `words` option (default "found by name") into /work/report.md in the sandbox, in one
exec, and says so in the transcript; `nonempty` scores 1.0 for an artifact with text, 0.0 otherwise,
without asking the judge; `says_tiny` finds the harness's own words in a transcript's messages.
"""

from __future__ import annotations

import shlex
from typing import Any

from benchctl.grading.graders import Grader, rubric_hash
from benchctl.grading.judge import Judge, Tally
from benchctl.grading.record import GradeJob, make_record
from benchctl.harness import HarnessContext, HarnessResult
from benchctl.layout import GradeRecord
from benchctl.sandbox.base import Mount
from benchctl.scan import parse_scanner


class TinyHarness:
    name = "tiny"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.words = str((options or {}).get("words", "found by name"))

    def mounts(self) -> list[Mount]:
        return []

    def tool_versions(self) -> dict[str, str]:
        return {"tiny": "0.3.1"}

    def run(self, ctx: HarnessContext) -> HarnessResult:
        ctx.transcript.emit("assistant", "harness", turn=1, text=f"tiny writes: {self.words}", stop_reason="end_turn")
        done = ctx.sandbox.exec(["sh", "-c", f"echo {shlex.quote(self.words)} > /work/report.md; hostname"])
        ctx.transcript.emit("harness_event", "harness", kind="tiny_exec", exit_code=done.exit_code, host=done.stdout)
        return HarnessResult("completed" if done.exit_code == 0 else "error", exit_code=done.exit_code, turns=1)

    def followup(self, ctx: HarnessContext, prompt: str, previous: HarnessResult) -> HarnessResult:
        return previous


class NonEmpty(Grader):
    name = "nonempty"
    asks_judge = False

    async def grade(self, job: GradeJob, judge: Judge, tally: Tally) -> GradeRecord:
        text, _ = job.read_text()
        score = 1.0 if text and text.strip() else 0.0
        return make_record(self.name, job, "-", rubric_hash(job.cfg, self.name), items=[], score=score, tally=None)


GRADER = NonEmpty()

SCANNER = parse_scanner(
    {"name": "says_tiny", "kind": "grep", "pattern": "tiny writes", "parts": ["messages"]}, "benchctl-tiny"
)
