"""What the model received as each tool call's result, read from the gateway's record.

A CLI's own stream does not always say what it sent the model: Codex's `aggregated_output`
keeps only the last burst of a command's output while its `function_call_output` holds all of
it (behind a header: chunk id, wall time, exit code, token count); Claude Code appends hook
context to a tool result for the model names it knows; and Codex answers a call it cannot run
("unsupported call: X") with no stream event at all. The truth is the CLI's next model request,
which the gateway records in its `model_call` event (`request`, see
benchctl/gateway/recording.py). So for the CLI harnesses a `tool_result` is written from there:

- the stream parser reports each tool to the join (`started`, `finished`) instead of writing a
  `tool_result`;
- the join, a transcript listener, reads the tool outputs out of every recorded request, pairs
  each with its stream tool (Claude Code: by the model's call id; Codex: by the kind of item
  that reports the call and its command / MCP tool, `CodexRules`) and writes the `tool_result`
  with `output` = exactly what the model received (`received: true`), right after the
  `model_call` that carried it;
- a tool whose output never reached a request before the phase ended (the CLI was stopped)
  gets its `tool_result` from the CLI's own report (`received: false`) when the phase ends (once
  the gateway has recorded the calls in flight as the CLI exited: cli_harness.py); a
  tool the model got output from while it still ran (Codex yields long commands) gets that output;
- an output no stream event accounts for (Codex: rejected calls, tool searches) gets a
  `tool_call` and a `tool_result` of its own, built from the model's call as the gateway
  recorded it (`cli_reported: false`).

A call the CLI refused to run — a tool it does not have, or input it could not parse — is
marked `rejected` on its `tool_result`, and a `warning` event says so (the runner lists
warnings in meta.json, the report shows them).
"""

from __future__ import annotations

import re
import shlex
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

from benchctl.gateway.wire import find
from benchctl.transcript import TranscriptWriter

MAX_TEXT = 200_000  # characters of a tool result the transcript keeps (the model got it whole)
MAX_RAW = 4_000  # of a CLI event passed through as a harness_event (the raw stream is on disk whole)


def clip(text: str, limit: int = MAX_TEXT) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def small_json(value: Any) -> Any:
    """`value` itself when its JSON has at most MAX_RAW bytes, else the first MAX_RAW bytes of
    that JSON as text (what both CLI stream parsers keep of an event they pass through)."""
    raw = orjson.dumps(value)
    return value if len(raw) <= MAX_RAW else raw[:MAX_RAW].decode("utf-8", "replace")


def output_text(value: Any) -> str:
    """A tool output as text: a string as it is; a list of content parts (Anthropic blocks,
    Responses output items) as its text parts joined by newlines, any other part as `[type]`."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return "" if value is None else str(value)


@dataclass
class Received:
    """One tool output found in a recorded model request."""

    call_id: str
    output: str
    call: dict[str, Any]  # the model's call: name, input, namespace (as the gateway recorded it)
    fields: dict[str, Any] = field(default_factory=dict)


def received_outputs(event: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(call id, output text, extra fields) of every tool output that is new in a `model_call`'s
    request, read by its wire module; `is_error` when the wire API can say so."""
    items = (event.get("request") or {}).get("append") or []
    spoken = find(str(event.get("wire_api") or ""))
    if spoken is None:
        return []
    out: list[tuple[str, str, dict[str, Any]]] = []
    for m in (m for ms in spoken.read_items(items) for m in ms):
        if m.role == "tool" and m.tool_call_id:
            out.append((m.tool_call_id, m.output, {"is_error": m.is_error} if spoken.tool_errors else {}))
    return out


@dataclass
class StreamTool:
    """A tool call as the CLI's stream reports it, from its start until its tool_result is written."""

    id: str  # the stream's id (Claude Code: the model's call id; Codex: item id)
    name: str
    kind: str = ""  # Codex: the item type; Claude Code: ""
    key: str = ""  # Codex: the command, or the MCP tool name
    done: bool = False  # the stream reported it finished
    cli_output: str = ""  # what the CLI's own event said the tool returned
    fields: dict[str, Any] = field(default_factory=dict)  # exit_code, is_error, status, interrupted, ...
    got: Received | None = None  # its output as the model received it, once seen


