"""One run streamed into an Inspect sample (for `benchctl.export.inspect`).

The sample member of the log's zip is written piece by piece, the way inspect-ai's own recovery
writer streams samples: events as the run's items arrive, then the message pool, the main
conversation, the attachments and the sample's small fields (inspect's reader does not care about
key order). The pool and the attachments spill to temporary files, so a run's transcript is never
held in memory; only small per-message bookkeeping is. Everything written passes through the
transcript redactor, so secrets already redacted stay redacted.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import tempfile
from array import array
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from inspect_ai._util.json import to_json_safe
from inspect_ai.event import InfoEvent, ModelEvent, SpanBeginEvent, SpanEndEvent, ToolEvent
from inspect_ai.log import EvalSample, EvalSampleLimit
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentData,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
    StopReason,
)
from inspect_ai.model._model_output import ModelFallback
from inspect_ai.tool import ToolCall, ToolCallError, ToolFunction, ToolInfo, ToolParams

from benchctl.export import events as ev
from benchctl.export import wire
from benchctl.export.wire import Message, Part, ToolDef
from benchctl.transcript import Redactor

ATTACHMENT_MIN = 2000  # message texts, info data and tool descriptions this long are stored once
_POLICY_TEXT = {"notice", "reprompt", "revision_request", "followup"}  # info data: the text the agent got
_SKIP = {"assistant"}  # harness echoes of model output: the ModelEvents carry it
_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop": "stop",
    "completed": "stop",
    "stop_sequence": "stop",
    "STOP": "stop",
    "tool_use": "tool_calls",
    "tool_calls": "tool_calls",
    "max_tokens": "max_tokens",
    "length": "max_tokens",
    "max_output_tokens": "max_tokens",
    "MAX_TOKENS": "max_tokens",
    "refusal": "content_filter",
    "content_filter": "content_filter",
    "SAFETY": "content_filter",
    "model_context_window_exceeded": "model_length",
}


def _dt(t: Any) -> datetime:
    return datetime.fromtimestamp(float(t) if isinstance(t, (int, float)) else 0.0, UTC)


def short_hash(*parts: Any) -> str:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()[:22]


def as_int(x: Any) -> int | None:
    return int(x) if isinstance(x, (int, float)) else None


# ------------------------------------------------------------------------------- usage


class Usage:
    """Usage and cost summed per served model and per role; a cost is None once any call's was."""

    def __init__(self) -> None:
        self.by_model: dict[str, ModelUsage] = {}
        self.by_role: dict[str, ModelUsage] = {}

    def add(self, model: str, usage: ModelUsage | None, role: str | None = None) -> None:
        if usage is not None:
            _accumulate(self.by_model, model, usage)
            if role is not None:
                _accumulate(self.by_role, role, usage)

    def merge(self, other: Usage) -> None:
        for k, u in other.by_model.items():
            _accumulate(self.by_model, k, u)
        for k, u in other.by_role.items():
            _accumulate(self.by_role, k, u)


def _accumulate(table: dict[str, ModelUsage], key: str, usage: ModelUsage) -> None:
    cur = table.get(key)
    table[key] = usage.model_copy() if cur is None else _sum(cur, usage)


def _sum(a: ModelUsage, b: ModelUsage) -> ModelUsage:
    cost = None if a.total_cost is None or b.total_cost is None else a.total_cost + b.total_cost
    return ModelUsage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        total_tokens=a.total_tokens + b.total_tokens,
        input_tokens_cache_read=(a.input_tokens_cache_read or 0) + (b.input_tokens_cache_read or 0),
        input_tokens_cache_write=(a.input_tokens_cache_write or 0) + (b.input_tokens_cache_write or 0),
        reasoning_tokens=(a.reasoning_tokens or 0) + (b.reasoning_tokens or 0),
        total_cost=cost,
    )


def usage_of(u: Any, cost: Any) -> ModelUsage | None:
    """benchctl usage (input_tokens = not read from cache) in Inspect's terms; total counts every
    input token (uncached, cache read, cache write) plus output. None when no usage was recorded."""
    if not isinstance(u, dict):
        return None
    i, r, w, o = (
        int(u.get(k) or 0) for k in ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
    )
    return ModelUsage(
        input_tokens=i,
        output_tokens=o,
        total_tokens=i + r + w + o,
        input_tokens_cache_read=r,
        input_tokens_cache_write=w,
        reasoning_tokens=int(u.get("reasoning_tokens") or 0),
        total_cost=float(cost) if isinstance(cost, (int, float)) else None,
    )


# ------------------------------------------------------------------------------- spill files


