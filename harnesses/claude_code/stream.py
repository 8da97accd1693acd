"""Claude Code's `--output-format stream-json --verbose` lines → benchctl transcript events.

Event shapes verified against Claude Code 2.1.332 (see harnesses/CLI_FACTS.md):

    system/init                      -> harness_event kind=init (session, model, tools, version)
    assistant, text block            -> assistant (text, model, message_id; `reasoning` below)
    assistant, tool_use block        -> tool_call (id, name, input)
    assistant, thinking / redacted_thinking block
                                     -> `reasoning` of the message's assistant event (below)
    user, tool_result block          -> tool_result (id, output, is_error, interrupted), written by the
                                        ToolOutputJoin with the output the model received (harnesses/tool_outputs.py)
    user, synthetic text (isSynthetic: stop-hook feedback, refusal retry) -> harness_event kind=cli_message
    system/hook_response (--include-hook-events) -> harness_event kind=hook_response (event, outcome, output);
                                        system/hook_started is dropped (the response carries it all)
    system/informational, system/model_refusal_no_fallback, system/notification
                                     -> harness_event kind=<subtype> (the CLI's own refusal handling)
    result                           -> harness_event kind=result (subtype, is_error, stop_reason, ...)
    anything else                    -> harness_event kind=<type>/<subtype>

Reasoning: the CLI writes one line per content block of a model message, all with the message's
id, thinking first. A thinking block becomes {"type": "reasoning", "text", "summary": false,
"redacted": false, "signature"} and a redacted_thinking block {"text": "", "redacted": true,
"signature": <its data>} (the shape every harness writes, README "Transcript"). The message's
reasoning blocks go into the `assistant` event of its next text block; when a tool call (or
another block) comes first, or the message ends without text (a line of another message, a tool
result, the result, the end of the stream: `finish`), into an `assistant` event of their own with
text "" written at that point, so reasoning stays before the tool calls it led to.

Model calls themselves are recorded by the gateway; here only what the CLI did with them.
"""

from __future__ import annotations

from typing import Any

import orjson

from benchctl.transcript import TranscriptWriter
from harnesses.tool_outputs import MAX_RAW, ClaudeRules, ToolOutputJoin, clip, output_text, small_json


