"""Finding the JSON in a judge's answer, shared by every grader.

Judges wrap JSON in code fences, put prose around it, quote the untrusted text they were
shown, draft an answer and then correct it. `json_values` yields every outermost JSON value
in the answer, in order (an object inside a fence is found like any other; trailing commas
are forgiven). Callers take the LAST value of the shape they expect: a judge that quotes the
report first and answers last is read correctly, and JSON smuggled into a report is never
the judge's final answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

_DECODER = json.JSONDecoder()
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_CLOSE = {"{": "}", "[": "]"}


class JudgeParseError(ValueError):
    """The answer holds no usable JSON; the message is fit to send back to the judge."""


def _matching_close(text: str, start: int) -> int | None:
    """Index just past the bracket closing text[start] ('{' or '['), skipping strings."""
    open_ch, close_ch = text[start], _CLOSE[text[start]]
    depth = 0
    in_str = False
    esc = False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def json_values(text: str, openers: str = "{[") -> Iterator[Any]:
    """Every outermost JSON object (and, with '[' in `openers`, array) in `text`, in order."""
    pattern = re.compile("[" + re.escape(openers) + "]")
    i = 0
    while True:
        m = pattern.search(text, i)
        if m is None:
            return
        i = m.start()
        try:  # the common case, well-formed JSON, at C speed
            value, end = _DECODER.raw_decode(text, i)
            if isinstance(value, (dict, list)):
                yield value
                i = end
                continue
        except ValueError:
            pass
        close = _matching_close(text, i)
        if close is not None:
            chunk = text[i:close]
            value = None
            for candidate in (chunk, _TRAILING_COMMA.sub(r"\1", chunk)):
                try:
                    value = json.loads(candidate)
                    break
                except ValueError:
                    continue
            if isinstance(value, (dict, list)):
                yield value
                i = close
                continue
        i += 1  # not JSON here; a value may start inside (e.g. "{see {"a": 1}}")


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every outermost JSON object in `text`, in order of appearance."""
    yield from json_values(text, "{")


def last_json(text: str, accept: Callable[[Any], bool] = lambda v: isinstance(v, (dict, list))) -> Any:
    """The last JSON value in `text` that `accept` likes; JudgeParseError when there is none."""
    if not text or not text.strip():
        raise JudgeParseError("the answer was empty")
    found = [v for v in json_values(text) if accept(v)]
    if not found:
        raise JudgeParseError("no JSON object of the requested shape was found in the answer")
    return found[-1]
