"""What the gateway saw of each CLI session's model traffic: the facts hooks are checked against.

The hook script runs in the sandbox as the agent's user, so the agent can POST anything to the
hook route itself (a fake Stop to use up its reprompts, fake PostToolUse events). The host
therefore believes a hook only when it matches what the gateway observed on its own:

- PostToolUse for tool call X: the model issued X in this session (a response the gateway
  recorded asked for it) and no request has carried X's result yet. The CLI's hook fires after
  the tool ran and before the next request carries the result, so that window is exactly when a
  real hook can come.
- Stop: the session's last model response ended the turn (asked for no tool; a refusal or a
  failed call also ends it). While a tool runs, the last response is the one that asked for it.

Sessions are told apart by the CLIs' own session headers (Claude Code `x-claude-code-session-id`,
Codex `session-id`), which equal the hook input's `session_id` (verified with the pinned
versions). Model calls the agent makes itself from a tool, without those headers, land in
another session and change nothing here. A HookLedger is a gateway CallObserver
(benchctl.gateway.server): `request` and `response` run on the gateway's event loop, the
checks in the hook host's worker threads, hence the lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from benchctl.gateway.wire import find

SESSION_HEADERS = ("x-claude-code-session-id", "session-id", "session_id")


def session_of(headers: dict[str, str]) -> str | None:
    for name in SESSION_HEADERS:
        if headers.get(name):
            return headers[name]
    return None


def answered_tool_calls(wire_api: str, body: dict[str, Any]) -> set[str]:
    """The ids of the tool calls whose results a request carries (read by its wire module)."""
    spoken = find(wire_api)
    if spoken is None:
        return set()
    return {m.tool_call_id for m in spoken.read_request(body).messages if m.role == "tool" and m.tool_call_id}


@dataclass
class Session:
    issued: set[str] = field(default_factory=set)  # tool calls the model asked for
    answered: set[str] = field(default_factory=set)  # ...whose results a later request carried
    responses: int = 0  # model responses recorded so far
    last_ended_turn: bool = False  # the latest of them asked for no tool


class HookLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str | None, Session] = {}

    # -- CallObserver (the gateway's event loop) ----------------------------------------------

    def request(self, headers: dict[str, str], wire_api: str, body: dict[str, Any]) -> None:
        ids = answered_tool_calls(wire_api, body)
        with self._lock:
            self._sessions.setdefault(session_of(headers), Session()).answered.update(ids)

    def response(self, headers: dict[str, str], wire_api: str, tool_call_ids: list[str], outcome: str) -> None:
        with self._lock:
            s = self._sessions.setdefault(session_of(headers), Session())
            s.issued.update(tool_call_ids)
            s.responses += 1
            s.last_ended_turn = not tool_call_ids

    # -- checks (the hook host's threads) -----------------------------------------------------

    def _session(self, session_id: Any) -> tuple[str | None, Session | None]:
        """The hook's session and its key; a run whose CLI sends no session header at all has just one."""
        if isinstance(session_id, str) and session_id in self._sessions:
            return session_id, self._sessions[session_id]
        if list(self._sessions) == [None]:
            return None, self._sessions[None]
        return None, None

    def check_tool_call(self, session_id: Any, tool_id: Any) -> str | None:
        """Why a PostToolUse for `tool_id` cannot be real, or None when it can."""
        with self._lock:
            _, s = self._session(session_id)
            if s is None:
                return f"no model call of session {session_id!r} went through the gateway"
            if not isinstance(tool_id, str) or tool_id not in s.issued:
                return f"the model never asked for tool call {tool_id!r}"
            if tool_id in s.answered:
                return f"tool call {tool_id!r} was already answered (its result went to the model)"
            return None

    def check_turn_end(self, session_id: Any) -> tuple[str | None, str | None]:
        """(which turn end: session and response number, None) for a Stop that can be real, else (None, why)."""
        with self._lock:
            key, s = self._session(session_id)
            if s is None:
                return None, f"no model call of session {session_id!r} went through the gateway"
            if s.responses == 0:
                return None, "the model has not answered yet"
            if not s.last_ended_turn:
                return None, "the model's last response asked for a tool: the turn has not ended"
            return f"{key}#{s.responses}", None
