"""The one iterator over a run's events that every export format reads.

`find_runs` picks the finished runs of a results directory (with their grades) and the unfinished
ones (their configuration derived as `benchctl report` derives it); `items(run)` streams the run's
transcript line by line and yields typed items in transcript order:

- `ModelTurn`  a model call as the model saw it: the conversation it continues, how many of that
               conversation's messages it kept, the messages new in it (`benchctl.export.wire`),
               its system prompt, tools and sampling settings, and the response, usage and timing;
- `TargetTurn` a call to an audited target or auxiliary model (hidden-behaviour audits);
- `ToolUse`    a tool the harness ran: the call and its result (None when the run ended first);
- `Note`       every other event, including event types this module does not know, as recorded.

`phase_of(event)` names the phase a `followup` event starts (`followup-N`, the artifact tag its
artifacts and grades carry); everything before the first is the `main` phase.

Memory: a conversation costs 12 bytes per message (how many neutral messages each wire message
became, and a 64-bit fingerprint of each), never the messages themselves, so a 100,000-event
transcript streams.
"""

from __future__ import annotations

import fnmatch
import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchctl.export import wire
from benchctl.export.wire import Message, ToolDef
from benchctl.jsonio import iter_jsonl
from benchctl.layout import ARTIFACTS, GRADES, TRANSCRIPT, iter_runs, runs_dir
from benchctl.report.load import UNFINISHED, unfinished_meta
from benchctl.report.load import Run as Loaded

MAIN_PHASE = "main"  # the run itself, before its first follow-up

SYSTEM_KEYS = {"system", "instructions", "systemInstruction", "system_instruction"}
MAX_CONVERSATIONS = 256  # the gateway's recorder tracks 64 at a time; older ones are never extended
MAX_TOOL_NAMES = 4096


@dataclass(frozen=True)
class Config:
    """What one Inspect eval log groups: task × variant × harness × model × budget × tools."""

    task: str
    variant: str | None
    harness: str
    model: str
    budget: str
    tools: str | None

    @property
    def name(self) -> str:
        return " / ".join(p for p in (self.task, self.variant, self.harness, self.model, self.budget, self.tools) if p)


@dataclass
class Run:
    path: Path
    meta: dict[str, Any]
    grades: list[dict[str, Any]] = field(default_factory=list)  # every grade record of this run

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def spec(self) -> dict[str, Any]:
        return self.meta.get("spec") or {}

    @property
    def config(self) -> Config:
        m, s = self.meta, self.spec
        tools = m.get("tools") or s.get("tools") or (s.get("options") or {}).get("tools")
        return Config(
            str(m.get("task") or s.get("task") or "task"),
            m.get("variant") or s.get("variant"),
            str(m.get("harness") or s.get("harness") or "harness"),
            str(m.get("model") or s.get("model") or ""),
            str(m.get("budget") or s.get("budget") or ""),
            tools,
        )

    @property
    def finished(self) -> bool:
        """False for a run that never wrote meta.json, or whose meta.json says it is still running."""
        return self.meta.get("status") not in ("running", UNFINISHED)

    @property
    def seed(self) -> int:
        return int(self.meta.get("seed", self.spec.get("seed", 0)) or 0)

    def transcript(self) -> Path:
        return self.path / TRANSCRIPT

    def artifacts(self) -> list[tuple[str, Path]]:
        """(name, path) of each collected artifact, in meta.json's order; only regular files inside
        artifacts/ (collection never writes links, but a results dir may have been edited by hand)."""
        base = (self.path / ARTIFACTS).resolve()
        out = []
        for name in self.meta.get("artifacts") or []:
            p = (base / name).resolve()
            if p.is_relative_to(base) and p.is_file() and not (base / name).is_symlink():
                out.append((str(name), p))
        return out


def find_runs(results: Path, run_glob: str | None = None) -> tuple[list[Run], list[Run], list[tuple[str, str]]]:
    """The runs to export (finished or failed: meta.json written); the unfinished ones (no meta.json,
    or meta.json says running), whose configuration is derived as `benchctl report` derives it
    (the transcript's run_start spec, else a finished run of the same id but another seed, else the
    run id's parts); and the ones left out of the export with why (the unfinished among them)."""
    runs: list[Run] = []
    unfinished: list[Run] = []
    skipped: list[tuple[str, str]] = []
    base = runs_dir(results)
    if not base.is_dir():
        raise FileNotFoundError(f"{results} has no runs/ directory; pass the directory `benchctl run --out` wrote")
    metas = {p.name: meta for p, meta in iter_runs(results)}
    for p in sorted(q for q in base.iterdir() if q.is_dir()):
        if run_glob and not fnmatch.fnmatchcase(p.name, run_glob):
            continue
        meta = metas.get(p.name)
        if meta is None:
            skipped.append((p.name, "no meta.json (still running, or killed before it finished)"))
            unfinished.append(Run(p, {}))
        elif meta.get("status") == "running":
            skipped.append((p.name, "still running"))
            unfinished.append(Run(p, dict(meta)))
        else:
            runs.append(Run(p, dict(meta)))
    _attach_grades(results, runs)
    return runs, _derive(unfinished, runs), skipped