class _Spill:
    """A temporary file of JSON pieces written once and copied into the log at the end."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile()
        self.starts = array("q")  # 8 bytes per piece: where it starts; it ends where the next starts
        self.end = 0

    def __len__(self) -> int:
        return len(self.starts)

    def add(self, data: bytes) -> int:
        self.file.seek(self.end)
        self.file.write(data)
        self.starts.append(self.end)
        self.end += len(data)
        return len(self.starts) - 1

    def get(self, index: int) -> bytes:
        start = self.starts[index]
        stop = self.starts[index + 1] if index + 1 < len(self.starts) else self.end
        self.file.seek(start)
        return self.file.read(stop - start)

    def copy_to(self, stream: IO[bytes], sep: bytes = b",") -> None:
        for i in range(len(self.starts)):
            if i:
                stream.write(sep)
            stream.write(self.get(i))

    def close(self) -> None:
        self.file.close()


class _Attachments:
    """Long strings stored once under `attachment://<key>`, as inspect-ai condenses samples. Keys are
    keyed hashes with a secret made per export: an agent that writes `attachment://...` into its
    output cannot name a key that exists, so neither inspect's reader nor its viewer (which resolve
    such references) can be made to show anything but the agent's literal text."""

    def __init__(self, redact: Redactor, salt: bytes) -> None:
        self.spill = _Spill()
        self.keys: set[str] = set()
        self.redact, self.salt = redact, salt

    def __call__(self, text: str) -> str:
        if len(text) < ATTACHMENT_MIN:
            return text
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=self.salt, digest_size=16).hexdigest()
        if key not in self.keys:
            self.keys.add(key)
            self.spill.add(self.redact(json.dumps(key).encode() + b":" + to_json_safe(text, indent=None)))
        return f"attachment://{key}"

    def value(self, x: Any) -> Any:
        """Every string inside a JSON value (tool arguments, event data) through `self`."""
        if isinstance(x, str):
            return self(x)
        if isinstance(x, dict):
            return {str(k): self.value(v) for k, v in x.items()}
        if isinstance(x, list):
            return [self.value(v) for v in x]
        return x


# ------------------------------------------------------------------------------- one sample


