"""Codex's `exec --json` lines → benchctl transcript events.

Event shapes verified against Codex 0.147.0 (see harnesses/CLI_FACTS.md):

    thread.started{thread_id}                      -> harness_event kind=session
    turn.started / turn.completed{usage}           -> harness_event kind=turn_started / turn_completed
    item.completed agent_message{text}             -> assistant
    item.started command_execution{command}        -> tool_call name=exec_command input={command}
    item.completed command_execution{aggregated_output, exit_code}
                                                   -> tool_result
    item.started / completed file_change{changes}  -> tool_call / tool_result name=apply_patch
    item.* mcp_tool_call / web_search / todo_list  -> tool_call / tool_result (generic)
    item.completed reasoning{text}                 -> harness_event kind=reasoning
    item.completed error{message}                  -> harness_event kind=cli_warning (Codex uses
                                                      error items for warnings, e.g. hook trust)
    error{message} / turn.failed{error}            -> error (and the phase fails)

Usage in turn.completed is cumulative per thread; per-call usage comes from the gateway.
"""
from __future__ import annotations

from typing import Any

import orjson

from benchctl.transcript import TranscriptWriter

MAX_TEXT = 200_000
MAX_RAW = 4_000


def _clip(text: str, limit: int = MAX_TEXT) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


class CodexStreamParser:
    def __init__(self, transcript: TranscriptWriter, cli: str = "codex") -> None:
        self.tr = transcript
        self.cli = cli
        self.session_id: str | None = None
        self.turns_completed = 0
        self.failure: str | None = None
        self.last_agent_message: str | None = None
        self.usage: dict[str, Any] | None = None
        self.tool_calls = 0

    def feed(self, line: str) -> None:
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="unparsed_line", text=line[:MAX_RAW])
            return
        if not isinstance(ev, dict):
            return
        kind = ev.get("type")
        if kind == "thread.started":
            self.session_id = ev.get("thread_id") or self.session_id
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="session", session_id=self.session_id)
        elif kind == "turn.started":
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="turn_started")
        elif kind == "turn.completed":
            self.turns_completed += 1
            self.usage = ev.get("usage")
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="turn_completed", cumulative_usage=self.usage)
        elif kind == "turn.failed":
            err = ev.get("error") or {}
            self.failure = str(err.get("message") if isinstance(err, dict) else err)[:2000]
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="turn_failed", message=self.failure)
        elif kind == "error":
            msg = str(ev.get("message", ""))[:2000]
            self.failure = self.failure or msg
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="cli_error", message=msg)
        elif kind in ("item.started", "item.updated", "item.completed"):
            self._item(kind.split(".", 1)[1], ev.get("item") or {})
        else:
            self.tr.emit("harness_event", "harness", cli=self.cli, kind=str(kind), raw=line[:MAX_RAW])

    def _item(self, phase: str, item: dict[str, Any]) -> None:
        itype, iid = item.get("type"), item.get("id")
        if itype == "agent_message":
            if phase == "completed":
                self.last_agent_message = str(item.get("text", ""))
                self.tr.emit("assistant", "harness", cli=self.cli, text=self.last_agent_message, item_id=iid)
        elif itype == "command_execution":
            if phase == "started":
                self.tool_calls += 1
                self.tr.emit("tool_call", "harness", cli=self.cli, id=iid, name="exec_command",
                             input={"command": item.get("command")})
            elif phase == "completed":
                out, cut = _clip(str(item.get("aggregated_output") or ""))
                code = item.get("exit_code")
                self.tr.emit("tool_result", "harness", cli=self.cli, id=iid, name="exec_command", output=out,
                             exit_code=code, is_error=item.get("status") == "failed" or (code not in (0, None)),
                             truncated=cut)
        elif itype == "file_change":
            if phase == "started":
                self.tool_calls += 1
                self.tr.emit("tool_call", "harness", cli=self.cli, id=iid, name="apply_patch",
                             input={"changes": item.get("changes")})
            elif phase == "completed":
                self.tr.emit("tool_result", "harness", cli=self.cli, id=iid, name="apply_patch",
                             output=orjson.dumps(item.get("changes")).decode(), status=item.get("status"),
                             is_error=item.get("status") == "failed")
        elif itype == "reasoning":
            if phase == "completed":
                text, cut = _clip(str(item.get("text", "")))
                self.tr.emit("harness_event", "harness", cli=self.cli, kind="reasoning", text=text, truncated=cut)
        elif itype == "error":
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="cli_warning", message=item.get("message"))
        elif itype in ("mcp_tool_call", "web_search", "todo_list", "collab_tool_call"):
            name = item.get("tool") or item.get("query") and "web_search" or itype
            if phase == "started":
                self.tool_calls += 1
                self.tr.emit("tool_call", "harness", cli=self.cli, id=iid, name=str(name), input=_small(item))
            elif phase == "completed":
                self.tr.emit("tool_result", "harness", cli=self.cli, id=iid, name=str(name), output=_small(item),
                             is_error=item.get("status") == "failed")
        elif phase == "completed":
            self.tr.emit("harness_event", "harness", cli=self.cli, kind=f"item_{itype}", item=_small(item))


def _small(item: dict[str, Any]) -> Any:
    raw = orjson.dumps(item)
    return item if len(raw) <= MAX_RAW else raw[:MAX_RAW].decode("utf-8", "replace")
