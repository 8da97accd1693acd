"""`Wire`: what one wire API module provides. Each of anthropic.py, responses.py, chat.py and
gemini.py subclasses it once (`WIRE`); benchctl.gateway.wire lists them. A method's default here is
what most wire APIs do (the model and `stream` in the JSON body, no token counting, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchctl.gateway.wire.neutral import (
    Message,
    Reply,
    Request,
    ResponseSummary,
    ToolCall,
    ToolDef,
    Turn,
    WireApi,
)


@dataclass(frozen=True)
class RequestInfo:
    """What the gateway needs to know of a request before it forwards it."""

    model: str | None  # the model the client asked for
    stream: bool
    counts_tokens: bool = False  # a token-count request, not a generation


class Wire:
    names: tuple[WireApi, ...] = ()  # the wire_api values this module serves (the first: generation)
    list_key = ""  # the request field that holds the conversation (the recorder stores it as deltas)
    # the provider whose API answers this wire's token-count requests itself; for any other (and
    # when None) the gateway answers them with an estimate
    token_count_provider: str | None = None
    cut_off_reasons: frozenset[str] = frozenset()  # stop reasons that mean "cut off at the token limit"
    tool_errors = False  # whether a tool result can say that the tool failed (Message.is_error)

    # ------------------------------------------------------------------ requests, routing

    def classify(self, method: str, path: str) -> WireApi | None:
        """The wire_api of a request line when it is this wire's, else None."""
        raise NotImplementedError

    def request_info(self, path: str, body: dict[str, Any]) -> RequestInfo:
        model = body.get("model")
        return RequestInfo(str(model) if model else None, body.get("stream") is True)

    def address(self, path: str, body: dict[str, Any], model: str) -> str:
        """Make the request one for `model` (the served model's name); the path to send it to."""
        body["model"] = model
        return path

    def prepare_stream(self, body: dict[str, Any]) -> bool:
        """Make a stream request ask for what the record needs; True when the client must not see
        what that adds (benchctl.gateway.wire.chat_usage)."""
        return False

    def token_count_body(self, tokens: int) -> bytes:
        raise NotImplementedError(f"{self.names[0]} has no token-count requests")

    def build_request(
        self,
        model: str,
        messages: list[Turn],
        system: str | None,
        max_tokens: int,
        temperature: float | None,
        top_p: float | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """(path, body) of a plain non-streaming request: (role, text blocks) messages, role user |
        assistant; a block marked `cache` ends a prefix meant for the prompt cache (neutral.TextBlock)."""
        raise NotImplementedError

    def without_system(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request body without its system prompt."""
        return dict(body)

    # ------------------------------------------------------------------ reading requests

    def read_items(self, items: list[Any]) -> list[list[Message]]:
        """One list of neutral messages per wire message (a wire message may hold several, e.g. an
        Anthropic user turn with two tool results and a text block becomes tool, tool, user)."""
        raise NotImplementedError

    def read_system(self, fields: dict[str, Any]) -> Message | None:
        """The request's top-level system prompt, when the wire API has one beside its messages."""
        return None

    def read_tools(self, fields: dict[str, Any]) -> list[ToolDef]:
        raise NotImplementedError

    def read_request(self, body: dict[str, Any]) -> Request:
        items = body.get(self.list_key)
        per = self.read_items(items if isinstance(items, list) else [])
        return Request(self.read_system(body), [m for ms in per for m in ms], self.read_tools(body))

    def rebuild_assistant(self, response: dict[str, Any]) -> Any:
        """The assistant message a client echoes back for a recorded `response`, when derivable
        (the request recorder stores an echo as a reference); None when not."""
        return None

    # ------------------------------------------------------------------ answers

    def summarize(self, stream: bool, body: bytes, s: ResponseSummary) -> None:
        """Read an answer (status < 400) into `s`; may raise on bytes that do not parse."""
        raise NotImplementedError

    def encode(self, reply: Reply, stream: bool, body: dict[str, Any], query: str) -> tuple[str, list[bytes]]:
        """(content type, body pieces) of `reply` answering the request `body` (`query`: its query
        string); one piece when not streaming, else one SSE event each, so a caller can pace them."""
        raise NotImplementedError

    def place_calls(self, calls: list[ToolCall], body: dict[str, Any]) -> tuple[list[ToolCall], list[ToolCall]]:
        """The calls shaped as this wire calls the request's tools, and calls to make before them."""
        return calls, []

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        """The vendor's error JSON for an HTTP error `status`; error_type overrides the type the
        status implies (only for a caller that means that vendor's word)."""
        raise NotImplementedError

    def stream_error_event(self, message: str, status: int) -> bytes:
        """The in-stream error event a vendor sends when a 200 stream fails midway."""
        raise NotImplementedError
