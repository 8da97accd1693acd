"""`benchctl export --to atif`: one ATIF trajectory per run, built and validated with the `atif` models.

What maps to what (`OUT/<run_id>.json`):

- each model call → an agent step (the answer text, its reasoning — the visible texts in
  `reasoning_content`, every block with its summary / redacted flags and signature in
  `extra.benchctl_reasoning` —, its tool calls, the served model, metrics:
  prompt tokens = every input token incl. cache reads and writes, cached tokens, completion
  tokens, cost; benchctl's call record in `extra.benchctl`);
- system and user messages new in a request (the task prompt, reprompts, revision requests,
  follow-ups, hook context) → system / user steps, in conversation order;
- tool results the model then received → the observation of the agent step that called the tool
  (when the run ended before the model saw a result, the harness's own result is used and marked
  `seen_by_model: false`);
- assistant turns that a new conversation carries over (history a side call copied) → agent steps
  with `is_copied_context: true`;
- every other transcript event (notices, reprompts, fallbacks, refusals, hooks, CLI events,
  target model calls, unknown event types) → `extra.benchctl_events` of the step it belongs to
  (by call or tool id), else of the next step, else the root's `extra.benchctl.trailing_events`;
- the collected artifacts (the final report, predictions, ...) → final agent steps with
  `llm_call_count: 0` (no model call: the file the agent left), the file name in `extra`;
- run metadata and grades → root `extra.benchctl`; totals → `final_metrics` (cost null when unknown);
- phases: ATIF has no field for them (`continued_trajectory_ref` points to another file that
  continues a trajectory, not a phase within one session), so every step but the artifacts says
  in `extra.benchctl_phase` which phase it belongs to: `main`, then `followup-N` from the
  `followup` event on.

Streaming: steps are validated one by one (`atif.Step`) and written as they complete; only steps
still waiting for their tool results are held. Everything written passes through the transcript
redactor, so secrets already redacted stay redacted.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import IO, Any

import orjson
from atif import Agent, FinalMetrics, Metrics, Observation, ObservationResult, Step, ToolCall
from pydantic import BaseModel

from benchctl.export import events as ev
from benchctl.export.wire import Message, ToolDef
from benchctl.transcript import Redactor

SCHEMA_VERSION = "ATIF-v1.8"
MAX_PENDING_EVENTS = 1000  # benchctl events waiting for a step; beyond this they get a system step
MAX_HELD = 256  # steps held back behind one still waiting for its tool results


def export(runs: list[ev.Run], out: Path, unfinished: Sequence[ev.Run] = ()) -> list[Path]:
    """Write one trajectory per run into `out` (replacing an earlier export of the run). Unfinished
    runs get none: a trajectory is a finished run's."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for run in runs:
        dest = out / f"{ev.safe_name(run.run_id)}.json"
        tmp = dest.with_name(f".{dest.name}.tmp")
        try:
            with open(tmp, "wb") as f:
                _Writer(run, f).write()
            os.replace(tmp, dest)  # readers see the old trajectory or the new one
        finally:
            tmp.unlink(missing_ok=True)
        written.append(dest)
    return written


def _iso(t: Any) -> str | None:
    from datetime import datetime

    return datetime.fromtimestamp(float(t), UTC).isoformat() if isinstance(t, (int, float)) else None


def _dump(x: Any) -> bytes:
    if isinstance(x, BaseModel):
        return x.model_dump_json(exclude_none=True).encode()
    return orjson.dumps(x, option=orjson.OPT_NON_STR_KEYS)


class _Held:
    """A step not written yet: an agent step waiting for its tool results, or a step queued behind one."""

    __slots__ = ("fields", "open_calls", "results", "fallback", "events", "conversation")

    def __init__(self, fields: dict[str, Any], conversation: str | None = None) -> None:
        self.fields = fields
        self.open_calls: set[str] = {c.tool_call_id for c in fields.get("tool_calls") or []}
        self.results: list[ObservationResult] = []
        self.fallback: dict[str, dict[str, Any]] = {}  # tool id -> the harness's tool_result
        self.events: list[dict[str, Any]] = []
        self.conversation = conversation