class CliRules:
    """How one CLI's stream tools pair with the model's calls, and how it words a rejected call."""

    REJECTIONS: tuple[tuple[re.Pattern[str], str], ...] = ()

    def expects_item(self, call: dict[str, Any]) -> bool:
        """Whether the stream reports this call (else its output is written on its own at once)."""
        return True

    def pair(self, call_id: str, call: dict[str, Any], tool: StreamTool) -> bool:
        return tool.id == call_id

    def rejection(self, output: str) -> str | None:
        for pattern, reason in self.REJECTIONS:
            if pattern.match(output):
                return reason
        return None


class ClaudeRules(CliRules):
    # Claude Code 2.1.332: its stream and the request both carry these as the tool_result (CLI_FACTS.md)
    REJECTIONS = (
        (re.compile(r"<tool_use_error>Error: No such tool available"), "unknown_tool"),
        (re.compile(r"<tool_use_error>InputValidationError"), "invalid_input"),
    )


# Codex call name -> the stream item type that reports it; MCP calls (namespaced or mcp__*) -> mcp_tool_call.
# Other calls (update_plan, write_stdin, tool_search, ...) have no item of their own (verified with 0.147:
# update_plan only updates one todo_list item per turn).
_CODEX_ITEMS = {"exec_command": "command_execution", "apply_patch": "file_change"}


class CodexRules(CliRules):
    # Codex 0.147: answered to the model as the call's output, with no stream item (CLI_FACTS.md)
    REJECTIONS = (
        (re.compile(r"unsupported call: "), "unknown_tool"),
        (re.compile(r"failed to parse function arguments"), "invalid_input"),
    )

    @staticmethod
    def item_kind(call: dict[str, Any]) -> str | None:
        name = str(call.get("name") or "")
        if call.get("namespace") or name.startswith("mcp__"):
            return "mcp_tool_call"
        return _CODEX_ITEMS.get(name)

    def expects_item(self, call: dict[str, Any]) -> bool:
        return self.item_kind(call) is not None

    def pair(self, call_id: str, call: dict[str, Any], tool: StreamTool) -> bool:
        if tool.kind != self.item_kind(call):
            return False
        raw = call.get("input")
        inp = raw if isinstance(raw, dict) else {}
        if tool.kind == "command_execution":
            return command_matches(tool.key, inp.get("cmd"))
        if tool.kind == "mcp_tool_call":
            name = str(call.get("name") or "")
            return bool(tool.key) and (name == tool.key or name.endswith("__" + tool.key))
        return True


def command_matches(shown: str, cmd: Any) -> bool:
    """Codex shows a command as `<shell> -lc <quoted cmd>`: parse it rather than re-quote (its quoting
    differs from Python's, e.g. `"it's"`)."""
    if not isinstance(cmd, str):
        return False
    try:
        words = shlex.split(shown)
    except ValueError:
        words = []
    return shown == cmd or (bool(words) and words[-1] == cmd)