class SampleWriter:
    """Streams one run into its sample member: events first, then the message pool, the messages,
    the attachments and the sample's small fields (inspect's reader does not care about key order)."""

    def __init__(self, run: ev.Run, stream: IO[bytes], redact: Redactor) -> None:
        self.run, self.stream, self.redact = run, stream, redact
        self.att = _Attachments(redact, secrets.token_bytes(16))
        self.pool = _Spill()
        self.n_events = 0
        self.run_key = short_hash(run.run_id)
        self.t0 = float(run.meta.get("started_at") or 0.0)
        self.run_model = str(run.meta.get("model") or "")
        self.fallback_models = {str(f.get("to")) for f in run.meta.get("fallbacks") or []}
        # per conversation: pool indices of its latest input (system prompt apart), calls, first
        # user text, latest output; all small (indices, not messages)
        self.conv_system: dict[str, int | None] = {}
        self.conv_messages: dict[str, list[list[int]]] = {}  # as [start, end) runs of pool indices
        self.conv_calls: dict[str, int] = defaultdict(int)
        self.conv_first_user: dict[str, str] = {}
        self.conv_output: dict[str, ModelOutput] = {}
        self.systems: dict[int, tuple[Message, int]] = {}  # id(system prompt) -> (it, pool index)
        self.tool_infos: tuple[list[ToolDef] | None, list[ToolInfo]] = (None, [])
        self.usage = Usage()
        self.token_budget: Any = None
        self.token_limit: EvalSampleLimit | None = None
        self.span: str | None = None  # the phase's span, while one is open
        self.last_t = self.t0  # the latest event time seen (a phase ends there at the latest)

    # --- messages ---
    def _content(self, m: Message) -> str | list[Any]:
        parts: list[Any] = []
        for p in m.parts:
            if p.type == "text":
                parts.append(ContentText(text=self.att(p.text)))
            elif p.type == "reasoning":
                parts.append(self._reasoning(p))
            else:
                parts.append(ContentData(data=self.att.value(p.data or {})))
        if len(parts) == 1 and isinstance(parts[0], ContentText):
            return parts[0].text
        return parts

    def _reasoning(self, p: Part) -> ContentReasoning:
        """A reasoning block as Inspect's own providers write one: a summary of hidden reasoning in
        `summary` (with `reasoning` empty, so the viewer titles it "Reasoning (Summary)"), withheld
        reasoning as `redacted` with no text (the viewer says it was encrypted by the provider),
        the vendor's opaque string as `signature`. Only `reasoning` may be an attachment (inspect-ai
        resolves no other field of it)."""
        return ContentReasoning(
            reasoning="" if p.summary else self.att(p.text),
            summary=p.text if p.summary else None,
            signature=p.signature,
            redacted=p.redacted,
        )

    def _message(self, m: Message, mid: str, model: str | None = None) -> ChatMessage:
        if m.role not in ("system", "user", "tool"):
            return self._assistant(m, mid, model)
        content = self._content(m)
        if m.role == "system":
            return ChatMessageSystem(id=mid, content=content)
        if m.role == "user":
            return ChatMessageUser(id=mid, content=content)
        err = ToolCallError("unknown", m.text[:2000]) if m.is_error else None  # a tool result
        return ChatMessageTool(id=mid, content=content, tool_call_id=m.tool_call_id, function=m.tool_name, error=err)

    def _assistant(self, m: Message, mid: str, model: str | None = None) -> ChatMessageAssistant:
        """An assistant message; a model's output always is one (wire.response_message)."""
        content = self._content(m)
        calls = [
            ToolCall(
                id=c.id, function=c.name, arguments=c.arguments, type="custom" if c.raw is not None else "function"
            )
            for c in m.tool_calls
        ]
        return ChatMessageAssistant(id=mid, content=content, tool_calls=calls or None, model=model)

    def _pool_add(self, m: Message | ChatMessage) -> int:
        msg = m if not isinstance(m, Message) else self._message(m, f"{self.run_key}-m{len(self.pool)}")
        return self.pool.add(self.redact(to_json_safe(msg, indent=None)))

    def _system_index(self, system: Message) -> int:
        # keyed by object identity (the tracker hands out the same object while the prompt is
        # unchanged); the object is held here so its id cannot be reused for another one
        hit = self.systems.get(id(system))
        if hit is None:
            if len(self.systems) > 16:
                self.systems.clear()
            hit = self.systems[id(system)] = (system, self._pool_add(system))
        return hit[1]

    # --- events ---
    def _emit(self, event: Any) -> None:
        if self.n_events:
            self.stream.write(b",")
        self.stream.write(self.redact(to_json_safe(event, indent=None)))
        self.n_events += 1

    def _base(self, t: Any, start: float | None = None) -> dict[str, Any]:
        when = start if start is not None else (float(t) if isinstance(t, (int, float)) else self.t0)
        if isinstance(t, (int, float)):
            self.last_t = max(self.last_t, float(t))
        return {
            "uuid": f"{self.run_key}-e{self.n_events}",
            "span_id": self.span,
            "timestamp": _dt(when),
            "working_start": max(0.0, when - self.t0),
        }

    # --- phases ---
    def phase(self, name: str, t: Any = None) -> None:
        """Start a phase (the run itself, `main`, or a follow-up, `followup-N`): the current phase's
        span ends and `name`'s begins; every event until the next phase or the end of the
        transcript is inside it. A solver span, as Inspect opens one around each step of a task's
        plan (`inspect view` shows each as its own section and in its outline), not an agent span:
        the viewer shows those as sub-agents, which the phases are not (one agent, one session)."""
        self.end_phase(t)
        self.span = f"{self.run_key}-{name}"
        self._emit(SpanBeginEvent(**self._base(t), id=self.span, parent_id=None, type="solver", name=name))

    def end_phase(self, t: Any = None) -> None:
        if self.span is not None:
            self._emit(SpanEndEvent(**self._base(t if t is not None else self.last_t), id=self.span))
            self.span = None

    def _tools(self, tools: list[ToolDef]) -> list[ToolInfo]:
        if self.tool_infos[0] is not tools:  # tool lists change rarely: convert when they do
            infos = []
            for t in tools:
                try:
                    params = ToolParams.model_validate(t.parameters) if t.parameters else ToolParams()
                except ValueError:  # a schema Inspect cannot express: the tool is still listed
                    params = ToolParams()
                infos.append(ToolInfo(name=t.name, description=self.att(t.description), parameters=params))
            self.tool_infos = (tools, infos)
        return self.tool_infos[1]

    def model_turn(self, turn: ev.ModelTurn) -> None:
        e = turn.event
        refs = None
        conv = turn.conversation
        if conv is not None:
            system = self._system_index(turn.system) if turn.system is not None else None
            messages = _truncate(self.conv_messages.get(conv, []), turn.keep) if turn.base else []
            for m in turn.new:
                _append(messages, self._pool_add(m))
            self.conv_system[conv], self.conv_messages[conv] = system, messages
            self.conv_calls[conv] += 0 if turn.counts_tokens else 1
            if conv not in self.conv_first_user:
                first = next((m.text for m in turn.new if m.role == "user" and m.text), None)
                if first is not None:
                    self.conv_first_user[conv] = first
            refs = [(system, system + 1)] if system is not None else []
            refs += [(a, b) for a, b in messages]
        if turn.counts_tokens:  # the conversation moved on (tracked above); nothing was generated
            self.note({k: v for k, v in e.items() if k not in ("usage",)} | {"kind": "count_tokens"})
            return
        served = str(e.get("served_model") or e.get("requested_model") or "")
        latency = float(e["latency_ms"]) / 1000 if isinstance(e.get("latency_ms"), (int, float)) else None
        end = float(e.get("t") or self.t0)
        usage = usage_of(e.get("usage"), e.get("cost_usd"))
        out_msg = self._assistant(turn.output, f"{self.run_key}-{turn.call_id}-out", served) if turn.output else None
        fallback = (
            ModelFallback(model=self.run_model, fallback_model=served)
            if served != self.run_model and served in self.fallback_models
            else None
        )
        output = ModelOutput(
            model=served,
            choices=[ChatCompletionChoice(message=out_msg, stop_reason=_STOP.get(str(e.get("stop_reason")), "unknown"))]
            if out_msg
            else [],
            usage=usage,
            time=latency,
            error=turn.error,
            fallback=fallback,
        )
        self.usage.add(served, usage)
        cfg = turn.config
        config = GenerateConfig(
            max_tokens=as_int(
                cfg.get("max_tokens") or cfg.get("max_output_tokens") or cfg.get("max_completion_tokens")
            ),
            temperature=num(cfg.get("temperature")),
            top_p=num(cfg.get("top_p")),
        )
        retries = e.get("retries")
        meta = {k: v for k, v in e.items() if k not in ("v", "type", "source", "t", "headers")}
        meta.update(conversation=conv, request_recorded=turn.complete, generate=cfg or None)
        self._emit(
            ModelEvent(
                **self._base(end, end - latency if latency is not None else None),
                model=served,
                requested_model=e.get("requested_model"),
                input=[],
                input_refs=refs,
                tools=self._tools(turn.tools),
                tool_choice=_tool_choice(cfg.get("tool_choice")),
                config=config,
                output=output,
                error=turn.error,
                retries=(len(retries) - 1) if isinstance(retries, list) and retries else None,
                completed=_dt(end),
                working_time=latency,
                metadata={"benchctl": meta},
            )
        )
        if conv is not None:
            self.conv_output[conv] = output

    def target_turn(self, turn: ev.TargetTurn) -> None:
        e = turn.event
        model = str(e.get("model") or e.get("served_model") or "")
        latency = num(e.get("latency_s"))
        end = float(e.get("t") or self.t0)
        role = str(e.get("role") or "target")
        usage = usage_of(e.get("usage"), e.get("cost_usd"))
        self.usage.add(model, usage, role=role)
        key = f"{self.run_key}-e{self.n_events}"
        out = self._assistant(turn.output, f"{key}-out", model) if turn.output else None
        error = str(e["error"]) if e.get("error") else None
        output = ModelOutput(
            model=model,
            choices=[ChatCompletionChoice(message=out, stop_reason=_STOP.get(str(e.get("stop_reason")), "unknown"))]
            if out
            else [],
            usage=usage,
            time=latency,
            error=error,
        )
        inputs = [self._message(m, f"{key}-in{i}") for i, m in enumerate(turn.input)]
        meta = {k: v for k, v in e.items() if k not in ("v", "type", "t")}
        self._emit(
            ModelEvent(
                **self._base(end, end - latency if latency else None),
                model=model,
                role=role,
                input=inputs,
                tools=[],
                tool_choice="none",
                config=GenerateConfig(),
                output=output,
                error=error,
                completed=_dt(end),
                working_time=latency,
                metadata={"benchctl": meta},
            )
        )

    def tool_use(self, use: ev.ToolUse) -> None:
        call, result = use.call or {}, use.result or {}
        args = call.get("input")
        arguments = args if isinstance(args, dict) else ({} if args is None else {"input": args})
        output = result.get("output")
        text = output if isinstance(output, str) else ("" if output is None else json.dumps(output))
        error = None
        if result.get("timed_out"):
            error = ToolCallError("timeout", text[:2000])
        elif result.get("is_error"):
            error = ToolCallError("unknown", text[:2000])
        start = num(call.get("t")) if call else num(result.get("t"))
        end = num(result.get("t"))
        meta = {k: v for k, v in result.items() if k not in ("v", "type", "t", "output", "id", "name")}
        meta["result_recorded"] = use.result is not None
        self._emit(
            ToolEvent(
                **self._base(start),
                id=str(call.get("id") or result.get("id") or ""),
                function=str(call.get("name") or result.get("name") or ""),
                arguments=arguments,
                result=text,
                error=error,
                completed=_dt(end) if end is not None else None,
                working_time=(end - start) if end is not None and start is not None else None,
                metadata={"benchctl": meta},
            )
        )

    def note(self, e: dict[str, Any]) -> None:
        kind = str(e.get("type"))
        if kind in _SKIP:
            return
        if kind == "harness_event" and e.get("kind") == "target_tools":
            self.token_budget = e.get("token_budget")
        if kind == "notice" and e.get("kind") == "token_deadline" and isinstance(self.token_budget, (int, float)):
            self.token_limit = EvalSampleLimit(
                type="token", limit=float(self.token_budget), reason=str(e.get("text") or "")
            )
        phase = ev.phase_of(e)
        if phase is not None:
            self.phase(phase, e.get("t"))
        label = " ".join(str(x) for x in ("benchctl", kind, e.get("kind")) if x)
        text = e.get("text") if kind != "followup" else e.get("prompt")
        if kind in _POLICY_TEXT and isinstance(text, str):
            data: Any = self.att(text)
        else:
            data = self.att.value({k: v for k, v in e.items() if k not in ("v", "t", "type")})
        self._emit(InfoEvent(**self._base(e.get("t")), source=label, data=data))

    def artifact(self, name: str, path: Path) -> None:
        text = ev.text_of(path)
        data: Any = (
            self.att(text) if text is not None else {"artifact": name, "binary": True, "bytes": path.stat().st_size}
        )
        self._emit(
            InfoEvent(**self._base(self.run.meta.get("ended_at")), source=f"benchctl artifact {name}", data=data)
        )

    # --- the end ---
    def finish(self, shell: EvalSample) -> tuple[EvalSample, int]:
        """Write the pool, the main conversation (the one with the most model calls: the agent's
        own, not side calls), the attachments and the small fields; returns the sample without its
        big fields and its message count."""
        main = max(self.conv_calls, key=lambda c: (self.conv_calls[c], c in self.conv_first_user), default=None)
        output = self.conv_output.get(main or "") or ModelOutput()
        system = self.conv_system.get(main or "")
        indices = ([] if system is None else [system]) + [
            i for a, b in self.conv_messages.get(main or "", []) for i in range(a, b)
        ]
        if output.choices and output.choices[0].message is not None:
            indices.append(self._pool_add(output.choices[0].message))
        s = self.stream
        s.write(b'],"events_data":{"messages":[')
        self.pool.copy_to(s)
        s.write(b'],"calls":[]},"messages":[')
        for i, idx in enumerate(indices):
            s.write(b"," if i else b"")
            s.write(self.pool.get(idx))
        s.write(b'],"attachments":{')
        self.att.spill.copy_to(s)
        s.write(b"}")
        update: dict[str, Any] = {
            "output": output,
            "input": self.conv_first_user.get(main or "", ""),
            "model_usage": self.usage.by_model,
            "role_usage": self.usage.by_role,
        }
        if self.token_limit is not None and shell.limit is not None:
            update["limit"] = self.token_limit  # the run timed out because its token budget ran out
        small = shell.model_copy(update=update)
        fields = small.model_dump(
            mode="json", exclude_none=True, exclude={"events", "events_data", "attachments", "messages"}
        )
        for k, v in fields.items():
            s.write(b"," + json.dumps(k).encode() + b":" + self.redact(to_json_safe(v, indent=None)))
        s.write(b"}")
        self.pool.close()
        self.att.spill.close()
        return small, len(indices)


def _tool_choice(value: Any) -> Any:
    kind, name = wire.tool_choice(value)
    return ToolFunction(name=name) if kind == "tool" and name else kind


def num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _append(runs: list[list[int]], index: int) -> None:
    """Add a pool index to a conversation held as [start, end) runs (the pool grows in order, so a
    conversation is usually one run: O(1) per message)."""
    if runs and runs[-1][1] == index:
        runs[-1][1] += 1
    else:
        runs.append([index, index + 1])


def _truncate(runs: list[list[int]], keep: int) -> list[list[int]]:
    """The first `keep` messages of a conversation held as runs."""
    out: list[list[int]] = []
    for a, b in runs:
        if keep <= 0:
            break
        out.append([a, min(b, a + keep)])
        keep -= b - a
    return out
