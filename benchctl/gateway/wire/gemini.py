"""Gemini: POST /v1beta/models/{model}:generateContent | :streamGenerateContent | :countTokens.

The model is named in the path, not the body; a stream is chosen by the path too, and comes as
`data:` lines with CRLF endings (alt=sse) or as one JSON array written element by element. A
conversation is `contents` of parts: text (`thought: true` for reasoning), functionCall,
functionResponse. Usage reports the whole prompt with the cached part broken out, and thoughts
apart from candidates (neutral output_tokens include them). Function calls carry an id only when
the model gave one.

Reasoning: a part with `"thought": true` is a reasoning block (consecutive thought parts, as a
stream splits one, make one block until a part carries a `thoughtSignature`); the signature, base64
as sent, is the block's. A `thoughtSignature` on another part stays with that part's record: a
functionCall's goes into its tool call (`signature`), a text part's becomes a block of its own
{text "", redacted, signature} where the part was. The google-genai SDK checks that a signature is
base64, and sends the same bytes back in base64's URL-safe alphabet (which the API accepts).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from benchctl.gateway.wire.base import RequestInfo, Wire
from benchctl.gateway.wire.neutral import (
    Message,
    Part,
    Reply,
    ResponseSummary,
    ToolDef,
    Turn,
    Usage,
    WireApi,
    joined,
    reasoning,
    text_parts,
    tool_call,
)
from benchctl.gateway.wire.sse import dumps, error_message, json_events, new_id, new_signature, split_text

PATH = re.compile(r"^/(v1beta|v1|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$")
# Finish reasons / block reasons that mean "the model (or its filter) refused".
REFUSAL_REASONS = {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "OTHER"}
FINISH_REASONS = {
    "end_turn": "STOP",
    "tool_use": "STOP",
    "max_tokens": "MAX_TOKENS",
    "refusal": "SAFETY",
    "stop_sequence": "STOP",
}
# google.rpc.Code names by HTTP status, as Google APIs put them in error.status. 413 and 415 have
# no canonical code: the request itself is unacceptable, which is INVALID_ARGUMENT; 502 and 529
# (overloaded) are a service that cannot answer now: UNAVAILABLE.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}


class GeminiWire(Wire):
    names: tuple[WireApi, ...] = ("gemini",)
    list_key = "contents"
    cut_off_reasons = frozenset({"MAX_TOKENS"})
    tool_errors = True  # a functionResponse with `error`

    def classify(self, method: str, path: str) -> WireApi | None:
        return "gemini" if method == "POST" and PATH.match(path) else None

    def request_info(self, path: str, body: dict[str, Any]) -> RequestInfo:
        m = PATH.match(path)
        if m is None:
            return RequestInfo(None, False)
        return RequestInfo(m.group(2), m.group(3) == "streamGenerateContent", m.group(3) == "countTokens")

    def address(self, path: str, body: dict[str, Any], model: str) -> str:
        m = PATH.match(path)
        return f"/{m.group(1)}/models/{model}:{m.group(3)}" if m else path

    def token_count_body(self, tokens: int) -> bytes:
        return dumps({"totalTokens": tokens})

    def build_request(
        self,
        model: str,
        messages: list[Turn],
        system: str | None,
        max_tokens: int,
        temperature: float | None,
        top_p: float | None = None,
    ) -> tuple[str, dict[str, Any]]:
        config: dict[str, Any] = {"maxOutputTokens": max_tokens}
        if temperature is not None:
            config["temperature"] = temperature
        if top_p is not None:
            config["topP"] = top_p
        # the text contiguous: Gemini caches a repeated prefix implicitly (2.5 models and later)
        contents = [
            {"role": "model" if role == "assistant" else "user", "parts": [{"text": joined(blocks)}]}
            for role, blocks in messages
        ]
        body: dict[str, Any] = {"contents": contents, "generationConfig": config}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        return f"/v1beta/models/{model}:generateContent", body

    def without_system(self, body: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k not in ("systemInstruction", "system_instruction")}

    # ------------------------------------------------------------------ reading requests

    def read_items(self, items: list[Any]) -> list[list[Message]]:
        return [_content(m) if isinstance(m, dict) else [Message("user", text_parts(m))] for m in items]

    def read_system(self, fields: dict[str, Any]) -> Message | None:
        value = fields.get("systemInstruction") or fields.get("system_instruction") or {}
        parts = text_parts(value.get("parts") if isinstance(value, dict) else value)
        return Message("system", parts) if parts else None

    def read_tools(self, fields: dict[str, Any]) -> list[ToolDef]:
        out: list[ToolDef] = []
        for t in fields.get("tools") or []:
            if not isinstance(t, dict):
                continue
            for decl in t.get("functionDeclarations") or t.get("function_declarations") or []:
                if isinstance(decl, dict) and decl.get("name"):
                    params = decl.get("parameters") or decl.get("parametersJsonSchema") or {}
                    out.append(ToolDef(str(decl["name"]), str(decl.get("description") or ""), params))
        return out

    # ------------------------------------------------------------------ answers

    def summarize(self, stream: bool, body: bytes, s: ResponseSummary) -> None:
        if stream:
            chunks = [ev for _event, ev in json_events(body, s, names=False)]
        else:
            obj = orjson.loads(body)
            chunks = obj if isinstance(obj, list) else [obj]
        answer = Message("assistant")
        reader = PartReader(answer)
        for chunk in chunks:
            _read_chunk(chunk, s, reader)
        s.text = "".join(p.text for p in answer.parts if p.type == "text")
        s.reasoning = answer.reasoning
        for c in answer.tool_calls:
            call: dict[str, Any] = {"id": c.id or None, "name": c.name, "input": c.input}
            if c.signature:
                call["signature"] = c.signature
            s.tool_calls.append(call)

    def encode(self, reply: Reply, stream: bool, body: dict[str, Any], query: str) -> tuple[str, list[bytes]]:
        if not stream:
            return "application/json", [_json(reply)]
        bodies = _stream_chunks(reply)
        if "alt=sse" in query:
            return "text/event-stream", [b"data: " + dumps(b) + b"\r\n\r\n" for b in bodies]
        # without alt=sse: one JSON array, written element by element
        return "application/json", [(b"[" if i == 0 else b",\r\n") + dumps(b) for i, b in enumerate(bodies)] + [b"]"]

    def error_body(self, status: int, message: str, error_type: str | None = None) -> bytes:
        return dumps({"error": _error(status, message, error_type)})

    def stream_error_event(self, message: str, status: int) -> bytes:
        return b"data: " + dumps({"error": _error(status, message)}) + b"\r\n\r\n"  # CRLF, as in its streams


WIRE = GeminiWire()


def _error(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    return {"code": status, "message": message, "status": error_type or STATUS_NAMES.get(status, "UNKNOWN")}


# ---------------------------------------------------------------- requests


def _content(content: dict[str, Any]) -> list[Message]:
    """A Gemini content. Function calls and responses carry an id only when the model gave one;
    an id-less response answers the preceding model turn's call of its name (in order), which
    `benchctl.export.events` resolves, so neither is given a made-up id here."""
    parts = content.get("parts") or []
    if content.get("role") == "model":
        out = Message("assistant")
        reader = PartReader(out)
        for p in parts:
            reader.feed(p)
        return [out]
    messages: list[Message] = []
    user = Message("user")
    for p in parts:
        if isinstance(p, dict) and "functionResponse" in p:
            fr = p["functionResponse"] or {}
            text, is_error = _function_response(fr.get("response"))
            messages.append(
                Message(
                    "tool",
                    [Part("text", text)],
                    tool_call_id=str(fr["id"]) if fr.get("id") else None,
                    tool_name=fr.get("name"),
                    is_error=is_error,
                )
            )
        else:
            user.parts.extend(text_parts(p))
    if user.parts or not messages:
        messages.append(user)
    return messages


def _function_response(resp: Any) -> tuple[str, bool]:
    """A function response's text and whether it reports an error. Gemini documents `output` and
    `error` keys (the SDK also sends `result`, older clients `content`): the model is given the value
    under the key, as inspect-ai's own converter reads it; any other shape is kept whole as JSON."""
    if isinstance(resp, dict):
        key = next((k for k in ("output", "result", "content") if resp.get(k) is not None), None)
        error = resp.get("error")
        value = resp[key] if key is not None else error if error else resp
        return (value if isinstance(value, str) else orjson.dumps(value).decode()), bool(error)
    return (resp if isinstance(resp, str) else orjson.dumps(resp).decode()), False