class ToolOutputJoin:
    """Writes a CLI's `tool_result` events from what the model received (see the module docstring).

    One per harness, across its phases (follow-ups): the call ids already written are kept, so
    a resumed session's resent history is not written twice. Add it to the transcript's
    listeners for a phase, feed it the stream's tools (`started`, `finished`), and call
    `end_phase` after."""

    def __init__(self, transcript: TranscriptWriter, cli: str, rules: CliRules) -> None:
        self.tr = transcript
        self.cli = cli
        self.rules = rules
        self._lock = threading.Lock()
        self._tools: list[StreamTool] = []  # reported by the stream, tool_result not yet written
        self._held: list[Received] = []  # seen in a request before the stream reported the tool
        self._calls: dict[str, dict[str, Any]] = {}  # call id -> the model's call, from recorded responses
        self._written: set[str] = set()  # call ids whose output has been written
        self.rejected: dict[str, int] = {}  # reason -> count

    # -- from the stream parser (the CLI's stdout thread) ----------------------------------------

    def started(self, tool_id: str, name: str, kind: str = "", key: str = "") -> None:
        tool = StreamTool(tool_id, name, kind, key)
        with self._lock:
            got = next((r for r in self._held if self.rules.pair(r.call_id, r.call, tool)), None)
            if got is not None:
                self._held.remove(got)
                tool.got = got
            self._tools.append(tool)

    def finished(self, tool_id: str, cli_output: str, fields: dict[str, Any], name: str = "?") -> None:
        with self._lock:
            tool = next((t for t in self._tools if t.id == tool_id and not t.done), None)
            if tool is None:  # no start was reported: pair it now
                tool = StreamTool(tool_id, name)
                self._tools.append(tool)
            tool.done, tool.cli_output, tool.fields = True, cli_output, {**tool.fields, **fields}
            if tool.got is None:
                return
            self._tools.remove(tool)
        self._write(tool, tool.got)

    # -- from the gateway (a transcript listener) --------------------------------------------------

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") != "model_call" or event.get("source") != "gateway":
            return
        ready: list[tuple[StreamTool | None, Received]] = []
        with self._lock:
            for call in (event.get("response") or {}).get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id"):
                    self._calls[str(call["id"])] = call
            for call_id, output, extra in received_outputs(event):
                if call_id in self._written:
                    continue
                self._written.add(call_id)
                got = Received(call_id, output, self._calls.get(call_id) or {"name": None}, extra)
                tool = next((t for t in self._tools if t.got is None and self.rules.pair(call_id, got.call, t)), None)
                if tool is None and self.rules.expects_item(got.call) and self.rules.rejection(output) is None:
                    self._held.append(got)  # the stream's report of the tool is still on its way
                elif tool is None:
                    ready.append((None, got))
                elif tool.done:
                    self._tools.remove(tool)
                    ready.append((tool, got))
                else:
                    tool.got = got  # still running in the stream's view (Codex yields long commands)
        for tool, got in ready:
            self._write(tool, got)

    def end_phase(self) -> None:
        """The CLI has exited: write what is left. A finished tool the model never got the output of
        keeps the CLI's report (`received: false`); a tool still running keeps what the model got of
        it; an output no stream tool claimed is written on its own. A tool that neither finished nor
        reached the model keeps its tool_call alone."""
        with self._lock:
            tools, held = [t for t in self._tools if t.done or t.got], self._held
            self._tools, self._held = [], []
            self._written.update(t.id for t in tools)
        for tool in tools:
            self._write(tool, tool.got)
        for got in held:
            self._write(None, got)

    # -- output --------------------------------------------------------------------------------

    def _write(self, tool: StreamTool | None, got: Received | None) -> None:
        text = got.output if got is not None else tool.cli_output if tool is not None else ""
        out, cut = clip(text)
        fields: dict[str, Any] = {}
        if tool is not None:
            fields.update(tool.fields)
            ident, name = tool.id, tool.name
        else:
            assert got is not None
            name = _call_name(got.call)
            ident = got.call_id
            fields["is_error"] = bool(got.fields.get("is_error"))
            self.tr.emit(
                "tool_call",
                "harness",
                cli=self.cli,
                id=ident,
                name=name,
                input=got.call.get("input"),
                cli_reported=False,
            )
            fields["cli_reported"] = False
        if got is not None:
            fields["call_id"] = got.call_id
            if "is_error" in got.fields:  # the flag the model got (Anthropic tool_result)
                fields["is_error"] = got.fields["is_error"]
        reason = self.rules.rejection(text)
        if reason is not None:
            fields["rejected"] = reason
            fields["is_error"] = True
        self.tr.emit(
            "tool_result",
            "harness",
            cli=self.cli,
            id=ident,
            name=name,
            output=out,
            truncated=cut,
            received=got is not None,
            **fields,
        )
        if reason is not None:
            with self._lock:
                self.rejected[reason] = self.rejected.get(reason, 0) + 1
            warn_rejected(self.tr, self.cli, name, reason, got.call_id if got else ident)


def warn_rejected(transcript: TranscriptWriter, harness: str, tool: str, reason: str, call_id: str) -> None:
    """The `warning` event for a tool call the harness refused to run (reason unknown_tool | invalid_input)."""
    what = "has no such tool" if reason == "unknown_tool" else "could not use the call's input"
    transcript.emit(
        "warning",
        "harness",
        kind="tool_rejected",
        harness=harness,
        tool=tool,
        reason=reason,
        call_id=call_id,
        message=f"{harness} rejected a call to {tool}: it {what}",
    )


def _call_name(call: dict[str, Any]) -> str:
    name = str(call.get("name") or "?")
    return f"{call['namespace']}__{name}" if call.get("namespace") else name
