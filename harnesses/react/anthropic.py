"""ReAct over Anthropic Messages (anthropic/ and scripted/ models).

The history keeps every content block of an answer as it came, thinking blocks with their
signature and redacted_thinking blocks with their data, byte for byte: Anthropic refuses a
request whose thinking block was changed.
"""

from __future__ import annotations

from typing import Any

from benchctl.gateway.wire.anthropic import read_reasoning
from benchctl.gateway.wire.neutral import ToolCall
from harnesses.react.conversation import REASONING_BUDGETS, ToolResult, Turn, clients, tool_specs


class AnthropicConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        self.client = clients().anthropic_client(gateway).with_options(max_retries=0)
        self.model, self.system = model, system
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": user}]}]
        self.max_tokens = int(options.get("max_tokens", 8192))
        effort = options.get("reasoning_effort")
        self.thinking = REASONING_BUDGETS.get(str(effort)) if effort else None
        self.cache = bool(options.get("prompt_caching", True))
        self.tools = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in tool_specs(options)
        ]

    def _request_messages(self) -> list[dict[str, Any]]:
        if not self.cache:
            return self.messages
        # One cache breakpoint on the newest block: the whole prefix is then read from cache
        # next turn. Copy so the stored history never accumulates breakpoints (the API allows 4).
        msgs = self.messages[:-1] + [dict(self.messages[-1])]
        content = [dict(b) for b in msgs[-1]["content"]]
        content[-1]["cache_control"] = {"type": "ephemeral"}
        msgs[-1]["content"] = content
        return msgs

    def call(self, timeout: float) -> Turn:
        kw: dict[str, Any] = {}
        max_tokens = self.max_tokens
        if self.thinking:
            kw["thinking"] = {"type": "enabled", "budget_tokens": self.thinking}
            max_tokens += self.thinking
        system: Any = [
            {"type": "text", "text": self.system, **({"cache_control": {"type": "ephemeral"}} if self.cache else {})}
        ]
        r = self.client.messages.create(
            model=self.model,
            max_tokens=max_tokens,
            system=system,
            messages=self._request_messages(),
            tools=self.tools,
            timeout=timeout,
            **kw,
        )
        turn = Turn(stop_reason=r.stop_reason, refusal=r.stop_reason == "refusal")
        u = r.usage
        turn.usage = {
            "input_tokens": u.input_tokens or 0,
            "output_tokens": u.output_tokens or 0,
            "cached_input_tokens": getattr(u, "cache_read_input_tokens", 0) or 0,
            "cache_write_tokens": getattr(u, "cache_creation_input_tokens", 0) or 0,
        }
        content: list[dict[str, Any]] = []
        texts = []
        for b in r.content:
            if b.type == "text":
                content.append({"type": "text", "text": b.text})
                texts.append(b.text)
            elif b.type == "tool_use":
                content.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
                turn.tool_calls.append(ToolCall(b.id, b.name, b.input))
            elif b.type == "thinking":
                content.append({"type": "thinking", "thinking": b.thinking, "signature": b.signature})
            elif b.type == "redacted_thinking":
                content.append({"type": "redacted_thinking", "data": b.data})
        turn.reasoning = [p for block in content if (p := read_reasoning(block)) is not None]
        if turn.refusal:
            turn.tool_calls = []
            return turn  # not added to history: a fallback model retries the same turn
        turn.text = "\n".join(texts)
        self.messages.append({"role": "assistant", "content": content or [{"type": "text", "text": "(no content)"}]})
        return turn

    def _user_blocks(self) -> list[dict[str, Any]]:
        if self.messages[-1]["role"] != "user":
            self.messages.append({"role": "user", "content": []})
        return self.messages[-1]["content"]

    def add_tool_results(self, results: list[ToolResult]) -> None:
        self._user_blocks().extend(
            {
                "type": "tool_result",
                "tool_use_id": r.call.id,
                "content": r.output,
                **({"is_error": True} if r.is_error else {}),
            }
            for r in results
        )

    def add_user(self, text: str) -> None:
        self._user_blocks().append({"type": "text", "text": text})
