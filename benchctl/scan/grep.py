"""The grep scanner: a regular expression over a transcript's parts, no model.

The answer is whether any event matches; `events` lists the matching events (up to MAX_EVENTS,
`n_matches` counts them all) and the explanation quotes the first few matches in context.
Each event is searched as the judge sees it: its header line (`tool_result bash (exit 1)`) then its
text (`parts.searched`). Patterns are RE2 regular expressions (`spec.compile_pattern`: Python's
syntax without backreferences and lookaround) in multi-line mode (`^` and `$` match at every line);
inline flags such as `(?i)` make them case-insensitive.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchctl.scan.parts import Entry, searched
from benchctl.scan.spec import Scanner

MAX_EVENTS = 1000  # events listed per result: a pattern that matches everything stays a small file
EXCERPTS = 5
CONTEXT = 60  # characters shown either side of a match


@dataclass
class GrepAnswer:
    value: bool
    events: list[int]
    n_matches: int
    explanation: str


def scan_grep(scanner: Scanner, entries: list[Entry]) -> GrepAnswer:
    """Match the scanner's pattern against entries (already the scanner's parts)."""
    rx = scanner.regex
    assert rx is not None, "a grep scanner has a pattern (spec.parse_scanner checks it)"
    events: dict[int, None] = {}
    quotes: list[str] = []
    for e in entries:
        text = searched(e)
        m = rx.search(text)
        if m is None:
            continue
        events[e.seq] = None
        if len(quotes) < EXCERPTS:
            quotes.append(f"[E{e.seq}] {_excerpt(text, m.start(), m.end())}")
    if not events:
        return GrepAnswer(False, [], 0, "no event of its parts matches the pattern")
    more = f" (the first {EXCERPTS} quoted)" if len(events) > EXCERPTS else ""
    head = f"{len(events)} event(s) match the pattern{more}:"
    return GrepAnswer(True, list(events)[:MAX_EVENTS], len(events), "\n".join([head, *quotes]))


def _excerpt(text: str, start: int, end: int) -> str:
    a, b = max(0, start - CONTEXT), min(len(text), end + CONTEXT)
    snippet = " ".join(text[a:b].split())
    return ("…" if a else "") + snippet + ("…" if b < len(text) else "")
