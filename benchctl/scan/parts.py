"""A transcript as the parts a scanner reads, each piece numbered by the event it came from.

`read_record(path)` reads `transcript.jsonl` once and returns its `Entry`s in event order, each
tagged with its event's `seq` (what a judge cites, `[E12]`, and what the view links to):

    messages      the agent's text (`assistant` events; `refusal` events), and what it was told:
                  the task prompt (from the first request of the agent's conversation, found by
                  benchctl/task_prompt.py as the viewer finds it), follow-ups, reprompts and revision
                  requests
    reasoning     the agent's visible reasoning: `assistant` events' `reasoning` blocks (withheld
                  reasoning has no text and is skipped), CLI reasoning recorded as `harness_event`
                  kind thinking / reasoning; when neither is in a transcript, the reasoning in its
                  `model_call` responses
    tool_calls    `tool_call` events: the tool's name and input
    tool_results  `tool_result` events: what the tool returned (exit code, error flag)
    target        `target_call` events: what the audited target (or auxiliary) model replied, or
                  the call's error

Everything here is agent-written (or target-written) text: untrusted. The record's
`transcript_hash` is the sha256 of the file's bytes, read in the same pass.

Speed: a grep scanner over 10,000 transcripts must take seconds, so lines are classified by the
`"type"` near their start before any parse, and only the event types the wanted parts are read
from (`FEEDS`) are parsed; `model_call` lines, the bulk of a transcript, only while the task
prompt is not settled yet (`PromptSearch.done`), or when they carry reasoning.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchctl.scan.spec import PARTS
from benchctl.task_prompt import PromptSearch

# the top-level "type" of a line as the transcript writer puts it: after v, seq and t
_TYPE = re.compile(rb'"type":\s*"([a-z_]+)"')
_TYPE_WITHIN = 160  # bytes into a line the top-level type is looked for
# the event types each part is read from: a line of any other type is skipped without parsing
FEEDS: dict[str, frozenset[bytes]] = {
    "messages": frozenset({b"assistant", b"refusal", b"followup", b"reprompt", b"revision_request", b"model_call"}),
    "reasoning": frozenset({b"assistant", b"harness_event", b"model_call"}),
    "tool_calls": frozenset({b"tool_call"}),
    "tool_results": frozenset({b"tool_result"}),
    "target": frozenset({b"target_call"}),
}


@dataclass(slots=True)
class Entry:
    seq: int
    part: str  # one of spec.PARTS
    label: str  # what the event is, e.g. "assistant", "tool_result bash (exit 1)"
    text: str


@dataclass
class Record:
    """A transcript's entries (in event order) and the hash of its bytes."""

    transcript_hash: str
    entries: list[Entry] = field(default_factory=list)
    n_events: int = 0

    def of(self, parts: tuple[str, ...]) -> list[Entry]:
        if len(parts) == len(PARTS):
            return self.entries
        wanted = set(parts)
        return [e for e in self.entries if e.part in wanted]


def searched(entry: Entry) -> str:
    """What a pattern is matched against: the entry's header line (what the event is: its type,
    tool, exit code) and its text, as the judge reads them."""
    return f"{entry.label}\n{entry.text}"


def file_hash(data: bytes) -> str:
    """A transcript's hash (`result.transcript_hash` computes the same from the file in pieces)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_record(path: Path) -> Record:
    """The record of one transcript file (a missing file is an empty transcript)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        data = b""
    return parse_record(data)


