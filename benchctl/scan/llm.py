"""The llm scanner: one question to the judge per segment of a transcript, answers combined.

Each segment is its own judge conversation, holding one run's events and nothing of any other
run: what one transcript says cannot reach the judge reading another. The transcript is untrusted
text fenced by nonce markers that a trusted line right before it names (`templates.fence`), and
the system prompt tells the judge it has no authority.

Prompt caching: the prompt is the segment first, then what the scanner asks. The system prompt
names no nonce and the nonce is a hash of the segment alone, so the calls of a session share the
system prompt byte for byte, and every scanner shown the same segment (same parts, same pattern or
none, same segment size) shares the prompt up to the end of the segment: a cache breakpoint sits
there (`templates.render_prompt`) when another scanner of the run asks about that segment
(`shared_segments`), and the judge's `PrefixGate` lets the first of those calls write it alone.
The scope line (which parts, which segment) depends on the scanner, so it comes after.

An answer must end with an `ANSWER:` line of the scanner's type and cite the events it relies on
(`[E12]`). It is re-asked once (the one "ask, then re-ask" loop, `Judge.ask_structured`) when
that line is missing or unreadable, when it cites an event the segment did not show (an event
that does not exist, or one outside the scanner's parts), or when it finds something and cites
nothing; a second such answer leaves the segment unscored. A judge call that fails, or that
the cost cap stops, leaves it unscored too, never a "no".

With a `pattern`, only the events matching it are shown; a transcript with none is answered
"nothing found" (false, 0, no label) without asking.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from benchctl.grading.judge import Judge, JudgeFailed, Tally
from benchctl.grading.judge_json import JudgeParseError
from benchctl.grading.templates import fence, nonce_for, render, render_prompt
from benchctl.scan import answers
from benchctl.scan.parts import Entry, searched
from benchctl.scan.segments import Segment, cited, split
from benchctl.scan.spec import Scanner


def _prompt(name: str) -> str:
    return resources.files("benchctl.scan").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


SYSTEM, QUESTION, REASK = _prompt("system"), _prompt("question"), _prompt("reask")
TEMPLATES = SYSTEM + "\0" + QUESTION + "\0" + REASK  # part of an llm scanner's hash: a new prompt rescans


@dataclass
class SegmentAnswer:
    first: int
    last: int
    value: Any  # None: unscored
    explanation: str = ""
    events: list[int] = field(default_factory=list)
    error: str | None = None
    cut: int = 0

    def to_json(self) -> dict[str, Any]:
        d = {"first": self.first, "last": self.last, "answer": self.value, "events": self.events}
        if self.error:
            d["error"] = self.error
        if self.cut:
            d["cut_chars"] = self.cut
        return d


@dataclass
class LlmAnswer:
    value: Any
    explanation: str
    events: list[int]
    segments: list[SegmentAnswer]
    prefiltered: bool = False  # no event matched the pattern: answered without asking
    error: str | None = None


def shown_entries(scanner: Scanner, entries: list[Entry]) -> list[Entry]:
    """The entries the judge is shown: the scanner's parts, and with a pattern only matching ones."""
    rx = scanner.regex
    return entries if rx is None else [e for e in entries if rx.search(searched(e))]


def segments_for(scanner: Scanner, entries: list[Entry]) -> list[Segment]:
    """What the judge is asked about, segment by segment: the shown entries (already the scanner's
    parts) packed into segments of the scanner's size. None: nothing to ask."""
    return split(shown_entries(scanner, entries), scanner.segment_chars)


def shared_segments(segmented: Iterable[list[Segment]]) -> set[str]:
    """The texts of the segments that more than one of a run's scanners is shown (`segmented`: each
    scanner's segments): worth a cache breakpoint after them. A segment no other call repeats gets
    none, since on Anthropic writing a cache entry that nobody reads costs 1.25x the input price of
    sending it uncached."""
    counts = Counter(seg.text for segments in segmented for seg in segments)
    return {text for text, n in counts.items() if n > 1}


