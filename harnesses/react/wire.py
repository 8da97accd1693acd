"""One conversation per wire API: the ReAct loop speaks to any provider through this seam.

Anthropic Messages (anthropic/ and scripted/ models: anthropic.py), OpenAI Responses (openai/:
responses.py), chat completions (openai-compatible/: chat.py) and Gemini (google/: gemini.py).
Each keeps its own history in its native shape (so thinking signatures, reasoning items and
thought signatures go back as they came) and turns a response into a neutral `Turn`
(conversation.py), its reasoning included. All calls go to the run's gateway through the SDK
clients from `benchctl.gateway.clients`; the gateway owns retries, so the SDKs never retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harnesses.react.anthropic import AnthropicConversation
from harnesses.react.chat import ChatConversation
from harnesses.react.conversation import Conversation
from harnesses.react.gemini import GeminiConversation
from harnesses.react.responses import ResponsesConversation


def wire_for(provider: str) -> str:
    return {
        "anthropic": "anthropic",
        "scripted": "anthropic",
        "openai": "responses",
        "openai-compatible": "chat",
        "google": "gemini",
    }[provider]


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
