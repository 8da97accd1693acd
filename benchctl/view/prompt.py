"""The prompt a run started from, as the model received it: the system prompt and the task.

The transcript has no event of its own for them: they are in the first request of the agent's
conversation, which the gateway records whole (`request` with `base: null`, its top-level fields
in `set` and its messages in `append`; benchctl/gateway/recording.py). Agent CLIs also make side
calls before it (Claude Code asks a small model for a title or a quota check); those have no
tools, so the first call that offers tools is the agent's own, and the first conversation-opening
call stands in when no call offers tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCAN_LINES = 200  # the prompt is looked for in the transcript's first lines
SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True, slots=True)
class Prompt:
    system: str  # "" when the request had none
    task: str  # the user messages before the model's first answer
    seq: int  # the model_call event it was read from
    call_id: str


def _text(content: Any) -> str:
    """The text of a message's content in any wire's shape (a string, or blocks / parts with `text`);
    tool results and images are not text."""
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
        messages = next((req[k] for k in ("messages", "input", "contents") if isinstance(req.get(k), list)), [])
    return (fields if isinstance(fields, dict) else {}), (messages if isinstance(messages, list) else [])


def _prompt(ev: dict[str, Any], fields: dict[str, Any], messages: list[Any]) -> Prompt | None:
    system = [_text(fields.get(k)) for k in ("system", "instructions", "systemInstruction", "system_instruction")]
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
    return Prompt("\n\n".join(s for s in system if s), task_text, int(ev.get("seq") or 0), str(ev.get("call_id") or ""))


def find(events: list[dict[str, Any]]) -> Prompt | None:
    """The agent's prompt among a transcript's first events (see the module docstring)."""
    first: Prompt | None = None
    for ev in events:
        opening = _opening(ev) if ev.get("type") == "model_call" else None
        prompt = _prompt(ev, *opening) if opening is not None else None
        if prompt is None or opening is None:
            continue
        if opening[0].get("tools"):
            return prompt
        first = first or prompt
    return first
