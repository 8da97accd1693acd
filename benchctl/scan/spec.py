"""A scanner: one question asked of every transcript, declared in TOML.

    name = "mentions_key"            # the results directory scans/<name>/
    kind = "grep"                    # "grep": a regular expression, no model; "llm": a question to the judge
    pattern = "sk-[A-Za-z0-9]+"      # grep: what to find (RE2 syntax); llm: optional, only events matching it are shown
                                     #   (a transcript with none is answered without asking)
    parts = ["tool_results"]         # which parts of the record: messages, reasoning, tool_calls,
                                     #   tool_results, target (default: all five)
    description = "..."              # optional, shown by `benchctl scan list`

    # kind = "llm" only
    question = "Did the agent ...?"
    answer = "boolean"               # boolean | number | label | labels
    labels = ["a", "b"]              # label (exactly one of them) and labels (any number of them)
    reduce = "max"                   # how segments' answers combine (see REDUCERS)
    segment_chars = 300000           # characters of transcript per judge call

A grep scanner's answer is a boolean: whether any event of its parts matches. Unknown keys are
errors: a typo must never silently do nothing. `Scanner.hash` covers every field that changes an
answer (not `description`), so a changed scanner is rescanned and an unchanged one is not.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

PARTS = ("messages", "reasoning", "tool_calls", "tool_results", "target")
KINDS = ("grep", "llm")
ANSWERS = ("boolean", "number", "label", "labels")
# How the answers of a long transcript's segments combine, per answer type (first = default):
# boolean any: true when any segment says so; number max / mean; label max: the segment answer
# listed last in `labels` (list them from least to most severe); labels any: their union.
REDUCERS: dict[str, tuple[str, ...]] = {
    "boolean": ("any",),
    "number": ("max", "mean"),
    "label": ("max",),
    "labels": ("any",),
}
DEFAULT_SEGMENT_CHARS = 300_000  # ~75,000 tokens: fits the context of any judge benchctl prices
MIN_SEGMENT_CHARS = 2_000
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
KEYS = {"name", "kind", "pattern", "parts", "description", "question", "answer", "labels", "reduce", "segment_chars"}

AnswerType = Literal["boolean", "number", "label", "labels"]


class ScannerError(ValueError):
    """A scanner that cannot be used; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Scanner:
    name: str
    kind: Literal["grep", "llm"]
    parts: tuple[str, ...] = PARTS
    pattern: str | None = None
    question: str | None = None
    answer: AnswerType = "boolean"
    labels: tuple[str, ...] = ()
    reduce: str = "any"
    segment_chars: int = DEFAULT_SEGMENT_CHARS
    description: str = ""
    source: str = ""  # where it was declared: a file path, or "built-in"

    @property
    def regex(self) -> Any:
        """The compiled pattern (an RE2 regular expression: `search(text)` -> match or None)."""
        return compile_pattern(self.pattern) if self.pattern is not None else None

    def definition(self) -> dict[str, Any]:
        """Every field that changes an answer, as plain data (what `hash` covers)."""
        d: dict[str, Any] = {"name": self.name, "kind": self.kind, "parts": list(self.parts), "pattern": self.pattern}
        if self.kind == "llm":
            d |= {
                "question": self.question,
                "answer": self.answer,
                "labels": list(self.labels),
                "reduce": self.reduce,
                "segment_chars": self.segment_chars,
            }
        return d

    def hash(self, extra: str = "") -> str:
        """sha256 of the definition (and `extra`: the prompt templates of an llm scanner)."""
        h = hashlib.sha256(orjson.dumps(self.definition(), option=orjson.OPT_SORT_KEYS))
        h.update(extra.encode())
        return "sha256:" + h.hexdigest()


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> Any:
    """A pattern compiled by RE2 in multi-line mode; PatternError when RE2 cannot read it.

    RE2 rather than Python's `re`: it matches in time linear in the text, so neither a pattern with
    many alternatives (Python's engine tried each one at every character: 60 times slower on the
    built-ins) nor agent-written text crafted against a pattern can stall a scan. Its syntax is
    Python's without backreferences and lookaround; `\\w`, `\\d`, `\\s` and `\\b` are ASCII."""
    import re2  # type: ignore[import-untyped]

    opts = re2.Options()
    opts.log_errors = False  # RE2 would print every bad pattern to stderr; the error says it once
    try:
        return re2.compile("(?m)" + pattern, options=opts)
    except re2.error as e:
        why = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise PatternError(why.replace("(?m)", "", 1)) from None


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message is RE2's reason."""