async def scan_llm(
    scanner: Scanner, segments: list[Segment], judge: Judge, tally: Tally, shared: Collection[str] = ()
) -> LlmAnswer:
    """Ask the judge about a transcript's segments (`segments_for`). `shared`: the texts of segments
    other scanners are asked about too (`shared_segments`)."""
    if not segments:
        why = (
            "no event of its parts matches the pattern; the judge was not asked"
            if scanner.pattern is not None
            else "the transcript has no event in the scanner's parts; the judge was not asked"
        )
        if scanner.answer == "label":  # no "nothing found" label: not answered
            return LlmAnswer(None, why, [], [], error=why)
        return LlmAnswer(answers.negative(scanner), why, [], [], prefiltered=True)
    got = await asyncio.gather(
        *(ask_segment(judge, scanner, s, tally, i, len(segments), shared) for i, s in enumerate(segments))
    )
    value = answers.reduce(scanner, [g.value for g in got])
    deciding = [g for g in got if g.value is not None and (value is None or _supports(scanner, g.value, value))]
    events = sorted({n for g in deciding for n in g.events})
    if len(got) == 1:
        explanation = got[0].explanation
    else:
        explanation = "\n\n".join(
            f"Events E{g.first}-E{g.last}: {g.explanation if g.value is not None else 'unscored (' + str(g.error) + ')'}"
            for g in got
        )
    errors = [f"events E{g.first}-E{g.last}: {g.error}" for g in got if g.value is None]
    error = "; ".join(errors) if value is None else None
    return LlmAnswer(value, explanation, events, list(got), error=error)


def _supports(scanner: Scanner, part: Any, whole: Any) -> bool:
    """Whether a segment's answer is part of the reason for the whole answer (its citations count)."""
    if scanner.answer == "labels" or scanner.reduce == "mean":
        return True
    return part == whole  # any true, the max number, the max label: the segments that gave it


async def ask_segment(
    judge: Judge, scanner: Scanner, seg: Segment, tally: Tally, index: int, total: int, shared: Collection[str] = ()
) -> SegmentAnswer:
    out = SegmentAnswer(seg.first, seg.last, None, cut=seg.cut)
    # of the segment alone: every scanner shown this segment sends the same bytes up to its end
    nonce = nonce_for(seg.text)
    scope = (
        (
            "The whole transcript's events of these parts: "
            if total == 1
            else f"Part {index + 1} of {total} of the transcript (events E{seg.first} to E{seg.last}) of these parts: "
        )
        + ", ".join(scanner.parts)
        + "."
    )
    if scanner.pattern is not None:
        scope += " Only the events matching the scanner's search pattern are shown."
    if seg.cut:
        scope += " Events too long to show whole have their middle left out (marked)."
    fmt = answers.answer_format(scanner)
    # the system prompt, the transcript's heading and the fenced segment first (cached prefixes),
    # then what this scanner asks; the segment is "varying" (no breakpoint after it) when no other
    # call repeats it
    prompt = render_prompt(
        QUESTION,
        fenced="transcript",
        varying=() if seg.text in shared else ("transcript",),
        transcript=fence(seg.text, nonce),
        scope=scope,
        question=scanner.question or "",
        answer_format=fmt,
    )

    def parse(text: str) -> tuple[Any, str, list[int]]:
        try:
            explanation, raw = answers.split_answer(text)
            value = answers.parse_value(scanner, raw)
        except answers.AnswerError as e:
            raise JudgeParseError(str(e)) from None
        events = cited(explanation)
        unknown = [n for n in events if n not in seg.seqs]
        if unknown:
            raise JudgeParseError(
                "it cites " + ", ".join(f"[E{n}]" for n in unknown) + ", which no event shown to you is numbered"
            )
        if answers.hit_of(scanner.answer, value) and not events:
            raise JudgeParseError("it finds what the question asks about but cites no event")
        return value, explanation, events

    def reask(e: JudgeParseError) -> str:
        return render(REASK, error=str(e), answer_format_lower=fmt[0].lower() + fmt[1:])

    label = "scan" if total == 1 else f"segment {index + 1} of {total} (E{seg.first}-E{seg.last})"
    try:
        got = await judge.ask_structured(prompt, parse, reask, system=SYSTEM, tally=tally, label=label)
    except JudgeFailed as e:
        out.error = str(e)
        return out
    if got.value is None:
        out.error = f"{got.error} (after one re-ask)"
        return out
    out.value, out.explanation, out.events = got.value
    return out