class PartReader:
    """Reads a model turn's parts, in order (a whole answer's, or a stream's chunk by chunk), into
    an assistant message: text parts, reasoning blocks and tool calls (see the module docstring)."""

    def __init__(self, into: Message) -> None:
        self.message = into
        self._thought: Part | None = None  # the reasoning block thought parts add to

    def feed(self, part: Any) -> None:
        if not isinstance(part, dict):
            self.message.parts.extend(text_parts(part))
            return
        sig = part.get("thoughtSignature") or part.get("thought_signature")
        sig = sig if isinstance(sig, str) else None
        if part.get("thought"):
            if self._thought is None or self._thought.signature:  # a signature ends its block
                self._thought = reasoning()
                self.message.parts.append(self._thought)
            self._thought.text += str(part.get("text") or "")
            self._thought.signature = sig or self._thought.signature
            return
        self._thought = None
        if "functionCall" in part:
            fc = part["functionCall"] or {}
            self.message.tool_calls.append(tool_call(fc.get("id"), fc.get("name"), fc.get("args"), signature=sig))
            return
        if sig:
            self.message.parts.append(reasoning("", redacted=True, signature=sig))
        if isinstance(part.get("text"), str):
            if part["text"] or not sig:
                self.message.parts.append(Part("text", part["text"]))
        elif not sig or set(part) - {"thoughtSignature", "thought_signature"}:
            self.message.parts.extend(text_parts(part))  # an image, a file, ...: kept as recorded