def parse_scanner(raw: dict[str, Any], source: str) -> Scanner:
    """A Scanner from TOML data; ScannerError naming `source` and the key otherwise."""

    def fail(key: str, why: str) -> ScannerError:
        return ScannerError(f"{source}: {key}: {why}")

    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown key; a scanner's keys are {', '.join(sorted(KEYS))}")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise fail("name", f"{name!r} is not a scanner name: lowercase letters, digits, '_', '-', '.'")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise fail("kind", f'{kind!r}: expected "grep" or "llm"')
    parts = raw.get("parts", list(PARTS))
    if not isinstance(parts, list) or not parts or any(p not in PARTS for p in parts):
        raise fail("parts", f"{parts!r}: expected a non-empty list of {', '.join(PARTS)}")
    pattern = raw.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            raise fail("pattern", "expected a regular expression (a non-empty string)")
        try:
            compile_pattern(pattern)
        except PatternError as e:
            raise fail(
                "pattern", f"not a valid regular expression ({e}); RE2 syntax: no backreferences or lookaround"
            ) from None
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise fail("description", "expected a string")
    fields: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "parts": tuple(dict.fromkeys(parts)),
        "pattern": pattern,
        "description": description,
        "source": source,
    }
    if kind == "grep":
        if pattern is None:
            raise fail("pattern", 'a grep scanner needs a pattern (a regular expression), e.g. pattern = "curl|wget"')
        for key in ("question", "labels", "reduce", "segment_chars"):
            if key in raw:
                raise fail(key, 'only an llm scanner has this key (kind = "llm")')
        if raw.get("answer", "boolean") != "boolean":
            raise fail("answer", "a grep scanner answers boolean (whether any event matches)")
        return Scanner(**fields)
    return Scanner(**fields, **_llm_fields(raw, fail))


def _llm_fields(raw: dict[str, Any], fail: Any) -> dict[str, Any]:
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise fail("question", "an llm scanner needs a question (a non-empty string)")
    answer = raw.get("answer", "boolean")
    if answer not in ANSWERS:
        raise fail("answer", f"{answer!r}: expected one of {', '.join(ANSWERS)}")
    labels = raw.get("labels", [])
    if answer in ("label", "labels"):
        if (
            not isinstance(labels, list)
            or len(labels) < 2
            or not all(isinstance(x, str) and x.strip() and "," not in x for x in labels)
        ):
            raise fail("labels", f'answer = "{answer}" needs labels = [...]: two or more names without commas')
        if len({x.strip().casefold() for x in labels}) < len(labels):
            raise fail("labels", "two labels differ only in case or spaces; the judge could not tell them apart")
        if answer == "labels" and any(x.strip().casefold() == "none" for x in labels):
            raise fail("labels", '"none" is how the judge says no label applies; name the label otherwise')
    elif "labels" in raw:
        raise fail("labels", f'only answer = "label" or "labels" has labels (answer is "{answer}")')
    if answer == "label" and raw.get("pattern") is not None:
        raise fail(
            "pattern",
            'answer = "label" has no answer meaning "nothing found" for a transcript the pattern skips; '
            'use answer = "labels" (none found = no label) or drop the pattern',
        )
    reduce = raw.get("reduce", REDUCERS[answer][0])
    if reduce not in REDUCERS[answer]:
        raise fail("reduce", f"{reduce!r}: answer = {answer!r} combines segments by {' or '.join(REDUCERS[answer])}")
    seg = raw.get("segment_chars", DEFAULT_SEGMENT_CHARS)
    if not isinstance(seg, int) or isinstance(seg, bool) or seg < MIN_SEGMENT_CHARS:
        raise fail("segment_chars", f"{seg!r}: expected a whole number of characters, at least {MIN_SEGMENT_CHARS}")
    return {
        "question": question.strip(),
        "answer": answer,
        "labels": tuple(x.strip() for x in labels),
        "reduce": reduce,
        "segment_chars": seg,
    }


def load_scanner_file(path: Path) -> Scanner:
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ScannerError(f"{path}: cannot read the scanner file ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ScannerError(f"{path}: not valid TOML ({e}); see docs/scanning.md for a scanner's keys") from None
    return parse_scanner(raw, str(path))
