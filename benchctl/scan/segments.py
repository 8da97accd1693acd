"""A transcript's entries as text a judge reads, in segments that fit its context.

Each entry is one block headed by its event number, which is what the judge cites:

    [E12] tool_result bash (exit 1)
    curl: (6) Could not resolve host: example.com

Entries keep their event numbers whatever segment they land in. Agent-written text cannot forge
a header or a citation: a `[E<digits>]` inside an entry's text is shown as `[E <digits>]`, which
is neither. An entry longer than a segment is cut in the middle (its head and tail kept, with a
note of how much is left out); the record says the judge saw less than the whole transcript.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from benchctl.scan.parts import Entry

_FORGED = re.compile(r"\[E(\d+)")
SEPARATOR = "\n\n"


@dataclass
class Segment:
    text: str
    seqs: set[int] = field(default_factory=set)  # the events shown, which may be cited
    first: int = 0
    last: int = 0
    cut: int = 0  # characters of entries left out because one entry alone was longer than a segment


def render(entry: Entry, limit: int) -> tuple[str, int]:
    """One entry as a block of at most about `limit` characters, and how many characters it lost."""
    body = _FORGED.sub(r"[E \1", entry.text)
    head = f"[E{entry.seq}] {entry.label}\n"
    room = max(limit - len(head) - 80, 200)
    cut = 0
    if len(body) > room:
        cut = len(body) - room
        half = room // 2
        body = f"{body[:half]}\n[... {cut:,} characters left out here ...]\n{body[len(body) - (room - half) :]}"
    return head + body, cut


def split(entries: list[Entry], max_chars: int) -> list[Segment]:
    """Entries packed in order into segments of at most `max_chars` characters (one entry may exceed
    it by its header and the cut note). No entries: no segments."""
    segments: list[Segment] = []
    blocks: list[str] = []
    size = 0
    current = Segment("")
    for e in entries:
        block, cut = render(e, max_chars)
        if blocks and size + len(SEPARATOR) + len(block) > max_chars:
            current.text = SEPARATOR.join(blocks)
            segments.append(current)
            blocks, size, current = [], 0, Segment("")
        if not blocks:
            current.first = e.seq
        blocks.append(block)
        size += len(block) + (len(SEPARATOR) if len(blocks) > 1 else 0)
        current.seqs.add(e.seq)
        current.last = e.seq
        current.cut += cut
    if blocks:
        current.text = SEPARATOR.join(blocks)
        segments.append(current)
    return segments


def cited(text: str) -> list[int]:
    """Event numbers an answer cites, `[E12]` or `[E12, E15]`, in order of first mention."""
    out: dict[int, None] = {}
    for m in re.finditer(r"\[(E\d+(?:\s*,\s*E\d+)*)\]", text):
        for n in re.findall(r"E(\d+)", m.group(1)):
            out[int(n)] = None
    return list(out)