def _derive(unfinished: list[Run], finished: list[Run]) -> list[Run]:
    """Unfinished runs with a stand-in meta (status `unfinished` unless meta.json says `running`)
    made by the report's loader, so both agree on which configuration an unfinished run is of."""
    twins = {r.run_id.rpartition("__")[0]: Loaded(run_id=r.run_id, meta=r.meta) for r in finished}
    return [r if r.meta else Run(r.path, unfinished_meta(str(r.path), r.path.name, twins)) for r in unfinished]


def _attach_grades(results: Path, runs: list[Run]) -> None:
    by_id = {r.path.name: r for r in runs}
    gdir = Path(results) / GRADES
    if not gdir.is_dir():
        return
    for grader in sorted(d for d in gdir.iterdir() if d.is_dir()):
        for f in sorted(grader.glob("*.json")):
            run = by_id.get(f.stem.split("~", 1)[0])
            if run is None:
                continue
            try:
                rec = orjson.loads(f.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            if isinstance(rec, dict) and rec.get("grader"):
                run.grades.append(rec)


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """A transcript's events one line at a time; a torn or corrupt line is skipped (as readers of
    transcripts do everywhere in benchctl)."""
    if not path.exists():
        return
    yield from (ev for ev in iter_jsonl(path) if isinstance(ev, dict))


# ------------------------------------------------------------------------------- items


@dataclass
class ModelTurn:
    event: dict[str, Any]  # the model_call event without its request and response
    call_id: str
    conversation: str | None  # None: the request was not recorded
    base: str | None  # the call this one continues (same conversation), None: a new one
    keep: int  # messages of the base call's input kept before `new`
    new: list[Message]  # messages new in this request
    system: Message | None  # the conversation's system prompt (same object while unchanged)
    tools: list[ToolDef]  # tool definitions offered (same list while unchanged)
    config: dict[str, Any]  # sampling settings as the request carried them
    output: Message | None  # the response as recorded (None: no response)
    complete: bool = True  # False: the base request was not in this transcript
    # per message of `new`: True when it only restates the message the base request had at the
    # same position (clients re-send history in another shape, e.g. a string instead of a block)
    repeated: list[bool] = field(default_factory=list)

    @property
    def counts_tokens(self) -> bool:
        """A token-counting request forwarded upstream: part of the conversation, not a generation."""
        return self.event.get("wire_api") == "anthropic_count_tokens"

    @property
    def error(self) -> str | None:
        """Why the call failed or was cut short, when it did: its `outcome` (`error`, `timeout`,
        `cancelled`; absent in transcripts older than the field), an HTTP status >= 400, or an
        error message."""
        ev, status, outcome = self.event, self.event.get("status"), self.event.get("outcome")
        word = (
            outcome
            if outcome not in (None, "ok")
            else (f"status {status}" if isinstance(status, int) and status >= 400 else None)
        )
        if ev.get("error"):
            return f"{word}: {ev['error']}" if word else str(ev["error"])
        return word


@dataclass
class TargetTurn:
    event: dict[str, Any]  # target_call: role target|auxiliary, tool, model, request, text, usage, ...
    input: list[Message]
    output: Message | None


@dataclass
class ToolUse:
    call: dict[str, Any] | None  # tool_call event (None: a result whose call was not recorded)
    result: dict[str, Any] | None  # tool_result event (None: the run ended before it)


@dataclass
class Note:
    event: dict[str, Any]


Item = ModelTurn | TargetTurn | ToolUse | Note


class _Conversation:
    __slots__ = (
        "last_call",
        "counts",
        "total",
        "prints",
        "system",
        "tools",
        "config",
        "response",
        "response_at",
        "open_calls",
    )

    def __init__(self) -> None:
        self.last_call = ""
        self.counts = array("I")  # neutral messages per wire message of the last request
        self.total = 0  # sum(counts)
        self.prints = array("Q")  # a 64-bit fingerprint per neutral message of the last request
        self.system: Message | None = None
        self.tools: list[ToolDef] = []
        self.config: dict[str, Any] = {}
        self.response: Message | None = None
        self.response_at = 0  # where the next request holds `response` (its echo)
        # (id, name) of the latest assistant message's calls not answered yet: an answer that
        # names only its function (Gemini) is paired with the first of these of its name
        self.open_calls: list[tuple[str, str]] = []


class _Tracker:
    """Follows request deltas (benchctl.gateway.recording) conversation by conversation."""

    def __init__(self) -> None:
        self.convs: OrderedDict[str, _Conversation] = OrderedDict()
        # tool call id -> name, for results that do not name their tool (they follow their call
        # closely, so the latest few thousand calls are enough)
        self.tool_names: OrderedDict[str, str] = OrderedDict()

    def turn(self, ev: dict[str, Any]) -> ModelTurn:
        call_id = str(ev.get("call_id") or "")
        wire_api = str(ev.get("wire_api") or "")
        delta = ev.get("request")
        output = wire.response_message(ev.get("response"))
        light = {k: v for k, v in ev.items() if k not in ("request", "response")}
        if not isinstance(delta, dict):
            return ModelTurn(light, call_id, None, None, 0, [], None, [], {}, output, complete=False)
        conv_id = str(delta.get("conv") or call_id)
        base = delta.get("base")
        conv = self.convs.get(conv_id) if base else None
        complete = not base or (conv is not None and conv.last_call == base)
        if conv is None or not complete:
            conv = _Conversation()
        self.convs[conv_id] = conv
        self.convs.move_to_end(conv_id)
        if len(self.convs) > MAX_CONVERSATIONS:
            self.convs.popitem(last=False)

        changed, unset = delta.get("set") or {}, delta.get("unset") or []
        fresh = not base or not complete
        if fresh or (SYSTEM_KEYS & (set(changed) | set(unset))):
            conv.system = wire.system_prompt(wire_api, changed)
        if fresh or "tools" in changed or "tools" in unset:
            conv.tools = wire.tool_defs(wire_api, changed)
        conv.config = {k: v for k, v in conv.config.items() if k not in unset and not fresh}
        conv.config.update(wire.generate_config(changed))

        keep_wire = int(delta.get("keep") or 0) if complete else 0
        if keep_wire < len(conv.counts):  # history rewritten: drop what was not kept (rare: O(n))
            del conv.counts[keep_wire:]
            conv.total = sum(conv.counts)
        keep = conv.total
        new: list[Message] = []
        repeated: list[bool] = []
        if "append" in delta:
            per = self._convert(wire_api, delta.get("append") or [], conv)
            new = [m for ms in per for m in ms]
            _answer_reasoning(conv, new, keep)
            _pair(conv_id, conv, new, keep)
            prints = [_fingerprint(m) for m in new]
            old = conv.prints[keep:] if keep < len(conv.prints) else array("Q")
            repeated = [i < len(old) and old[i] == fp for i, fp in enumerate(prints)]
            del conv.prints[keep:]
            conv.prints.extend(prints)
            conv.counts.extend(len(ms) for ms in per)
            conv.total += len(new)
        self._name_tools(new)
        if output is not None:
            _pair(conv_id, conv, [output], conv.total)  # where the next request will hold it
            self._name_tools([output])
        conv.last_call, conv.response, conv.response_at = call_id, output, conv.total
        return ModelTurn(
            light,
            call_id,
            conv_id,
            base if complete else None,
            keep,
            new,
            conv.system,
            conv.tools,
            dict(conv.config),
            output,
            complete,
            repeated,
        )

    def _convert(self, wire_api: str, items: list[Any], conv: _Conversation) -> list[list[Message]]:
        """Wire messages to neutral ones; {"$response": id} stands for that call's recorded answer."""
        if not any(isinstance(m, dict) and "$response" in m for m in items):
            return wire.messages(wire_api, items)
        out: list[list[Message]] = []
        for m in items:
            if isinstance(m, dict) and "$response" in m:
                out.append([conv.response] if conv.response is not None else [])
            else:
                out.extend(wire.messages(wire_api, [m]))
        return out

    def _name_tools(self, messages: list[Message]) -> None:
        for m in messages:
            for c in m.tool_calls:
                self.tool_names[c.id] = c.name
                if len(self.tool_names) > MAX_TOOL_NAMES:
                    self.tool_names.popitem(last=False)
            if m.role == "tool" and m.tool_name is None and m.tool_call_id:
                m.tool_name = self.tool_names.get(m.tool_call_id)


def _pair(conv_id: str, conv: _Conversation, messages: list[Message], start: int) -> None:
    """Tool-call ids where the wire API leaves them out (Gemini: a call has an id only when the
    model gave one, and an answer may name only its function: it answers the preceding model
    turn's first unanswered call of that name). An id-less call is named after its place in the
    conversation, `<conversation>/<message>.<call>`, which is the same when the history is re-sent
    (so an answer's echo in the next request keeps its calls' ids); an id-less answer takes the id
    of the call it answers. `messages` sit at positions `start`, `start + 1`, ... of the conversation."""
    for n, m in enumerate(messages, start):
        if m.role == "assistant":
            for i, c in enumerate(m.tool_calls):
                if not c.id:
                    c.id = f"{conv_id}/{n}.{i}"
            conv.open_calls = [(c.id, c.name) for c in m.tool_calls]
        elif m.role == "tool":
            if not m.tool_call_id:
                match = next((c for c in conv.open_calls if m.tool_name in (None, c[1])), None)
                m.tool_call_id = match[0] if match else None
            conv.open_calls = [c for c in conv.open_calls if c[0] != m.tool_call_id]


def _answer_reasoning(conv: _Conversation, new: list[Message], keep: int) -> None:
    """The echo of the previous answer (the assistant message where the request holds it) gets the
    reasoning the gateway recorded with that answer, in place of what the client sent back: the
    model produced exactly that, and clients send back less (chat completions nothing at all; the
    bytes sent back stay in the request's record). An answer recorded with no reasoning (older
    transcripts) leaves the echo as sent."""
    answer, i = conv.response, conv.response_at - keep
    if answer is None or not 0 <= i < len(new) or new[i].role != "assistant" or new[i] is answer:
        return
    reasoning = [p for p in answer.parts if p.type == "reasoning"]
    if reasoning:
        new[i].parts = reasoning + [p for p in new[i].parts if p.type != "reasoning"]


def _fingerprint(m: Message) -> int:
    """What identifies a message's content (not its wire spelling), in 64 bits. Reasoning is left
    out: an answer's echo carries the reasoning recorded with the answer, whatever was re-sent."""
    data = orjson.dumps(
        [
            m.role,
            [(p.type, p.text, p.data) for p in m.parts if p.type != "reasoning"],
            [(c.id, c.name, c.arguments) for c in m.tool_calls],
            m.tool_call_id,
        ],
        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS,
    )
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def items(run: Run) -> Iterator[Item]:
    """The run's transcript as typed items, in transcript order (a `ToolUse` when its result arrives)."""
    tracker = _Tracker()
    pending: dict[str, dict[str, Any]] = {}
    for ev in read_events(run.transcript()):
        kind = ev.get("type")
        if kind == "model_call" and not ev.get("answered_by"):
            yield tracker.turn(ev)
        elif kind == "target_call":
            req = r if isinstance(r := ev.get("request"), dict) else {}
            msgs = m if isinstance(m := req.get("messages"), list) else []
            text = ev.get("text")
            yield TargetTurn(
                {k: v for k, v in ev.items() if k not in ("request", "text")},
                [m for ms in wire.messages("openai_chat", msgs) for m in ms],
                wire.response_message({"text": text}) if isinstance(text, str) else None,
            )
        elif kind == "tool_call" and ev.get("id") is not None:
            pending[str(ev["id"])] = ev
        elif kind == "tool_result":
            yield ToolUse(pending.pop(str(ev.get("id")), None), ev)
        else:
            yield Note(ev)
    for call in pending.values():
        yield ToolUse(call, None)


def phase_of(event: dict[str, Any]) -> str | None:
    """The phase a transcript event starts: `followup-N` for the N-th follow-up, else None."""
    if event.get("type") != "followup":
        return None
    index = event.get("index")
    return f"followup-{index}" if isinstance(index, int) else "followup"


def text_of(path: Path, limit: int | None = None) -> str | None:
    """An artifact's text (UTF-8), or None when it is binary."""
    with open(path, "rb") as f:
        data = f.read(limit) if limit else f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def safe_name(text: str) -> str:
    """A file name component from a run id or configuration (no separators, no leading dot)."""
    out = "".join(c if c.isalnum() or c in "._-" else "-" for c in text).strip("-.")
    return out[:180] or "x"