# ---------------------------------------------------------------- reading answers


def _read_chunk(obj: dict[str, Any], s: ResponseSummary, reader: PartReader) -> None:
    s.served_model = obj.get("modelVersion") or s.served_model
    block = (obj.get("promptFeedback") or {}).get("blockReason")
    if block:
        s.refusal, s.stop_reason = True, block
    for cand in (obj.get("candidates") or [])[:1]:
        for part in (cand.get("content") or {}).get("parts") or []:
            reader.feed(part)
        if cand.get("finishReason"):
            s.stop_reason = cand["finishReason"]
            if cand["finishReason"] in REFUSAL_REASONS:
                s.refusal = True
    u = obj.get("usageMetadata")
    if u:
        cached = u.get("cachedContentTokenCount") or 0
        s.usage["input_tokens"] = (u.get("promptTokenCount") or 0) - cached
        s.usage["cached_input_tokens"] = cached
        thoughts = u.get("thoughtsTokenCount") or 0
        s.usage["output_tokens"] = (u.get("candidatesTokenCount") or 0) + thoughts
        s.usage["reasoning_tokens"] = thoughts
        # Streamed chunks carry running counts: the one with the finish reason has the final count.
        s.usage_final = any(c.get("finishReason") for c in obj.get("candidates") or []) or bool(block)
    if "error" in obj:
        s.error = error_message(obj)


# ---------------------------------------------------------------- encoding answers


def _wire_usage(u: Usage) -> dict[str, Any]:
    prompt = u.input_tokens + u.cached_input_tokens
    # Gemini counts thoughts apart from candidates; neutral output_tokens include reasoning.
    out: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": max(0, u.output_tokens - u.reasoning_tokens),
        "totalTokenCount": prompt + u.output_tokens,
    }
    if u.cached_input_tokens:
        out["cachedContentTokenCount"] = u.cached_input_tokens
    if u.reasoning_tokens:
        out["thoughtsTokenCount"] = u.reasoning_tokens
    return out


def _chunk(reply: Reply, rid: str, parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    cand: dict[str, Any] = {"index": 0}
    if parts:
        cand["content"] = {"parts": parts, "role": "model"}
    if finish:
        cand["finishReason"] = finish
    if finish == "SAFETY":
        cand["safetyRatings"] = [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}
        ]
    return {
        "candidates": [cand],
        "usageMetadata": _wire_usage(reply.usage),
        "modelVersion": reply.model,
        "responseId": rid,
    }


def _calls(reply: Reply) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for tc in reply.tool_calls:
        part: dict[str, Any] = {
            "functionCall": {"id": tc.id or new_id("call_"), "name": tc.flat_name, "args": tc.arguments}
        }
        if tc.signature:
            part["thoughtSignature"] = tc.signature
        calls.append(part)
    return calls


def _thought_parts(p: Part, size: int) -> list[dict[str, Any]]:
    """A reasoning block as parts (its text in pieces of `size`; whole when 0), the signature on the
    last; a redacted block is an empty text part with its signature. A missing signature is made up."""
    sig = p.signature or new_signature()
    if p.redacted:
        return [{"text": "", "thoughtSignature": sig}]
    parts: list[dict[str, Any]] = [
        {"text": t, "thought": True} for t in (split_text(p.text, size) if size else [p.text])
    ]
    parts = parts or [{"text": "", "thought": True}]
    parts[-1]["thoughtSignature"] = sig
    return parts


def _json(reply: Reply) -> bytes:
    parts: list[dict[str, Any]] = []
    if not reply.refusal:  # a safety block carries no content, as the API does
        parts = [part for p in reply.reasoning for part in _thought_parts(p, 0)]
        parts += [{"text": reply.text}] if reply.text else []
        parts += _calls(reply)
    return dumps(_chunk(reply, new_id("", 22), parts, FINISH_REASONS[reply.effective_stop]))


def _stream_chunks(reply: Reply) -> list[dict[str, Any]]:
    rid = new_id("", 22)
    texts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    if not reply.refusal:
        texts = [part for p in reply.reasoning for part in _thought_parts(p, reply.chunk_chars)]
        texts += [{"text": t} for t in split_text(reply.text, reply.chunk_chars)]
        calls = _calls(reply)
    bodies = [_chunk(reply, rid, [t], None) for t in texts]
    # Gemini sends function calls whole, in the last chunk, together with the finish reason.
    bodies.append(_chunk(reply, rid, calls, FINISH_REASONS[reply.effective_stop]))
    return bodies
