"""The prompt a run started from, as the model received it: the system prompt and the task.

The transcript has no event of its own for them: they are in the first request of the agent's
conversation, which the gateway records whole (`request` with `base: null`, its top-level fields
in `set` and its messages in `append`; benchctl/gateway/recording.py). Agent CLIs also make side
calls before it (Claude Code asks a small model for a title or a quota check); those have no
tools, so the first call that offers tools is the agent's own, and the first conversation-opening
call stands in when no call offers tools.

Read by the viewer (the run page's prompt) and by `benchctl scan` (the task prompt in the
`messages` part), so both show the same prompt for a run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SYSTEM_ROLES = ("system", "developer")
SYSTEM_FIELDS = ("system", "instructions", "systemInstruction", "system_instruction")
MESSAGE_FIELDS = ("messages", "input", "contents")  # where each wire API keeps a request's messages


@dataclass(frozen=True, slots=True)
class TaskPrompt:
    system: str  # "" when the request had none
    task: str  # the user messages before the model's first answer
    seq: int  # the model_call event it was read from
    call_id: str
    offers_tools: bool  # a call without tools is a side call unless no call has any


def opening_prompt(ev: dict[str, Any]) -> TaskPrompt | None:
    """The prompt a `model_call` event opens a conversation with; None when its request continues
    a conversation (a recorded delta with a base) or has no user text before the model's answer."""
    opening = _opening(ev)
    if opening is None:
        return None
    fields, messages = opening
    system = [_text(fields.get(k)) for k in SYSTEM_FIELDS]
    task = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role in SYSTEM_ROLES:
            system.append(_text(m.get("content")))
        elif role == "user":
            task.append(_text(m.get("content", m.get("parts"))))
        else:  # the model's first answer (or a tool output): what follows is the conversation
            break
    task_text = "\n\n".join(t for t in task if t)
    if not task_text:
        return None
    return TaskPrompt(
        system="\n\n".join(s for s in system if s),
        task=task_text,
        seq=int(ev.get("seq") or 0),
        call_id=str(ev.get("call_id") or ""),
        offers_tools=bool(fields.get("tools")),
    )


class PromptSearch:
    """The agent's prompt, from `model_call` events offered in transcript order: the first opening
    prompt that offers tools, else the first opening prompt. `done` says no later event can change
    the answer, so a reader may stop offering (and parsing) model calls."""

    def __init__(self) -> None:
        self._found: TaskPrompt | None = None
        self._first: TaskPrompt | None = None

    @property
    def done(self) -> bool:
        return self._found is not None

    @property
    def prompt(self) -> TaskPrompt | None:
        return self._found or self._first

    def offer(self, ev: dict[str, Any]) -> None:
        if self._found is not None:
            return
        found = opening_prompt(ev)
        if found is None:
            return
        if found.offers_tools:
            self._found = found
        elif self._first is None:
            self._first = found


def find_prompt(events: Iterable[dict[str, Any]]) -> TaskPrompt | None:
    """The agent's prompt among a transcript's events (see the module docstring)."""
    search = PromptSearch()
    for ev in events:
        if ev.get("type") == "model_call":
            search.offer(ev)
            if search.done:
                break
    return search.prompt


def _opening(ev: dict[str, Any]) -> tuple[dict[str, Any], list[Any]] | None:
    """(top-level fields, messages) of a model_call's request when it opens a conversation."""
    req = ev.get("request")
    if not isinstance(req, dict):
        return None
    if "conv" in req:  # a recorded delta: only a request stored whole has everything
        if req.get("base") is not None:
            return None
        fields, messages = req.get("set"), req.get("append")
    else:  # the request itself
        fields = req
        messages = next((req[k] for k in MESSAGE_FIELDS if isinstance(req.get(k), list)), [])
    return (fields if isinstance(fields, dict) else {}), (messages if isinstance(messages, list) else [])


def _text(content: Any) -> str:
    """The text of a message's content in any wire's shape (a string, or blocks / parts with `text`,
    or Gemini's `{"parts": [...]}`); tool results and images are not text."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = content.get("parts", [content])
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif (
            isinstance(block, dict)
            and isinstance(block.get("text"), str)
            and block.get("type", "text") in ("text", "input_text")
        ):
            parts.append(block["text"])
    return "\n\n".join(p for p in parts if p)
