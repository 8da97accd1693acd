"""The wire APIs the gateway speaks, one module each, over one neutral shape (neutral.py).

    anthropic.py   Anthropic Messages      POST /v1/messages, /v1/messages/count_tokens
    responses.py   OpenAI Responses        POST /v1/responses (answers encoded in responses_encode.py)
    chat.py        OpenAI chat completions POST /v1/chat/completions (stream usage: chat_usage.py)
    gemini.py      Gemini                  POST /v1beta/models/{m}:generateContent | ...

Each module's `WIRE` (a `base.Wire`) owns everything about its API: which requests are its
(`classify`), how a request names its model and asks for a stream, reading a request into neutral
messages, reading an answer from its bytes (whole or streamed, `summarize`), encoding a neutral
`Reply` as the vendor's bytes (scripted models), and the vendor's error bytes. Adding a wire API
means one new module and one line in `WIRES`.

`summarize` reads an answer as the gateway records it: once a response is complete (or cut off),
what was said (text, tool calls, reasoning), what it cost (usage, see neutral.py), how it ended
(stop reason, refusal) and which model served it. `usage_final` says whether the response carried
its final usage (Anthropic message_delta or the whole message, the Responses terminal event, a
chat usage chunk, Gemini's last chunk); an answer cut off before that has only part of its usage,
so its cost is unknown. An error status counts as final: nothing was generated. A cut-off stream is
summarized as far as it got: text so far, and tool calls with their arguments as received (a string
when not yet valid JSON).
"""

from __future__ import annotations

from typing import Any

import orjson

from benchctl.gateway.wire import anthropic, chat, gemini, responses
from benchctl.gateway.wire.base import RequestInfo, Wire
from benchctl.gateway.wire.neutral import (
    USAGE_KEYS,
    Message,
    Part,
    Reply,
    Request,
    ResponseSummary,
    ToolCall,
    ToolDef,
    Usage,
    WireApi,
    empty_usage,
)
from benchctl.gateway.wire.responses import STREAM_UNFINISHED
from benchctl.gateway.wire.sse import error_headers, error_message

WIRES: tuple[Wire, ...] = (anthropic.WIRE, responses.WIRE, chat.WIRE, gemini.WIRE)
_BY_API: dict[str, Wire] = {api: w for w in WIRES for api in w.names}
GENERATION_APIS: tuple[WireApi, ...] = tuple(w.names[0] for w in WIRES)
CUT_OFF_REASONS: frozenset[str] = frozenset().union(*(w.cut_off_reasons for w in WIRES))

__all__ = [
    "CUT_OFF_REASONS",
    "GENERATION_APIS",
    "STREAM_UNFINISHED",
    "USAGE_KEYS",
    "WIRES",
    "Message",
    "Part",
    "Reply",
    "Request",
    "RequestInfo",
    "ResponseSummary",
    "ToolCall",
    "ToolDef",
    "Usage",
    "Wire",
    "WireApi",
    "classify",
    "empty_usage",
    "encode",
    "error_body",
    "error_headers",
    "find",
    "generation",
    "read_request",
    "stream_error_event",
    "summarize",
    "wire",
]


def classify(method: str, path: str) -> WireApi | None:
    """The wire API of a request line; None: not one the gateway serves."""
    for w in WIRES:
        if api := w.classify(method, path):
            return api
    if method == "GET" and (path == "/v1/models" or path.startswith("/v1/models/")):
        return "models_list"
    return None


def find(wire_api: str) -> Wire | None:
    """The module of a wire API (a generation or token-count one); None for models_list, other."""
    return _BY_API.get(wire_api)


def wire(wire_api: str) -> Wire:
    """The module of a wire API (a generation or token-count one)."""
    if (w := find(wire_api)) is None:
        raise ValueError(f"no wire module for {wire_api!r}; known: {', '.join(_BY_API)}")
    return w


def generation(wire_api: str) -> Wire | None:
    """The module of a generation wire API; None for any other (token counting, models_list, other)."""
    w = _BY_API.get(wire_api)
    return w if w is not None and w.names[0] == wire_api else None


def summarize(wire_api: str, stream: bool, body: bytes, status: int = 200) -> ResponseSummary:
    """What a response said. Never raises: unparseable input becomes `error`."""
    s = ResponseSummary(usage=empty_usage())
    try:
        if status >= 400:
            s.usage_final = True  # an error answer: nothing was generated
            try:
                s.error = f"HTTP {status}: {error_message(orjson.loads(body))}"
            except orjson.JSONDecodeError:
                s.error = f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}"
            return s
        if (w := generation(wire_api)) is not None:
            w.summarize(stream, body, s)
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as e:
        s.error = f"unparseable {wire_api} response: {type(e).__name__}: {str(e)[:200]}"
    return s


def encode(
    wire_api: str, reply: Reply, *, stream: bool, body: dict[str, Any], query: str = ""
) -> tuple[str, list[bytes]]:
    """(content type, body pieces) for `reply` in `wire_api`, answering the request `body`."""
    return wire(wire_api).encode(reply, stream, body, query)


def error_body(wire_api: str | None, status: int, message: str, error_type: str | None = None) -> bytes:
    """The vendor's error JSON for an HTTP error `status`. When nothing of the request says which
    vendor's client sent it (None: a head that did not parse, an unknown path, too many connections;
    the model list), it is the Anthropic shape: the one all three SDKs read a message from (each
    looks for error.message, and it is there). error_type overrides the type the status implies."""
    w = _BY_API.get(wire_api or "", anthropic.WIRE)
    return w.error_body(status, message, error_type)


def stream_error_event(wire_api: str, message: str, status: int = 529) -> bytes:
    """The in-stream error event a vendor sends when a 200 stream fails midway (e.g. overload), with
    the line endings of that vendor's stream."""
    return wire(wire_api).stream_error_event(message, status)


def read_request(wire_api: str, body: dict[str, Any]) -> Request:
    """A request body read into neutral messages (system prompt and tools apart)."""
    return wire(wire_api).read_request(body)
