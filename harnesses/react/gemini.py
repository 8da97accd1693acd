"""ReAct over Gemini (google/ models).

The history keeps each answer's content as the SDK read it, thought parts and thoughtSignatures
included: the SDK sends a signature back as the same bytes (base64 in its URL-safe alphabet, which
the API accepts). The turn's reasoning is read from those parts by the Gemini wire module, each
signature in standard base64 as the API sends it.
"""

from __future__ import annotations

import base64
from typing import Any

from benchctl.gateway.wire.gemini import PartReader
from benchctl.gateway.wire.neutral import Message, ToolCall
from harnesses.react.conversation import REASONING_BUDGETS, ToolResult, Turn, clients, tool_specs


def _part(part: Any) -> dict[str, Any]:
    """An SDK part as the API spelled it (what the Gemini wire module reads)."""
    out: dict[str, Any] = {}
    if part.text is not None:
        out["text"] = part.text
    if part.thought:
        out["thought"] = True
    if part.thought_signature:
        out["thoughtSignature"] = base64.b64encode(part.thought_signature).decode()
    if part.function_call:
        fc = part.function_call
        out["functionCall"] = {"id": fc.id, "name": fc.name, "args": dict(fc.args or {})}
    return out


class GeminiConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        from google.genai import types

        self.types = types
        self.client = clients().genai_client(gateway)
        # The model goes into the URL path here; the gateway serves the run's model whatever the
        # name, so a name with slashes (a scripted/<path> model) is replaced by a path-safe one.
        self.model = model if "/" not in model else "run-model"
        self.contents: list[Any] = [types.Content(role="user", parts=[types.Part.from_text(text=user)])]
        decls = [
            types.FunctionDeclaration(
                name=t["name"], description=t["description"], parameters_json_schema=t["parameters"]
            )
            for t in tool_specs(options)
        ]
        cfg: dict[str, Any] = {
            "system_instruction": system,
            "tools": [types.Tool(function_declarations=decls)],
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        effort = options.get("reasoning_effort")
        if effort in REASONING_BUDGETS:
            cfg["thinking_config"] = types.ThinkingConfig(thinking_budget=REASONING_BUDGETS[effort])
        self.config = types.GenerateContentConfig(**cfg)

    def call(self, timeout: float) -> Turn:
        t = self.types
        cfg = self.config.model_copy(update={"http_options": t.HttpOptions(timeout=int(timeout * 1000))})
        r = self.client.models.generate_content(model=self.model, contents=self.contents, config=cfg)
        cand = r.candidates[0] if r.candidates else None
        reason = str(
            getattr(cand, "finish_reason", None) or getattr(getattr(r, "prompt_feedback", None), "block_reason", None)
        )
        turn = Turn(
            stop_reason=reason, refusal=cand is None or any(k in reason for k in ("SAFETY", "PROHIBITED", "BLOCK"))
        )
        um = r.usage_metadata
        if um:
            turn.usage = {
                "input_tokens": um.prompt_token_count or 0,
                "output_tokens": um.candidates_token_count or 0,
                "cached_input_tokens": um.cached_content_token_count or 0,
                "reasoning_tokens": um.thoughts_token_count or 0,
            }
        if cand is not None and cand.content is not None:
            answer = Message("assistant")
            reader = PartReader(answer)
            for part in cand.content.parts or []:
                reader.feed(_part(part))
            turn.reasoning = answer.reasoning
        if turn.refusal or cand is None or cand.content is None:
            return turn
        self.contents.append(cand.content)
        texts = []
        for i, part in enumerate(cand.content.parts or []):
            if part.function_call:
                fc = part.function_call
                turn.tool_calls.append(
                    ToolCall(fc.id or f"call_{len(self.contents)}_{i}", fc.name, dict(fc.args or {}))
                )
            elif part.text and not part.thought:
                texts.append(part.text)
        turn.text = "\n".join(texts)
        return turn

    def _user_parts(self) -> list[Any]:
        if self.contents[-1].role != "user":
            self.contents.append(self.types.Content(role="user", parts=[]))
        return self.contents[-1].parts

    def add_tool_results(self, results: list[ToolResult]) -> None:
        parts = self._user_parts()
        for r in results:
            fr = self.types.FunctionResponse(
                id=r.call.id if not r.call.id.startswith("call_") else None,
                name=r.call.name,
                response={"output": r.output},
            )
            parts.append(self.types.Part(function_response=fr))

    def add_user(self, text: str) -> None:
        self._user_parts().append(self.types.Part.from_text(text=text))