class _Writer:
    def __init__(self, run: ev.Run, f: IO[bytes]) -> None:
        self.run, self.f = run, f
        self.redact = Redactor()
        self.queue: deque[_Held] = deque()
        self.by_call: dict[str, _Held] = {}  # model call id -> its held agent step
        self.by_tool: dict[str, _Held] = {}  # tool call id -> the held agent step that made it
        self.waiting: dict[str, _Held] = {}  # conversation -> its held agent step awaiting results
        self.pending_events: list[dict[str, Any]] = []
        self.running: _Held | None = None  # the latest agent step, while its tool calls are open
        self.n_steps = 0
        self.totals = {"prompt": 0, "completion": 0, "cached": 0}
        self.conv_calls: dict[str, int] = {}
        self.conv_tools: dict[str, list[ToolDef]] = {}
        self.conv_system: dict[str, Message] = {}
        self.phase = ev.MAIN_PHASE

    # --- writing ---
    def write(self) -> None:
        self.f.write(
            b'{"schema_version":'
            + _dump(SCHEMA_VERSION)
            + b',"session_id":'
            + _dump(self.run.run_id)
            + b',"trajectory_id":'
            + _dump(self.run.run_id)
            + b',"steps":['
        )
        for item in ev.items(self.run):
            if isinstance(item, ev.ModelTurn):
                self.model_turn(item)
            elif isinstance(item, ev.ToolUse):
                self.tool_use(item)
            elif isinstance(item, ev.TargetTurn):
                self.event(item.event, compact=True)
            else:
                self.event(item.event)
        for held in self.queue:
            held.open_calls.clear()
        self.flush()
        for name, path in self.run.artifacts():
            self.artifact(name, path)
        self.flush()
        self.f.write(b"]")
        tail = {
            "agent": self.agent(),
            "final_metrics": self.final_metrics(),
            "notes": self.notes(),
            "extra": self.extra(),
        }
        for k, v in tail.items():
            self.f.write(b"," + _dump(k) + b":" + self.redact(_dump(v)))
        self.f.write(b"}")

    def flush(self) -> None:
        """Write every step at the head of the queue that is complete (steps keep their order). A
        step whose conversation never came back (a side call left with open tool calls) is written
        once MAX_HELD steps queue behind it, so the queue stays bounded."""
        while self.queue and (not self.queue[0].open_calls or len(self.queue) > MAX_HELD):
            held = self.queue.popleft()
            for cid in [c.tool_call_id for c in held.fields.get("tool_calls") or []]:
                self.by_tool.pop(cid, None)
                if cid not in {r.source_call_id for r in held.results} and cid in held.fallback:
                    res = held.fallback[cid]
                    held.results.append(
                        ObservationResult(
                            source_call_id=cid,
                            content=str(res.get("output") or ""),
                            extra={"seen_by_model": False, "source": "harness"},
                        )
                    )
            self.by_call.pop(str((held.fields.get("extra") or {}).get("benchctl", {}).get("call_id")), None)
            if held.conversation and self.waiting.get(held.conversation) is held:
                del self.waiting[held.conversation]
            fields = dict(held.fields)
            if held.results:
                fields["observation"] = Observation(results=held.results)
            if held.events:
                fields["extra"] = {**(fields.get("extra") or {}), "benchctl_events": held.events}
            self.n_steps += 1
            step = Step(step_id=self.n_steps, **fields)  # validated by the atif model
            self.f.write(
                (b"," if self.n_steps > 1 else b"") + self.redact(step.model_dump_json(exclude_none=True).encode())
            )

    def add(self, fields: dict[str, Any], conversation: str | None = None, in_phase: bool = True) -> _Held:
        if in_phase:
            fields["extra"] = {**(fields.get("extra") or {}), "benchctl_phase": self.phase}
        held = _Held(fields, conversation)
        held.events, self.pending_events = self.pending_events, []
        self.queue.append(held)
        for cid in held.open_calls:
            self.by_tool[cid] = held
        return held

    # --- items ---
    def model_turn(self, turn: ev.ModelTurn) -> None:
        # steps are written one turn late, so that what follows a call (its tool results, a refusal,
        # a fallback, notices) can still join the step it belongs to
        self.flush()
        conv = turn.conversation
        if conv is not None:
            self.conv_calls[conv] = self.conv_calls.get(conv, 0) + (0 if turn.counts_tokens else 1)
            self.conv_tools[conv] = turn.tools
            previous = self.waiting.pop(conv, None)
            if turn.system is not None and self.conv_system.get(conv) is not turn.system:
                self.conv_system[conv] = turn.system  # a new or changed system prompt: a system step
                self.add(
                    {
                        "source": "system",
                        "message": _text(turn.system),
                        "timestamp": _iso(turn.event.get("t")),
                        "extra": {"conversation": conv},
                    }
                )
            for m, repeated in zip(turn.new, turn.repeated):
                if not repeated:  # history re-sent in another shape is not a new step
                    self.message(m, turn)
            if previous is not None:  # its results, if any, came with this request
                previous.open_calls.clear()
        if turn.counts_tokens:  # a token count: no agent turn, only an event
            self.event({k: v for k, v in turn.event.items() if k != "usage"} | {"kind": "count_tokens"})
        else:
            self.agent_step(turn)

    def message(self, m: Message, turn: ev.ModelTurn) -> None:
        when = _iso(turn.event.get("t"))
        extra = {"conversation": turn.conversation}
        if m.role == "tool":
            held = self.by_tool.get(m.tool_call_id or "")
            info = {"tool_name": m.tool_name, "is_error": True if m.is_error else None, "seen_by_model": True}
            result = ObservationResult(
                source_call_id=m.tool_call_id if held else None,
                content=_text(m),
                extra={k: v for k, v in info.items() if v is not None},
            )
            if held is not None:
                held.results.append(result)
                held.open_calls.discard(m.tool_call_id or "")
            else:  # a result whose call is not in this trajectory
                self.add(
                    {
                        "source": "system",
                        "message": "",
                        "timestamp": when,
                        "extra": extra,
                        "observation": Observation(results=[result]),
                    }
                )
        elif m.role == "assistant":
            if turn.base is None:  # history a new conversation carries over
                self.add(
                    {
                        "source": "agent",
                        "message": _text(m),
                        "timestamp": when,
                        "is_copied_context": True,
                        "tool_calls": _calls(m) or None,
                        "extra": extra,
                    }
                )
                self.queue[-1].open_calls.clear()
            # else: the echo of the previous answer, already an agent step
        else:
            self.add({"source": m.role, "message": _text(m), "timestamp": when, "extra": extra})

    def agent_step(self, turn: ev.ModelTurn) -> None:
        e = turn.event
        cost = e.get("cost_usd")
        metrics = None
        if isinstance(e.get("usage"), dict):  # no usage recorded: no metrics, not zeros
            u = e["usage"]
            i, r, w, o = (
                int(u.get(k) or 0)
                for k in ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
            )
            self.totals["prompt"] += i + r + w
            self.totals["completion"] += o
            self.totals["cached"] += r
            extra = {
                k: v
                for k, v in (
                    ("reasoning_tokens", u.get("reasoning_tokens")),
                    ("cache_write_tokens", w),
                    ("latency_ms", e.get("latency_ms")),
                    ("ttfb_ms", e.get("ttfb_ms")),
                )
                if v is not None
            }
            metrics = Metrics(
                prompt_tokens=i + r + w,
                completion_tokens=o,
                cached_tokens=r,
                cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
                extra=extra or None,
            )
        out = turn.output
        record = {k: v for k, v in e.items() if k not in ("v", "type", "source", "t", "usage", "headers")}
        record.update(conversation=turn.conversation, error=turn.error)
        reasoning = [p for p in out.parts if p.type == "reasoning"] if out else []
        step_extra: dict[str, Any] = {"benchctl": {k: v for k, v in record.items() if v is not None}}
        if reasoning:
            step_extra["benchctl_reasoning"] = [p.record() for p in reasoning]
        held = self.add(
            {
                "source": "agent",
                "message": _text(out) if out else "",
                "timestamp": _iso(e.get("t")),
                "model_name": str(e.get("served_model") or e.get("requested_model") or "") or None,
                "reasoning_content": "\n\n".join(p.text for p in reasoning if p.text) or None,
                "tool_calls": _calls(out) or None if out else None,
                "metrics": metrics,
                "llm_call_count": 1,
                "extra": step_extra,
            },
            turn.conversation,
        )
        self.by_call[turn.call_id] = held
        self.running = held if held.open_calls else None
        if held.open_calls and turn.conversation is not None:
            self.waiting[turn.conversation] = held

    def tool_use(self, use: ev.ToolUse) -> None:
        result = use.result
        tid = str((use.call or result or {}).get("id"))
        held = self.by_tool.get(tid)
        if held is not None and result is not None:
            held.fallback[tid] = result  # used only if the model never sees the result
        self.event(
            {k: v for k, v in (result or use.call or {}).items() if k != "output"}
            | {"type": "tool_result" if result else "tool_call", "result_recorded": result is not None},
            tool_id=tid,
        )

    def event(self, e: dict[str, Any], compact: bool = False, tool_id: str | None = None) -> None:
        self.phase = ev.phase_of(e) or self.phase
        rec = {k: v for k, v in e.items() if k not in ("v", "request", "text" if compact else "")}
        held = self.by_call.get(str(e.get("call_id"))) if e.get("call_id") else None
        held = held or self.by_tool.get(str(tool_id or e.get("tool_id") or ""))
        if held is None and self.running is not None and self.running.open_calls:
            held = self.running  # while the agent's tools run (e.g. target model calls)
        if held is not None:
            held.events.append(rec)
            return
        self.pending_events.append(rec)
        if len(self.pending_events) >= MAX_PENDING_EVENTS:
            self.add({"source": "system", "message": "", "timestamp": _iso(e.get("t"))})
            self.flush()

    def artifact(self, name: str, path: Path) -> None:
        text = ev.text_of(path)
        data = path.read_bytes()
        info = {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "binary": text is None}
        self.add(
            {
                "source": "agent",
                "message": text or "",
                "llm_call_count": 0,
                "timestamp": _iso(self.run.meta.get("ended_at")),
                "extra": {"benchctl_artifact": info},
            },
            in_phase=False,
        )  # a file the run left; its name says the phase (name.followup-N.ext)

    # --- the root ---
    def agent(self) -> Agent:
        m = self.run.meta
        versions = m.get("tool_versions") or {}
        harness = str(m.get("harness") or "")
        main = max(self.conv_calls, key=lambda c: self.conv_calls[c], default=None)
        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in self.conv_tools.get(main or "", [])
        ]
        return Agent(
            name=harness or "benchctl",
            version=str(versions.get(harness) or m.get("benchctl_version") or ""),
            model_name=str(m.get("model") or "") or None,
            tool_definitions=tools or None,
            extra={
                "benchctl_version": m.get("benchctl_version"),
                "tool_versions": versions,
                "options": (m.get("spec") or {}).get("options"),
            },
        )

    def final_metrics(self) -> FinalMetrics:
        cost = self.run.meta.get("cost_usd")
        return FinalMetrics(
            total_prompt_tokens=self.totals["prompt"],
            total_completion_tokens=self.totals["completion"],
            total_cached_tokens=self.totals["cached"],
            total_cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
            total_steps=self.n_steps,
            extra={"usage": self.run.meta.get("usage"), "target_tools": self.run.meta.get("target_tools")},
        )

    def notes(self) -> str:
        return (
            "Exported by benchctl from the run's transcript. Agent steps are the model calls the gateway "
            "recorded (what the model was sent and answered); final steps with llm_call_count 0 are the "
            "files the agent left (artifacts). benchctl's own events are in extra.benchctl_events."
        )

    def extra(self) -> dict[str, Any]:
        grades = [
            {
                k: g.get(k)
                for k in (
                    "grader",
                    "artifact",
                    "artifact_tag",
                    "judge",
                    "status",
                    "score",
                    "raw_score",
                    "n_items",
                    "n_unscored",
                    "cost_usd",
                )
            }
            for g in self.run.grades
        ]
        meta = {k: v for k, v in self.run.meta.items() if k != "schema"}
        return {"benchctl": {**meta, "grades": grades, "trailing_events": self.pending_events}}


def _text(m: Message | None) -> str:
    if m is None:
        return ""
    chunks = []
    for p in m.parts:
        if p.type == "text":
            chunks.append(p.text)
        elif p.type == "data":
            chunks.append(orjson.dumps(p.data).decode())
    return "\n".join(chunks)


def _calls(m: Message | None) -> list[ToolCall]:
    if m is None:
        return []
    return [
        ToolCall(
            tool_call_id=c.id,
            function_name=c.name,
            arguments=c.arguments,
            extra={"free_form_input": True} if c.raw is not None else None,
        )
        for c in m.tool_calls
    ]
