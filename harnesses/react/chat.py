"""ReAct over chat completions (openai-compatible/ models: vLLM, SGLang, DeepSeek-style servers).

An answer's reasoning (`reasoning_content`, or `reasoning` on newer vLLM) is recorded but not sent
back: those servers reject it or ignore it in a request.
"""

from __future__ import annotations

from typing import Any

from benchctl.gateway.wire.chat import REASONING_FIELDS
from benchctl.gateway.wire.neutral import ToolCall, reasoning
from harnesses.react.conversation import ToolResult, Turn, arguments, clients, tool_specs


class ChatConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        self.client = clients().openai_client(gateway).with_options(max_retries=0)
        self.model = model
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        self.effort = options.get("reasoning_effort")
        self.tools = [
            {
                "type": "function",
                "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
            }
            for t in tool_specs(options)
        ]

    def call(self, timeout: float) -> Turn:
        kw: dict[str, Any] = {"reasoning_effort": self.effort} if self.effort else {}
        r = self.client.chat.completions.create(
            model=self.model, messages=self.messages, tools=self.tools, timeout=timeout, **kw
        )
        choice = r.choices[0]
        msg = choice.message
        turn = Turn(
            stop_reason=choice.finish_reason,
            refusal=bool(getattr(msg, "refusal", None)) or choice.finish_reason == "content_filter",
        )
        if r.usage:
            details = getattr(r.usage, "prompt_tokens_details", None)
            out_details = getattr(r.usage, "completion_tokens_details", None)
            turn.usage = {
                "input_tokens": r.usage.prompt_tokens,
                "output_tokens": r.usage.completion_tokens,
                "cached_input_tokens": getattr(details, "cached_tokens", 0) or 0,
                "reasoning_tokens": getattr(out_details, "reasoning_tokens", 0) or 0,
            }
        # not in the SDK's types: the servers' own field, kept by the SDK as extra data
        thought = next((v for k in REASONING_FIELDS if isinstance(v := getattr(msg, k, None), str)), None)
        if thought:
            turn.reasoning = [reasoning(thought)]
        if turn.refusal:
            return turn
        turn.text = msg.content or ""
        stored: dict[str, Any] = {"role": "assistant", "content": msg.content}
        if msg.tool_calls:
            stored["tool_calls"] = []
            for tc in msg.tool_calls:
                turn.tool_calls.append(ToolCall(tc.id, tc.function.name, arguments(tc.function.arguments)))
                stored["tool_calls"].append(
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                    }
                )
        self.messages.append(stored)
        return turn

    def add_tool_results(self, results: list[ToolResult]) -> None:
        self.messages.extend({"role": "tool", "tool_call_id": r.call.id, "content": r.output} for r in results)

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})
