"""Finding the TLDR of a report, and grading it holistically.

Extraction rule (documented in docs/grading.md, Scores):
1. A heading whose text is TLDR, TL;DR, TL DR, Summary or Executive summary (any case, any
   level, markdown `#` headings or a line that is only bold text such as `**TL;DR**`, an optional
   trailing colon). The section runs to the next heading of the same or a higher level (any
   heading, for bold-line headings).
2. Else a paragraph that starts with "TLDR:" / "TL;DR:" / "Summary:" (the label removed).
3. Else the opening paragraph: the first block of non-empty lines that is not a heading.
An empty report has no TLDR (graded 0 without calling the judge).
"""

from __future__ import annotations

import re
from typing import Any

from benchctl.grading.config import GradingConfig
from benchctl.grading.graders import Grader, Problem, rubric_hash
from benchctl.grading.judge import Judge, JudgeFailed, Tally
from benchctl.grading.judge_json import JudgeParseError
from benchctl.grading.judge_parse import ItemScore, parse_holistic
from benchctl.grading.record import GradeJob, make_record
from benchctl.grading.templates import fence, nonce_for, render, render_prompt
from benchctl.layout import GradeItem, GradeRecord

_NAMES = {"tldr", "tl;dr", "tl dr", "tl-dr", "summary", "executive summary"}
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)(.+?)(\*\*|__)\s*:?\s*$")
_INLINE = re.compile(
    r"^\s*(?:\*\*|__)?(tl;?\s?dr|summary)(?:\*\*|__)?\s*[:\-–—]\s*(?:\*\*|__)?\s*(.+)", re.IGNORECASE | re.DOTALL
)


def _norm(title: str) -> str:
    t = re.sub(r"[*_`]", "", title).strip().rstrip(":").strip().lower()
    return re.sub(r"\s+", " ", t)


def _heading(line: str) -> tuple[int, str] | None:
    m = _MD_HEADING.match(line)
    if m:
        return len(m.group(1)), m.group(2)
    m = _BOLD_LINE.match(line)
    if m:
        return 7, m.group(2)  # a bold line acts as a heading of the lowest level
    return None


def _paragraphs(lines: list[str]) -> list[str]:
    out, cur = [], []
    for line in lines:
        if line.strip():
            cur.append(line.rstrip())
        elif cur:
            out.append("\n".join(cur))
            cur = []
    if cur:
        out.append("\n".join(cur))
    return out


def extract_tldr(report: str) -> tuple[str, str]:
    """(tldr text, which rule found it). ("", "empty") when the report has no text."""
    lines = report.splitlines()
    for i, line in enumerate(lines):
        h = _heading(line)
        if h and _norm(h[1]) in _NAMES:
            level = h[0]
            body = []
            for nxt in lines[i + 1 :]:
                h2 = _heading(nxt)
                if h2 and (h2[0] <= level or level == 7):
                    break
                body.append(nxt)
            text = "\n".join(body).strip()
            if text:
                return text, f"heading: {h[1].strip()}"
    paras = [p for p in _paragraphs(lines)]
    for p in paras:
        m = _INLINE.match(p)
        if m:
            return m.group(2).strip(), f"inline label: {m.group(1)}"
    for p in paras:
        body = [ln for ln in p.splitlines() if not _heading(ln)]
        if body:
            return "\n".join(body).strip(), "opening paragraph"
    return "", "empty"


# ---------------------------------------------------------------- grading


async def grade_tldr(job: GradeJob, judge: Judge, tally: Tally) -> GradeRecord:
    cfg = job.cfg
    rubric = rubric_hash(cfg, "tldr")
    report, _ = job.read_text()
    tldr, rule = extract_tldr(report or "")
    ref_summary, _ = extract_tldr(cfg.reference)  # recorded as `expected`: what the TLDR was judged against
    if not tldr:
        why = f"artifact {job.artifact} missing" if report is None else "the report has no text, so no TLDR"
        return make_record(
            "tldr",
            job,
            judge.model,
            rubric,
            tally=tally,
            score=0.0,
            raw_score=0.0,
            items=[{"id": "holistic", "score": 0.0, "reason": why}],
            tldr="",
            tldr_rule=rule,
            note=why,
            expected=ref_summary,
        )
    nonce = nonce_for(tldr)

    def parse(answer: str) -> ItemScore:
        parsed = parse_holistic(answer)
        if parsed is None:
            raise JudgeParseError("no usable score in the judge's answer")
        return parsed

    item: GradeItem = {"id": "holistic", "score": None}
    try:
        got = await judge.ask_structured(
            render_prompt(
                cfg.prompts["tldr"],
                fenced="tldr",
                varying=("tldr",),
                reference_summary=ref_summary,
                tldr=fence(tldr, nonce),
            ),
            parse,
            cfg.prompts["tldr_reask"],
            system=render(cfg.prompts["system"], nonce=nonce),
            tally=tally,
            label="tldr",
        )
        if got.value is None:
            item["error"] = f"{got.error} after one re-ask"
        else:
            item.update({"score": got.value.score, "reason": got.value.reason})
    except JudgeFailed as e:
        item["error"] = str(e)
    return make_record(
        "tldr",
        job,
        judge.model,
        rubric,
        tally=tally,
        items=[item],
        score=item["score"],
        raw_score=item["score"],
        tldr=tldr,
        tldr_rule=rule,
        expected=ref_summary,
    )


class Tldr(Grader):
    name = "tldr"

    def missing(self, cfg: GradingConfig) -> Problem | None:
        if not cfg.reference:
            return "reference", "the tldr grader needs a reference report", 'add reference = "grading/reference.md"'
        return None

    def by_default(self, cfg: GradingConfig) -> bool:
        return bool(cfg.reference)

    def rubric(self, cfg: GradingConfig) -> dict[str, Any]:
        return {"reference": cfg.reference, "prompt": cfg.prompts["tldr"], "reask": cfg.prompts["tldr_reask"]}

    async def grade(self, job: GradeJob, judge: Judge, tally: Tally) -> GradeRecord:
        return await grade_tldr(job, judge, tally)


GRADER = Tldr()
