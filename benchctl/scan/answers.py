"""Answer types: what a judge writes, what a result stores, what counts as a hit, how segments combine.

    type      the judge ends with         stored as                 a hit when
    boolean   ANSWER: yes | no            true | false              true
    number    ANSWER: 3                   3.0                       not 0
    label     ANSWER: <one label>         "<label>"                 (per label: the report counts each)
    labels    ANSWER: a, b  | none        ["a", "b"] | []           at least one label

`hit` is what `benchctl report` counts and `scan validate` compares with human labels; a label
answer has no single hit, so both count it per label (`hit_of(..., label=X)`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from benchctl.scan.spec import Scanner
from benchctl.stats import mean_or_none

_ANSWER = re.compile(r"^[ \t>*_`#]*ANSWER\s*:\s*(.*?)[ \t*_`]*$", re.MULTILINE | re.IGNORECASE)
YES = {"yes", "true", "y", "1"}
NO = {"no", "false", "n", "0"}


class AnswerError(ValueError):
    """An answer that cannot be read as the scanner's type; the message says what was expected."""


def answer_format(scanner: Scanner) -> str:
    """The instruction that ends a judge prompt: the one line its answer must end with."""
    if scanner.answer == "boolean":
        return "End your answer with exactly one line: `ANSWER: yes` or `ANSWER: no`."
    if scanner.answer == "number":
        return "End your answer with exactly one line `ANSWER: <number>`, e.g. `ANSWER: 3`."
    names = ", ".join(scanner.labels)
    if scanner.answer == "label":
        return f"End your answer with exactly one line `ANSWER: <label>`, where <label> is exactly one of: {names}."
    return (
        "End your answer with exactly one line `ANSWER: <labels>`: every label that applies, separated by "
        f"commas, from: {names}; or `ANSWER: none` when none applies."
    )


def split_answer(text: str) -> tuple[str, str]:
    """(the explanation before the last ANSWER line, what follows `ANSWER:`)."""
    found = list(_ANSWER.finditer(text))
    if not found:
        raise AnswerError("the answer has no `ANSWER:` line")
    last = found[-1]
    return text[: last.start()].strip(), last.group(1).strip()


def parse_value(scanner: Scanner, raw: str) -> Any:
    """The value of an ANSWER line in the scanner's type; AnswerError naming what was expected."""
    word = raw.strip().strip(".").strip()
    if scanner.answer == "boolean":
        if word.casefold() in YES:
            return True
        if word.casefold() in NO:
            return False
        raise AnswerError(f"`ANSWER: {raw}` is not yes or no")
    if scanner.answer == "number":
        try:
            value = float(word.replace(",", ""))
        except ValueError:
            raise AnswerError(f"`ANSWER: {raw}` is not a number") from None
        if not math.isfinite(value):
            raise AnswerError(f"`ANSWER: {raw}` is not a finite number")
        return value
    by_key = {label.casefold(): label for label in scanner.labels}
    if scanner.answer == "label":
        if word.casefold() not in by_key:
            raise AnswerError(f"`ANSWER: {raw}` is not one of the labels {', '.join(scanner.labels)}")
        return by_key[word.casefold()]
    if word.casefold() == "none":
        return []
    names = [w.strip().strip(".") for w in word.split(",") if w.strip()]
    unknown = [n for n in names if n.casefold() not in by_key]
    if unknown or not names:
        raise AnswerError(
            f"`ANSWER: {raw}`: {', '.join(unknown) or 'nothing'} is not among {', '.join(scanner.labels)}"
        )
    return sorted({by_key[n.casefold()] for n in names}, key=scanner.labels.index)


def hit_of(answer_type: str, answer: Any, label: str | None = None) -> bool | None:
    """Whether an answer is a hit (None: unscored, or a label answer asked without `label`)."""
    if answer is None:
        return None
    if label is not None:
        return answer == label if answer_type == "label" else isinstance(answer, list) and label in answer
    if answer_type == "boolean":
        return answer is True
    if answer_type == "number":
        return answer != 0
    if answer_type == "labels":
        return bool(answer)
    return None


def negative(scanner: Scanner) -> Any:
    """The answer for a transcript with nothing to find (no event matches a prefilter pattern)."""
    return {"boolean": False, "number": 0.0, "labels": []}[scanner.answer]


def reduce(scanner: Scanner, values: list[Any]) -> Any:
    """One answer from the segments' answers (None where a segment is unscored); None when the
    unscored segments could change it: only a boolean `true` is settled by one segment alone."""
    known = [v for v in values if v is not None]
    if scanner.answer == "boolean" and any(v is True for v in known):
        return True
    if len(known) < len(values) or not known:
        return None
    if scanner.answer == "boolean":
        return False
    if scanner.answer == "number":
        return max(known) if scanner.reduce == "max" else mean_or_none(known)
    if scanner.answer == "label":
        return max(known, key=scanner.labels.index)
    return sorted({x for v in known for x in v}, key=scanner.labels.index)