class ClaudeStreamParser:
    """Feed it stdout lines; it writes transcript events and keeps what the outcome needs."""

    def __init__(
        self, transcript: TranscriptWriter, cli: str = "claude-code", join: ToolOutputJoin | None = None
    ) -> None:
        self.tr = transcript
        self.cli = cli
        self.join = join or ToolOutputJoin(transcript, cli, ClaudeRules())
        self.session_id: str | None = None
        self.version: str | None = None
        self.result: dict[str, Any] | None = None
        self._reasoning: list[dict[str, Any]] = []  # blocks of the message below, not written yet
        self._message: tuple[dict[str, Any], Any] = ({}, None)  # (message, parent_tool_use_id) they belong to

    def feed(self, line: str) -> None:
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.tr.emit("harness_event", "harness", cli=self.cli, kind="unparsed_line", text=line[:MAX_RAW])
            return
        if not isinstance(ev, dict):
            return
        self.session_id = ev.get("session_id") or self.session_id
        kind = ev.get("type")
        msg = m if kind == "assistant" and isinstance(m := ev.get("message"), dict) else {}
        if kind != "system" and (kind != "assistant" or msg.get("id") != self._message[0].get("id")):
            self.finish()  # the message the held reasoning belongs to has ended (system lines are progress)
        if kind == "assistant":
            self._assistant(ev)
        elif kind == "user":
            self._user(ev)
        elif kind == "result":
            self._result(ev)
        elif kind == "system":
            self._system(ev)
        else:
            self.tr.emit("harness_event", "harness", cli=self.cli, kind=str(kind), raw=line[:MAX_RAW])

    def finish(self) -> None:
        """Write reasoning still held (its message ended without text, or the stream ended)."""
        if self._reasoning:
            self._emit_assistant("")

    def _emit_assistant(self, text: str) -> None:
        msg, subagent = self._message
        fields = {"reasoning": self._reasoning} if self._reasoning else {}
        self._reasoning = []
        self.tr.emit(
            "assistant",
            "harness",
            cli=self.cli,
            text=text,
            model=msg.get("model"),
            message_id=msg.get("id"),
            stop_reason=msg.get("stop_reason"),
            subagent=subagent,
            **fields,
        )

    def _assistant(self, ev: dict[str, Any]) -> None:
        msg = m if isinstance(m := ev.get("message"), dict) else {}
        self._message = (msg, ev.get("parent_tool_use_id"))
        for block in msg.get("content") or []:
            btype = block.get("type")
            if btype == "thinking":
                self._reasoning.append(_reasoning(str(block.get("thinking") or ""), False, block.get("signature")))
                continue
            if btype == "redacted_thinking":
                self._reasoning.append(_reasoning("", True, block.get("data")))
                continue
            if btype == "text":
                self._emit_assistant(str(block.get("text", "")))
                continue
            self.finish()  # reasoning before a tool call is written before it
            if btype == "tool_use":
                self.join.started(str(block.get("id")), str(block.get("name")))
                self.tr.emit(
                    "tool_call",
                    "harness",
                    cli=self.cli,
                    id=block.get("id"),
                    name=block.get("name"),
                    input=block.get("input"),
                    subagent=ev.get("parent_tool_use_id"),
                )
            else:
                self.tr.emit(
                    "harness_event",
                    "harness",
                    cli=self.cli,
                    kind=f"assistant_{btype}",
                    raw=orjson.dumps(block)[:MAX_RAW].decode("utf-8", "replace"),
                )

    def _user(self, ev: dict[str, Any]) -> None:
        msg = ev.get("message") or {}
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        extra = r if isinstance(r := ev.get("tool_use_result"), dict) else {}
        for block in content or []:
            if block.get("type") == "tool_result":
                tid = str(block.get("tool_use_id"))
                fields: dict[str, Any] = {"is_error": bool(block.get("is_error"))}
                if "interrupted" in extra:
                    fields["interrupted"] = extra.get("interrupted")
                self.join.finished(tid, output_text(block.get("content")), fields)
            elif block.get("type") == "text":
                text, cut = clip(str(block.get("text", "")))
                self.tr.emit(
                    "harness_event",
                    "harness",
                    cli=self.cli,
                    kind="cli_message",
                    text=text,
                    synthetic=bool(ev.get("isSynthetic")),
                    refusal_retry=bool(ev.get("refusal_retry")),
                )

    def _system(self, ev: dict[str, Any]) -> None:
        sub = ev.get("subtype")
        if sub == "init":
            self.version = ev.get("claude_code_version")
            self.tr.emit(
                "harness_event",
                "harness",
                cli=self.cli,
                kind="init",
                session_id=ev.get("session_id"),
                model=ev.get("model"),
                tools=ev.get("tools"),
                version=self.version,
                permission_mode=ev.get("permissionMode"),
                api_key_source=ev.get("apiKeySource"),
            )
            return
        if sub == "hook_started":
            return  # its hook_response says the same and more (a hook that never answers shows as a missing response)
        if sub == "hook_response":
            out, cut = clip(str(ev.get("output") or ""), 2_000)
            self.tr.emit(
                "harness_event",
                "harness",
                cli=self.cli,
                kind="hook_response",
                hook_event=ev.get("hook_event"),
                hook_name=ev.get("hook_name"),
                exit_code=ev.get("exit_code"),
                outcome=ev.get("outcome"),
                output=out,
                truncated=cut,
            )
            return
        fields = {k: v for k, v in ev.items() if k not in ("type", "subtype", "uuid", "session_id")}
        self.tr.emit("harness_event", "harness", cli=self.cli, kind=str(sub), fields=small_json(fields))

    def _result(self, ev: dict[str, Any]) -> None:
        self.result = ev
        text, cut = clip(str(ev.get("result") or ""), 20_000)
        self.tr.emit(
            "harness_event",
            "harness",
            cli=self.cli,
            kind="result",
            subtype=ev.get("subtype"),
            is_error=ev.get("is_error"),
            stop_reason=ev.get("stop_reason"),
            terminal_reason=ev.get("terminal_reason"),
            num_turns=ev.get("num_turns"),
            session_id=ev.get("session_id"),
            duration_ms=ev.get("duration_ms"),
            usage=ev.get("usage"),
            cli_cost_usd=ev.get("total_cost_usd"),
            api_error_status=ev.get("api_error_status"),
            text=text,
            truncated=cut,
        )


def _reasoning(text: str, redacted: bool, signature: Any) -> dict[str, Any]:
    """A reasoning block in the transcript's one shape (an Anthropic block's text is never a summary)."""
    return {
        "type": "reasoning",
        "text": text,
        "summary": False,
        "redacted": redacted,
        "signature": signature if isinstance(signature, str) else None,
    }
