"""Codex's `exec --json` lines → benchctl transcript events.

Event shapes verified against Codex 0.147.0 (see harnesses/CLI_FACTS.md):

    thread.started{thread_id}                      -> harness_event kind=session
    turn.started / turn.completed{usage}           -> harness_event kind=turn_started / turn_completed
    item.completed agent_message{text}             -> assistant
    item.started command_execution{command}        -> tool_call name=exec_command input={command}
    item.completed command_execution{aggregated_output, exit_code}
                                                   -> tool_result
    item.started / completed file_change{changes}  -> tool_call / tool_result name=apply_patch
    item.* mcp_tool_call{server, tool, arguments, result}
                                                   -> tool_call / tool_result name=<tool> input=<arguments>
    item.* todo_list                               -> harness_event kind=plan (one item per turn, updated by
                                                      each update_plan call)
    item.* web_search / collab_tool_call           -> tool_call / tool_result (generic)
    item.completed reasoning{text}                 -> assistant with text "" and `reasoning` (below)
    item.completed error{message}                  -> harness_event kind=cli_warning (Codex uses
                                                      error items for warnings, e.g. hook trust)
    error{message}                                 -> harness_event kind=cli_error. Not a failure by
                                                      itself: Codex also reports stream retries this
                                                      way ("Reconnecting... 1/5"), and a turn that
                                                      then completes has succeeded
    turn.failed{error}                             -> harness_event kind=turn_failed (the phase fails)

The tool_result of a command, patch or MCP call is written by the ToolOutputJoin
(harnesses/tool_outputs.py) with the output the model received: `aggregated_output` holds only
the last burst of a command's output (verified: `echo A; sleep 0.2; echo B` gives "B\n"), while
the model's function_call_output has it all. Calls with no item of their own (update_plan,
write_stdin, tool_search, calls Codex rejects) get their tool_call / tool_result from the join too.

Usage in turn.completed is cumulative per thread; per-call usage comes from the gateway.

Reasoning: Codex shows a model's reasoning item as `reasoning{text}` once it is complete, before
the message or tool calls it led to, with the item's summary texts joined by newlines (the
encrypted content it sends back stays in the gateway's record; items with no summary are not
shown; checked with 0.147.0, also with show_raw_agent_reasoning). Each becomes an `assistant`
event with text "" and `reasoning: [{"type": "reasoning", "text", "summary": true, "redacted":
false, "signature": null}]` (the shape every harness writes, README "Transcript"), in stream
order. It is not joined to the next agent_message: the stream does not say which model response
an item belongs to, and a response can end in a call that has no item of its own (update_plan).

Tool ids: the stream names a tool call by Codex's own item id (`item_3`, counted per
invocation, so a follow-up's `codex exec resume` counts from `item_0` again: in follow-up phase N
the ids are written as `item_3@N`, unique in the transcript), the PostToolUse hook by the model's
call id (`call_…`), and neither carries the other. The hook host therefore asks `ToolItems.claim` for the completed item matching the
hook's tool and input, and records both ids on the `hook` event (`tool_id` = call id, like
Claude Code's; `item_id` = the `id` of this stream's tool_call / tool_result). The tool_result
also carries `call_id`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson

from benchctl.transcript import TranscriptWriter
from harnesses.tool_outputs import MAX_RAW, CodexRules, ToolOutputJoin, command_matches, output_text, small_json

# Hook tool_name -> the stream's item type for that tool (CLI_FACTS.md; MCP tools are mcp__<server>__<tool>).
_HOOK_ITEM_TYPES = {"Bash": "command_execution", "apply_patch": "file_change"}


class ToolItems:
    """Completed tool items of one Codex invocation, each waiting for its PostToolUse hook.

    The parser adds items from the CLI's stdout thread; the hook host claims them from the
    gateway's thread. Codex writes `item.completed` before it runs the hook, but our stdout reader
    may lag behind the hook's HTTP request, so `claim` waits briefly for a matching item.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open: list[tuple[str, str, str]] = []  # (item id, item type, match key), oldest first

    def completed(self, item_id: str, item_type: str, key: str) -> None:
        with self._cond:
            self._open.append((item_id, item_type, key))
            self._cond.notify_all()

    def claim(self, tool_name: Any, tool_input: Any, wait_s: float = 0.5) -> str | None:
        """The item id for a hook's (tool_name, tool_input), or None when nothing matches.

        Prefers an exact match (the shell command Codex shows is `<shell> -lc <quoted cmd>`; an MCP
        hook name ends with the item's tool name); else the oldest open item of the same type, so
        parallel calls with identical inputs still pair up one to one."""
        name = str(tool_name or "")
        itype = _HOOK_ITEM_TYPES.get(name) or ("mcp_tool_call" if name.startswith("mcp__") else None)
        if itype is None:
            return None
        cmd = tool_input.get("command") if isinstance(tool_input, dict) else None
        deadline = time.monotonic() + wait_s
        with self._cond:
            while True:
                same = [e for e in self._open if e[1] == itype]
                if same:
                    exact = [e for e in same if _matches(e, name, cmd)]
                    chosen = (exact or same)[0]
                    self._open.remove(chosen)
                    return chosen[0]
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)