def parse_record(data: bytes, parts: tuple[str, ...] = PARTS) -> Record:
    """The record of a transcript's bytes, with the entries of `parts` (at least)."""
    rec = Record(file_hash(data))
    entries = rec.entries
    wanted = frozenset().union(*(FEEDS[p] for p in parts))
    fallback_reasoning: list[Entry] = []
    has_reasoning = False
    prompt = PromptSearch() if "messages" in parts else None
    line_no = -1
    for line in data.splitlines():
        if not line:
            continue
        line_no += 1
        m = _TYPE.search(line, 0, _TYPE_WITHIN)
        if m is not None and line.count(b"{", 0, m.start()) == 1:  # the event's own type, not a nested one
            kind = m.group(1)
            if kind not in wanted:
                continue
            if kind == b"model_call" and (prompt is None or prompt.done) and b'"reasoning"' not in line:
                continue
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a torn or corrupt line, skipped as every transcript reader does
        if not isinstance(ev, dict):
            continue
        seq = ev.get("seq")
        seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else line_no
        t = ev.get("type")
        if t == "model_call":
            if b"model_call" not in wanted:
                continue
            if prompt is not None:
                prompt.offer(ev)
            resp = ev.get("response")
            if isinstance(resp, dict) and (text := reasoning_text(resp.get("reasoning"))):
                fallback_reasoning.append(Entry(seq, "reasoning", "reasoning (model call)", text))
            continue
        before = len(entries)
        _entries(ev, t, seq, entries)
        has_reasoning = has_reasoning or any(e.part == "reasoning" for e in entries[before:])
    rec.n_events = line_no + 1
    if prompt is not None and (found := prompt.prompt) is not None:  # in event order, before its reasoning
        at = bisect.bisect_right(entries, found.seq, key=lambda e: e.seq)
        entries.insert(at, Entry(found.seq, "messages", "user (task prompt)", found.task))
    if not has_reasoning and fallback_reasoning:
        entries.extend(fallback_reasoning)
        entries.sort(key=lambda e: e.seq)  # stable: an event's own entries keep their order
    return rec


def _entries(ev: dict[str, Any], t: Any, seq: int, out: list[Entry]) -> None:
    if t == "assistant":
        text = reasoning_text(ev.get("reasoning"))
        if not text and isinstance(ev.get("thinking"), str):
            text = ev["thinking"]
        if text:
            out.append(Entry(seq, "reasoning", "reasoning", text))
        said = _str(ev.get("text"))
        if said.strip():
            who = "assistant (refusal)" if ev.get("refusal") else "assistant"
            out.append(Entry(seq, "messages", who + _subagent(ev), said))
    elif t == "tool_call":
        out.append(Entry(seq, "tool_calls", f"tool_call {_str(ev.get('name')) or '?'}{_subagent(ev)}", _input(ev)))
    elif t == "tool_result":
        out.append(Entry(seq, "tool_results", _result_label(ev), _str(ev.get("output"))))
    elif t == "target_call":
        role = _str(ev.get("role")) or "target"
        label = f"{role} reply ({_str(ev.get('tool')) or '?'}, {_str(ev.get('model')) or '?'})"
        if ev.get("error"):
            out.append(Entry(seq, "target", label.replace("reply", "call failed"), _str(ev.get("error"))))
        else:
            out.append(Entry(seq, "target", label, _str(ev.get("text"))))
    elif t == "harness_event" and ev.get("kind") in ("thinking", "reasoning"):
        if text := _str(ev.get("text")):
            out.append(Entry(seq, "reasoning", "reasoning", text))
    elif t == "followup":
        out.append(Entry(seq, "messages", "user (follow-up)", _str(ev.get("prompt"))))
    elif t in ("reprompt", "revision_request"):
        out.append(Entry(seq, "messages", f"user ({t.replace('_', ' ')} by benchctl)", _str(ev.get("text"))))
    elif t == "refusal":
        why = _str(ev.get("text")) or f"stop reason {_str(ev.get('stop_reason')) or 'refusal'}"
        out.append(Entry(seq, "messages", "refusal (gateway)", why))


def _str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()


def _subagent(ev: dict[str, Any]) -> str:
    return " (subagent)" if ev.get("subagent") else ""


def _input(ev: dict[str, Any]) -> str:
    """A tool's input as `key: value` lines (strings as they are: a regex sees a command as typed)."""
    value = ev.get("input")
    if isinstance(value, dict):
        return "\n".join(f"{k}: {_str(v)}" for k, v in value.items())
    return _str(value)


def _result_label(ev: dict[str, Any]) -> str:
    notes = []
    if isinstance(ev.get("exit_code"), int):
        notes.append(f"exit {ev['exit_code']}")
    if ev.get("is_error"):
        notes.append("error")
    if ev.get("timed_out"):
        notes.append("timed out")
    if ev.get("truncated"):
        notes.append("cut")
    return f"tool_result {_str(ev.get('name')) or '?'}" + (f" ({', '.join(notes)})" if notes else "")


def reasoning_text(blocks: Any) -> str:
    """The visible text of reasoning blocks (the neutral shape: text, summary, redacted, signature)."""
    if not isinstance(blocks, list):
        return ""
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str) and b["text"].strip()]
    return "\n\n".join(texts)
