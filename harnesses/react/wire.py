"""One conversation per wire API: the ReAct loop speaks to any provider through this seam.

Anthropic Messages (anthropic/ and scripted/ models), OpenAI Responses (openai/), chat
completions (openai-compatible/) and Gemini (google/). Each keeps its own history in its
native shape (so provider features like thinking signatures and reasoning items round-trip)
and turns a response into a neutral `Turn`. All calls go to the run's gateway through the SDK
clients from `benchctl.gateway.clients`; the gateway owns retries, so the SDKs never retry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchctl.gateway.wire.neutral import ToolCall
from harnesses.react.tools import TOOL_SPECS


def tool_specs(options: dict[str, Any]) -> list[dict[str, Any]]:
    """The sandbox tools plus any extra host-side tools (e.g. target tools) passed as option extra_tool_specs."""
    return TOOL_SPECS + list(options.get("extra_tool_specs") or [])


REASONING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}


@dataclass
class Turn:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None
    refusal: bool = False
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class ToolResult:
    call: ToolCall
    output: str
    is_error: bool = False


class Conversation(Protocol):
    def call(self, timeout: float) -> Turn: ...
    def add_tool_results(self, results: list[ToolResult]) -> None: ...
    def add_user(self, text: str) -> None: ...


def wire_for(provider: str) -> str:
    return {
        "anthropic": "anthropic",
        "scripted": "anthropic",
        "openai": "responses",
        "openai-compatible": "chat",
        "google": "gemini",
    }[provider]


def _clients() -> Any:
    from benchctl.gateway import clients  # imported late: only a real run needs the SDKs

    return clients


def _arguments(raw: str | None) -> Any:
    """A function call's JSON arguments (OpenAI wires send them as a string); kept as
    {"_unparsed": raw} when they are not JSON."""
    try:
        return json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_unparsed": raw}


def _dump(obj: Any) -> dict[str, Any]:
    return obj.model_dump(exclude_none=True, mode="json") if hasattr(obj, "model_dump") else dict(obj)


# ---- Anthropic Messages -----------------------------------------------------------------


class AnthropicConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        self.client = _clients().anthropic_client(gateway).with_options(max_retries=0)
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
        if turn.refusal:
            return turn  # not added to history: a fallback model retries the same turn
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


# ---- OpenAI Responses -------------------------------------------------------------------


class ResponsesConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        self.client = _clients().openai_client(gateway).with_options(max_retries=0)
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
            kw["include"] = ["reasoning.encrypted_content"]
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
            d = _dump(item)
            d.pop("status", None) if d.get("type") == "reasoning" else None
            if item.type == "message":
                for c in item.content:
                    if c.type == "refusal":
                        turn.refusal = True
                    elif c.type == "output_text":
                        texts.append(c.text)
            elif item.type == "function_call":
                turn.tool_calls.append(ToolCall(item.call_id, item.name, _arguments(item.arguments)))
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


# ---- chat completions (OpenAI-compatible endpoints) ----------------------------------------


class ChatConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        self.client = _clients().openai_client(gateway).with_options(max_retries=0)
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
            turn.usage = {
                "input_tokens": r.usage.prompt_tokens,
                "output_tokens": r.usage.completion_tokens,
                "cached_input_tokens": getattr(details, "cached_tokens", 0) or 0,
            }
        if turn.refusal:
            return turn
        turn.text = msg.content or ""
        stored: dict[str, Any] = {"role": "assistant", "content": msg.content}
        if msg.tool_calls:
            stored["tool_calls"] = []
            for tc in msg.tool_calls:
                turn.tool_calls.append(ToolCall(tc.id, tc.function.name, _arguments(tc.function.arguments)))
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


# ---- Gemini -------------------------------------------------------------------------------


class GeminiConversation:
    def __init__(self, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]) -> None:
        from google.genai import types

        self.types = types
        self.client = _clients().genai_client(gateway)
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


# each wire API's conversation class, called as (gateway, model, system, user, options)
CONVERSATIONS: dict[str, Callable[[Any, str, str, str, dict[str, Any]], Conversation]] = {
    "anthropic": AnthropicConversation,
    "responses": ResponsesConversation,
    "chat": ChatConversation,
    "gemini": GeminiConversation,
}


def open_conversation(
    provider: str, gateway: Any, model: str, system: str, user: str, options: dict[str, Any]
) -> Conversation:
    """The provider's native wire API; option `wire` (anthropic | responses | chat | gemini) overrides
    it, e.g. for a scripted model standing in for an OpenAI one, or a proxy speaking another API."""
    wire = options.get("wire") or wire_for(provider)
    if wire not in CONVERSATIONS:
        raise ValueError(f"harness option wire={wire!r}: use one of {', '.join(CONVERSATIONS)}")
    return CONVERSATIONS[wire](gateway, model, system, user, options)
