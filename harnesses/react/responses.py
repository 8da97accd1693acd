"""ReAct over OpenAI Responses (openai/ models), stateless (store=False).

With a reasoning effort the request asks for the reasoning's encrypted content, and each reasoning
item goes back in the next request as it came (encrypted_content byte for byte). A reasoning item
without encrypted content cannot go back statelessly (the API looks its id up, and nothing was
stored): it is recorded, not sent.
"""

from __future__ import annotations

from typing import Any

from benchctl.gateway.wire.neutral import ToolCall
from benchctl.gateway.wire.responses import ENCRYPTED_REASONING, read_reasoning
from harnesses.react.conversation import ToolResult, Turn, arguments, clients, dump, tool_specs


class ResponsesConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        self.client = clients().openai_client(gateway).with_options(max_retries=0)
        self.model, self.system = model, system
        self.items: list[dict[str, Any]] = [{"role": "user", "content": user}]
        self.effort = options.get("reasoning_effort")
        self.tools = [
            {
                "type": "function",
                "name": t["name"],
                "description": t["description"],
                "parameters": t["parameters"],
                "strict": False,
            }
            for t in tool_specs(options)
        ]

    def call(self, timeout: float) -> Turn:
        kw: dict[str, Any] = {}
        if self.effort:
            # Stateless (store=False) so reasoning must travel back encrypted with the history.
            kw["reasoning"] = {"effort": self.effort}
            kw["include"] = [ENCRYPTED_REASONING]
        r = self.client.responses.create(
            model=self.model,
            instructions=self.system,
            input=self.items,
            tools=self.tools,
            store=False,
            timeout=timeout,
            **kw,
        )
        turn = Turn(stop_reason=getattr(r, "status", None))
        if r.usage:
            details = getattr(r.usage, "input_tokens_details", None)
            out_details = getattr(r.usage, "output_tokens_details", None)
            turn.usage = {
                "input_tokens": r.usage.input_tokens,
                "output_tokens": r.usage.output_tokens,
                "cached_input_tokens": getattr(details, "cached_tokens", 0) or 0,
                "reasoning_tokens": getattr(out_details, "reasoning_tokens", 0) or 0,
            }
        texts = []
        new_items = []
        for item in r.output:
            d = dump(item)
            if item.type == "reasoning":
                d.pop("status", None)
                turn.reasoning.append(read_reasoning(d))
                if not d.get("encrypted_content"):
                    continue
            if item.type == "message":
                for c in item.content:
                    if c.type == "refusal":
                        turn.refusal = True
                    elif c.type == "output_text":
                        texts.append(c.text)
            elif item.type == "function_call":
                turn.tool_calls.append(ToolCall(item.call_id, item.name, arguments(item.arguments)))
            new_items.append(d)
        if turn.refusal:
            return turn
        turn.text = "\n".join(texts)
        self.items.extend(new_items)
        return turn

    def add_tool_results(self, results: list[ToolResult]) -> None:
        self.items.extend({"type": "function_call_output", "call_id": r.call.id, "output": r.output} for r in results)

    def add_user(self, text: str) -> None:
        self.items.append({"role": "user", "content": text})
