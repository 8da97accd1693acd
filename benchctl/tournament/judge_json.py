"""Find the JSON in a judge's answer: code fences, prose around it, trailing commas, a bare list.

Judges wrap JSON in ```json fences, put a sentence before or after it, or answer with several
candidate objects; `find_json` returns the first candidate that parses and that the caller's
`accept` predicate likes, so a stray `{}` in the prose does not win over the real answer.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterator

import orjson

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class JudgeParseError(ValueError):
    """The answer holds no usable JSON; the message is fit to send back to the judge."""


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket matching text[start] ('{' or '['), skipping strings."""
    open_ch = text[start]
    close_ch = "}" if open_ch == "{" else "]"
    depth = 0
    in_str = False
    esc = False
    for k in range(start, len(text)):
        ch = text[k]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return k + 1
    return None


def _loads(fragment: str) -> Any:
    try:
        return orjson.loads(fragment)
    except orjson.JSONDecodeError:
        return orjson.loads(_TRAILING_COMMA.sub(r"\1", fragment))


def candidates(text: str) -> Iterator[Any]:
    """Every JSON value found: fenced blocks first, then balanced {...} / [...] spans in order."""
    sources = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for src in sources:
        k = 0
        while k < len(src):
            if src[k] in "{[":
                end = _balanced_end(src, k)
                if end is not None:
                    try:
                        yield _loads(src[k:end])
                        k = end
                        continue
                    except orjson.JSONDecodeError:
                        pass
            k += 1


def find_json(text: str, accept: Callable[[Any], bool] = lambda v: isinstance(v, (dict, list))) -> Any:
    if not text or not text.strip():
        raise JudgeParseError("the answer was empty")
    for value in candidates(text):
        if accept(value):
            return value
    raise JudgeParseError("no JSON object of the requested shape was found in the answer")