def _matches(entry: tuple[str, str, str], hook_tool: str, cmd: Any) -> bool:
    _, itype, key = entry
    if itype == "command_execution":
        return command_matches(key, cmd)
    if itype == "mcp_tool_call":
        return bool(key) and hook_tool.endswith("__" + key)
    return False


class CodexStreamParser:
    def __init__(
        self, transcript: TranscriptWriter, cli: str = "codex", join: ToolOutputJoin | None = None, phase: int = 1
    ) -> None:
        self.tr = transcript
        # Codex counts its item ids per invocation: a follow-up phase's ids get "@<phase>" so that a
        # transcript's tool ids stay unique (the exports and the view pair calls and results by id).
        self.id_suffix = f"@{phase}" if phase > 1 else ""
        self.tool_items = ToolItems()
        self.join = join or ToolOutputJoin(transcript, cli, CodexRules())
        self.cli = cli
        self.session_id: str | None = None
        self.turns_completed = 0
        self.failure: str | None = None  # why the turn failed (turn.failed)
        self.last_error: str | None = None  # the last top-level error event, for the message
        self.last_agent_message: str | None = None
        self.usage: dict[str, Any] | None = None

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
            self.last_error = msg
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="cli_error", message=msg)
        elif kind in ("item.started", "item.updated", "item.completed"):
            self._item(kind.split(".", 1)[1], ev.get("item") or {})
        else:
            self.tr.emit("harness_event", "harness", cli=self.cli, kind=str(kind), raw=line[:MAX_RAW])

    def finish(self) -> None:
        """Nothing is held back: every line is written as it comes."""

    def _item(self, phase: str, item: dict[str, Any]) -> None:
        itype, iid = item.get("type"), item.get("id")
        if iid is not None and self.id_suffix:
            iid = f"{iid}{self.id_suffix}"
        if itype == "agent_message":
            if phase == "completed":
                self.last_agent_message = str(item.get("text", ""))
                self.tr.emit("assistant", "harness", cli=self.cli, text=self.last_agent_message, item_id=iid)
        elif itype == "command_execution":
            command = str(item.get("command") or "")
            if phase == "started":
                self.join.started(str(iid), "exec_command", itype, command)
                self.tr.emit(
                    "tool_call", "harness", cli=self.cli, id=iid, name="exec_command", input={"command": command}
                )
            elif phase == "completed":
                code = item.get("exit_code")
                self.join.finished(
                    str(iid),
                    str(item.get("aggregated_output") or ""),
                    {"exit_code": code, "is_error": item.get("status") == "failed" or code not in (0, None)},
                    "exec_command",
                )
                self.tool_items.completed(str(iid), itype, command)
        elif itype == "file_change":
            if phase == "started":
                self.join.started(str(iid), "apply_patch", itype)
                self.tr.emit(
                    "tool_call",
                    "harness",
                    cli=self.cli,
                    id=iid,
                    name="apply_patch",
                    input={"changes": item.get("changes")},
                )
            elif phase == "completed":
                self.join.finished(
                    str(iid),
                    orjson.dumps(item.get("changes")).decode(),
                    {"status": item.get("status"), "is_error": item.get("status") == "failed"},
                    "apply_patch",
                )
                self.tool_items.completed(str(iid), itype, "")
        elif itype == "mcp_tool_call":
            tool = str(item.get("tool") or "")
            if phase == "started":
                self.join.started(str(iid), tool, itype, tool)
                self.tr.emit(
                    "tool_call",
                    "harness",
                    cli=self.cli,
                    id=iid,
                    name=tool,
                    server=item.get("server"),
                    input=item.get("arguments"),
                )
            elif phase == "completed":
                result, error = item.get("result"), item.get("error")
                text = output_text(result.get("content")) if isinstance(result, dict) else ""
                if error:
                    text = str(error.get("message") if isinstance(error, dict) else error)
                self.join.finished(str(iid), text, {"is_error": item.get("status") == "failed"}, tool)
                self.tool_items.completed(str(iid), itype, tool)
        elif itype == "todo_list":
            # One item per turn, updated by every update_plan call; the calls themselves get their
            # tool_call / tool_result from the gateway's record (ToolOutputJoin).
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="plan", phase=phase, items=item.get("items"))
        elif itype == "reasoning":
            if phase == "completed":
                block = {
                    "type": "reasoning",
                    "text": str(item.get("text") or ""),
                    "summary": True,
                    "redacted": False,
                    "signature": None,
                }
                self.tr.emit("assistant", "harness", cli=self.cli, text="", reasoning=[block], item_id=iid)
        elif itype == "error":
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="cli_warning", message=item.get("message"))
        elif itype in ("web_search", "collab_tool_call"):
            name = item.get("tool") or item.get("query") and "web_search" or itype
            if phase == "started":
                self.tr.emit("tool_call", "harness", cli=self.cli, id=iid, name=str(name), input=small_json(item))
            elif phase == "completed":
                self.tr.emit(
                    "tool_result",
                    "harness",
                    cli=self.cli,
                    id=iid,
                    name=str(name),
                    output=small_json(item),
                    is_error=item.get("status") == "failed",
                )
        elif phase == "completed":
            self.tr.emit("harness_event", "harness", cli=self.cli, kind=f"item_{itype}", item=small_json(item))
