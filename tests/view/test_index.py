"""The viewer's transcript index (`benchctl.view.transcript_index`): built chunk by chunk, at
once or in steps, it records every complete line once, whatever the chunk boundaries cut."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from benchctl.view.transcript_index import TranscriptIndex


def _lines(n: int) -> list[bytes]:
    out = [orjson.dumps({"v": 1, "seq": 0, "t": 1.0, "type": "run_start", "budget_s": 60})]
    for i in range(1, n):
        out.append(
            orjson.dumps(
                {"v": 1, "seq": i, "t": 1.0 + i, "type": "followup" if i == 7 else "assistant", "text": "x" * (i % 50)}
            )
        )
    out[3] = b'{"type":"notice","seq":3,"t":4.0,"v":1}'  # another key order: parsed in full
    out[5] = b'{"v":1,"seq":5, damaged'  # not JSON
    return out


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_index_is_the_same_whatever_the_chunk_size(tmp_path: Path, chunk: int, monkeypatch) -> None:
    path = tmp_path / "transcript.jsonl"
    lines = _lines(120)
    path.write_bytes(b"\n".join(lines) + b"\n" + b'{"v":1,"seq":120,"t":9')  # the last line still being written
    monkeypatch.setattr(TranscriptIndex, "chunk_size", chunk)
    idx = TranscriptIndex(str(path))
    assert idx.refresh() == 120
    assert list(idx.seqs) == list(range(120))
    assert idx.types[3] == "notice" and idx.types[5] == "unparsed" and idx.types[1] == "assistant"
    assert idx.phase_starts == [7] and (idx.start_event or {}).get("budget_s") == 60
    assert [e["seq"] for e in idx.read(0, 120)] == list(range(120))
    assert idx.end == path.stat().st_size - len(b'{"v":1,"seq":120,"t":9')
    with open(path, "ab") as f:  # the write completes
        f.write(b'.5,"type":"run_end"}\n')
    assert idx.refresh() == 121 and idx.types[120] == "run_end"


def test_refresh_with_lines_stops_early_and_a_later_refresh_indexes_the_rest(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "transcript.jsonl"
    path.write_bytes(b"\n".join(_lines(2000)) + b"\n")
    monkeypatch.setattr(TranscriptIndex, "chunk_size", 1024)
    idx = TranscriptIndex(str(path))
    n = idx.refresh(lines=50)
    assert 50 <= n < 100 and idx.partial  # the chunk that reached 50 lines, no more
    assert [e["seq"] for e in idx.read(0, n)] == list(range(n))
    with open(path, "ab") as f:
        f.write(orjson.dumps({"v": 1, "seq": 2000, "t": 1.0, "type": "run_end"}) + b"\n")
    assert idx.refresh(lines=50) == n  # partial with enough lines: left as it is
    assert idx.refresh() == 2001 and not idx.partial  # the rest, the append included
    assert list(idx.seqs) == list(range(2001)) and idx.phase_starts == [7]
    assert idx.refresh(lines=50) == 2001 and not idx.partial  # complete: a refresh as any other


def test_minimap_of_a_growing_transcript_is_the_minimap_drawn_afresh(tmp_path: Path) -> None:
    """A live page's minimap is extended with the appended lines (runpage.minimap_view keeps it per
    index): the result is the one counting the whole transcript gives, and each lane's mark links
    to that lane's first event in its time slot."""
    from benchctl.view.runpage import minimap_view

    path = tmp_path / "transcript.jsonl"
    lines = _lines(58)  # t = 1 + i, within the 60 s budget
    lines[4] = orjson.dumps({"v": 1, "seq": 4, "t": 4.1, "type": "tool_call"})  # the notice's time slot
    path.write_bytes(b"\n".join(lines[:30]) + b"\n")
    idx = TranscriptIndex(str(path))
    idx.refresh()
    minimap_view(idx, 0, 30)
    with open(path, "ab") as f:
        f.write(b"\n".join(lines[30:]) + b"\n")
    idx.refresh()
    grown = minimap_view(idx, 0, 58)
    fresh = TranscriptIndex(str(path))
    fresh.refresh()
    assert grown == minimap_view(fresh, 0, 58) and grown["span_s"] == 60
    # one slot, two lanes: each mark links to its own lane's event
    assert [(r["lane"], r["x"], r["seq"]) for r in grown["rects"] if r["lane"] in ("notice", "tool")] == [
        ("tool", 50.0, 4),
        ("notice", 50.0, 3),
    ]


@pytest.mark.parametrize("chunk", [1, 300, 8 << 20])
def test_search_finds_exactly_the_events_whose_text_holds_the_query(tmp_path: Path, chunk: int, monkeypatch) -> None:
    """The search reads only the lines its byte scan picks; whatever the chunk size, it finds what
    parsing every line and comparing its texts case-folded finds (`events.matches`)."""
    import json
    import random

    from benchctl.view.events import matches

    rng = random.Random(7)
    words = [
        "type",
        "Type",
        "text",
        "ÄRGER",
        "ärger",
        "Straße",
        "STRASSE",
        'say "hi"',
        "a\\b",
        "x\ny",
        "k",
        "K",
        "ﬁle",
        "FILE",
        "12.5",
        "<b>",
        "tool_call",
        "/tmp/x",
        "ß",
        "İ",
        'the "type": field',
    ]
    lines = []
    for i in range(300):
        ev = {
            "v": 1,
            "seq": i,
            "t": 1000.0 + i,
            "type": rng.choice(["assistant", "tool_result", "text_type"]),
            rng.choice(["text", "output", "Type"]): " ".join(rng.choices(words, k=3)),
            "n": rng.choice([12.5, 7, True, None]),
            "nested": {rng.choice(words[:3]): [rng.choice(words)]},
        }
        line = orjson.dumps(ev) if i % 3 else json.dumps(ev, separators=(",", ":")).encode()  # raw UTF-8 / \u escapes
        lines.append(line if i != 50 else b'{"v":1,"seq":50, "text":"type ' + "Ärger".encode() + b'" damaged')
    path = tmp_path / "transcript.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(TranscriptIndex, "search_chunk", chunk)
    idx = TranscriptIndex(str(path))
    idx.refresh()
    everything = idx.read(0, len(idx))
    for q in words + ["TYPE", '"type":', "e", "ss", "fi", "/tmp", 'hi"', "\\", "1000", "true", "null", "Ärger"]:
        expected = [i for i, ev in enumerate(everything) if matches(ev, q.casefold())]
        assert idx.search(q, limit=1000) == (expected, False), q
        if len(expected) > 3:
            assert idx.search(q, limit=3) == (expected[:3], True), q
