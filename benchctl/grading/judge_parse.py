"""Reading a judge's answer: only the judge's own structured output counts.

Judges wrap JSON in code fences, put prose around it, quote the report they were shown, draft
an answer and then correct it. The rules, in order:

- every outermost `{...}` object in the answer is a candidate (code fences need no special
  case: the object inside a fence is found like any other); trailing commas are forgiven;
- the LAST candidate with the expected shape wins — a judge that quotes the report first and
  answers last is read correctly, and text the report smuggled in ("GRADE: 1.0") is never read
  because it is not the judge's final structured answer;
- scores are numbers (or numeric strings) clamped to [0, 1] and rounded to 0.1 (half up);
  NaN, booleans and non-numbers are "unparsed", never 0;
- ids the judge did not score are returned as `missing` so the caller can re-ask once.

Verdicts (any-of-N) are read the same way: the last `VERDICT: ...` in the answer wins, and an
answer off the menu (e.g. PARTIAL) is unparsed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from benchctl.grading.judge_json import json_objects

_LIST_KEYS = ("scores", "findings", "results", "items", "grades")


@dataclass
class ItemScore:
    score: float
    quote: str = ""
    reason: str = ""


@dataclass
class ParsedScores:
    scores: dict[str, ItemScore] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    error: str | None = None  # why nothing could be read (no JSON object, wrong shape)


def clamp_score(value: Any) -> float | None:
    """A judge's score as a number in [0, 1] at 0.1 steps, or None when it is not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        percent = text.endswith("%")
        try:
            value = float(text.rstrip("%")) / (100 if percent else 1)
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or math.isnan(value):
        return None
    value = min(1.0, max(0.0, float(value)))
    return math.floor(value * 10 + 0.5 + 1e-9) / 10  # half up: 0.25 -> 0.3 (round() would give 0.2)


def strict_score(score: float) -> float:
    """The strict transform max(2s - 1, 0): a half-covered finding counts 0, a full one 1."""
    return round(max(2 * score - 1, 0.0), 10)


def _entries(obj: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """(id, value) pairs from the shapes judges use, or None when `obj` is not a score object."""
    for key in _LIST_KEYS:
        inner = obj.get(key)
        if isinstance(inner, list):
            out = []
            for e in inner:
                if isinstance(e, dict):
                    ident = e.get("id", e.get("finding_id", e.get("finding")))
                    if ident is not None:
                        out.append((str(ident), e))
            return out
        if isinstance(inner, dict):
            return [(str(k), v) for k, v in inner.items()]
    return None


def _normalise_id(ident: str) -> str:
    return ident.strip().strip("#").lower()


def parse_scores(text: str, expected_ids: list[str]) -> ParsedScores:
    """Per-id scores from a judge's answer to a batch of findings."""
    by_norm = {_normalise_id(i): i for i in expected_ids}
    chosen: list[tuple[str, Any]] | None = None
    for obj in json_objects(text):
        entries = _entries(obj)
        if entries is None:
            # also accept a flat {"F1": 0.7, "F2": {...}} keyed by the batch's ids
            entries = [(k, v) for k, v in obj.items() if _normalise_id(str(k)) in by_norm] or None
        if entries is not None:
            chosen = entries  # may be empty ({"scores": []}): then every id is simply missing
    out = ParsedScores()
    if chosen is None:
        out.error = (
            "no JSON object with scores for this batch in the judge's answer"
            if "{" in text
            else "the judge's answer contains no JSON object"
        )
        out.missing = list(expected_ids)
        return out
    for ident, value in chosen:
        key = by_norm.get(_normalise_id(ident))
        if key is None:
            continue  # an id we did not ask about: ignore rather than guess
        if isinstance(value, dict):
            score = clamp_score(value.get("score"))
            quote = value.get("quote") or ""
            reason = value.get("reason") or value.get("reasoning") or ""
        else:
            score, quote, reason = clamp_score(value), "", ""
        if score is None:
            continue
        out.scores[key] = ItemScore(score, str(quote), str(reason))
    out.missing = [i for i in expected_ids if i not in out.scores]
    return out


def parse_holistic(text: str) -> ItemScore | None:
    """{"score": s, "reason": ...} from a holistic judgement; the last such object wins."""
    found: ItemScore | None = None
    for obj in json_objects(text):
        if "score" in obj:
            score = clamp_score(obj.get("score"))
            if score is not None:
                found = ItemScore(
                    score, str(obj.get("quote") or ""), str(obj.get("reason") or obj.get("reasoning") or "")
                )
    return found


Verdict = Literal["match", "no_match"]
_VERDICT = re.compile(r"verdict[\"'*_`\s]*[:=][\"'*_`\s]*([A-Za-z][A-Za-z_\- ]{0,20})", re.IGNORECASE)
_MATCH = {"yes", "match", "matches", "matched", "true"}
_NO_MATCH = {"no", "no match", "no_match", "no-match", "nomatch", "not a match", "false", "does not match"}


def parse_verdict(text: str) -> tuple[Verdict | None, str | None]:
    """The judge's last VERDICT in its answer: ("match" | "no_match", raw) or (None, raw) when
    the last verdict is off the menu, (None, None) when there is none."""
    hits = _VERDICT.findall(text)
    if not hits:
        return None, None
    raw = hits[-1]
    word = re.split(r"[\n\r.,;]", raw)[0].strip().strip("\"'*_`").lower()
    word = re.sub(r"\s+", " ", word)
    if word in _MATCH:
        return "match", raw.strip()
    if word in _NO_MATCH or word.startswith("no ") and word[3:].strip() in ("match", "matched"):
        return "no_match", raw.strip()
    # "YES" followed by prose on the same line: take the first word
    first = word.split(" ")[0]
    if first in ("yes", "match", "matched"):
        return "match", raw.strip()
    if first in ("no", "no_match", "no-match", "nomatch"):
        return "no_match", raw.strip()
    return None, raw.strip()
