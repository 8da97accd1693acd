"""The neutral shape every wire API is read into and written from.

A request is read into `Message`s (system / user / assistant / tool, each a list of `Part`s plus
tool calls); an answer is encoded from a `Reply` and read back into a `ResponseSummary`. Scripted
models, the gateway's record, exports, the hook ledger and the CLI tool-output join all use these
types, so none of them knows a wire API's spelling.

A reasoning block is a `Part` of type "reasoning" (its record: `Part.record`, documented with the
transcript schema):

    {"type": "reasoning", "text": "...", "summary": false, "redacted": false, "signature": null, "id": "rs_..."}

`text` is the visible reasoning ("" when none is visible); `summary` says it is the vendor's summary
of hidden reasoning; `redacted` that the reasoning exists but its content was withheld; `signature`
is the opaque string the vendor needs back byte for byte (Anthropic signature or redacted data,
Responses encrypted_content, Gemini thoughtSignature); `id` the vendor's id of the item, when it has one.

Usage counts (`Usage`, `USAGE_KEYS`) are normalized so costs compare across vendors:
  input_tokens         input NOT read from cache (Anthropic `input_tokens`; OpenAI input minus cached)
  cached_input_tokens  input read from the prompt cache
  cache_write_tokens   input written to the cache (Anthropic `cache_creation_input_tokens`)
  output_tokens        all output, reasoning included (as every vendor bills it)
  reasoning_tokens     the reasoning part of output_tokens (informational, not billed twice)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

import orjson

WireApi = Literal[
    "anthropic_messages",  # POST /v1/messages
    "anthropic_count_tokens",  # POST /v1/messages/count_tokens
    "openai_responses",  # POST /v1/responses
    "openai_chat",  # POST /v1/chat/completions
    "gemini",  # POST /v1beta/models/{m}:generateContent | :streamGenerateContent | :countTokens
    "models_list",  # GET /v1/models
    "other",  # anything else: passed through or answered, and recorded
]
Role = Literal["system", "user", "assistant", "tool"]
STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "refusal", "stop_sequence")


@dataclass(slots=True)
class Part:
    """A piece of a message: text, a reasoning block, or a block with no neutral equivalent (an
    image, a server tool result), kept as recorded in `data`. The reasoning fields (summary,
    redacted, signature, id) mean something only for type "reasoning"."""

    type: Literal["text", "reasoning", "data"]
    text: str = ""
    data: dict[str, Any] | None = None
    summary: bool = False
    redacted: bool = False
    signature: str | None = None
    id: str | None = None

    def record(self) -> dict[str, Any]:
        """A reasoning block as the transcript records it (`id` only when there is one)."""
        out: dict[str, Any] = {
            "type": "reasoning",
            "text": self.text,
            "summary": self.summary,
            "redacted": self.redacted,
            "signature": self.signature,
        }
        if self.id:
            out["id"] = self.id
        return out


def reasoning(
    text: str = "",
    *,
    summary: bool = False,
    redacted: bool = False,
    signature: str | None = None,
    id: str | None = None,
) -> Part:
    return Part("reasoning", text, None, summary, redacted, signature, id)


def reasoning_from_record(block: dict[str, Any]) -> Part:
    """A reasoning block read back from its record (`Part.record`)."""
    sig = block.get("signature")
    return reasoning(
        str(block.get("text") or ""),
        summary=bool(block.get("summary")),
        redacted=bool(block.get("redacted")),
        signature=sig if isinstance(sig, str) else None,
        id=str(block["id"]) if block.get("id") else None,
    )


@dataclass(slots=True)
class ToolCall:
    """A tool call. `input` is an object (dict) for a function call; anything else is a free-form
    input as given (a string: a Responses `custom_tool_call` such as Codex's apply_patch, or
    arguments that did not parse). APIs without free-form tools get a string as {"input": "..."}."""

    id: str
    name: str
    input: Any
    # Responses only: the `namespace` tool that holds `name` (Codex offers each MCP server as one,
    # e.g. mcp__target; other APIs get the flat name `<namespace>__<name>`), and the kind of call:
    # "tool_search" is a client-executed tool search (a `tool_search_call` item, `arguments` = input).
    namespace: str = ""
    kind: Literal["function", "tool_search"] = "function"
    signature: str | None = None  # Gemini: the thoughtSignature on the functionCall part

    @property
    def is_custom(self) -> bool:
        return isinstance(self.input, str)

    @property
    def flat_name(self) -> str:
        return f"{self.namespace}__{self.name}" if self.namespace else self.name

    @property
    def arguments(self) -> dict[str, Any]:
        """The input as an object: a free-form input becomes {"input": ...}."""
        return self.input if isinstance(self.input, dict) else {"input": self.input}

    @property
    def raw(self) -> Any:
        """The input when it is not an object (a free-form input), else None."""
        return None if isinstance(self.input, dict) else self.input

    def arguments_json(self) -> str:
        # Compact, key order preserved: what the caller put in the script is what it gets.
        return orjson.dumps(self.arguments).decode()


def tool_call(id: Any, name: Any, value: Any, **extra: Any) -> ToolCall:
    """A tool call whose input may be an object, a JSON string, free text or missing."""
    ident, fname = str(id or ""), str(name or "")
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value) if value.strip() else {}
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return ToolCall(ident, fname, parsed, **extra)
    if value is None:
        return ToolCall(ident, fname, {}, **extra)
    return ToolCall(ident, fname, value, **extra)


@dataclass(slots=True)
class Message:
    role: Role
    parts: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # tool messages: the call answered
    tool_name: str | None = None
    is_error: bool = False  # tool messages: the result says it failed (Wire.tool_errors: when a wire can say so)
    developer: bool = False  # an OpenAI `developer` message (a system message; Codex sends hook context so)

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if p.type == "text")

    @property
    def output(self) -> str:
        """A tool message's text as the model received it: its text parts, any other part as `[type]`."""
        return "\n".join(p.text if p.type != "data" else f"[{(p.data or {}).get('type')}]" for p in self.parts)

    @property
    def reasoning(self) -> list[Part]:
        return [p for p in self.parts if p.type == "reasoning"]


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A piece of the text of a message that benchctl sends (`Wire.build_request`: judge and grader
    calls). A message's text is its blocks' texts joined with nothing between them, on every wire.

    `cache`: a prompt-cache breakpoint after this block. The request up to and including it (system
    prompt, earlier messages, earlier blocks) is a prefix that later requests repeat byte for byte, so
    a vendor may serve it from its prompt cache: the Anthropic wire marks the block with
    `cache_control`, the others send the text contiguous (they cache repeated prefixes themselves) and
    the Responses wire names the first cached prefix in `prompt_cache_key`."""

    text: str
    cache: bool = False


Turn = tuple[str, list[TextBlock]]  # (role user | assistant, its text blocks)
MAX_CACHE_BREAKPOINTS = 4  # Anthropic's limit per request; the others have no explicit breakpoints


def joined(blocks: list[TextBlock]) -> str:
    return "".join(b.text for b in blocks)


def cache_segments(blocks: list[TextBlock]) -> list[TextBlock]:
    """The blocks merged into one block per breakpoint and one for the rest, empty ones dropped (a
    vendor may refuse an empty text block; an empty segment's breakpoint is the one before it)."""
    out: list[TextBlock] = []
    run = ""
    for b in blocks:
        run += b.text
        if b.cache and run:
            out.append(TextBlock(run, True))
            run = ""
    if run or not out:
        out.append(TextBlock(run))
    return out


@dataclass(slots=True)
class ToolDef:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Request:
    """A request body read into the neutral shape."""

    system: Message | None
    messages: list[Message]
    tools: list[ToolDef]


def text_parts(content: Any) -> list[Part]:
    """Text content in any wire API's spelling: a string, or a list of text-ish blocks; any other
    block is kept as recorded in a `data` part."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Part("text", content)]
    if isinstance(content, dict):
        content = [content]
    parts: list[Part] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(Part("text", block))
        elif (
            isinstance(block, dict)
            and block.get("type") in ("text", "input_text", "output_text")
            and isinstance(block.get("text"), str)
        ):
            parts.append(Part("text", block["text"]))
        elif isinstance(block, dict) and block.get("type") == "refusal" and isinstance(block.get("refusal"), str):
            parts.append(Part("text", block["refusal"]))
        elif isinstance(block, dict) and set(block) <= {"text", "thought"} and isinstance(block.get("text"), str):
            parts.append(Part("reasoning" if block.get("thought") else "text", block["text"]))
        else:
            parts.append(Part("data", data=block if isinstance(block, dict) else {"value": block}))
    return parts


# ---------------------------------------------------------------- answers


@dataclass
class Usage:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


USAGE_KEYS = tuple(f.name for f in fields(Usage))


def empty_usage() -> dict[str, int]:
    return Usage().as_dict()


@dataclass
class Reply:
    """A model's answer to encode in some wire API (scripted models)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    refusal: bool = False
    stop_reason: str | None = None  # None: derived (refusal > tool_use > end_turn)
    usage: Usage = field(default_factory=Usage)
    model: str = "scripted"
    chunk_chars: int = 64  # text/argument piece size in streams
    reasoning: list[Part] = field(default_factory=list)  # reasoning blocks, before the answer

    @property
    def effective_stop(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        if self.refusal:
            return "refusal"
        return "tool_use" if self.tool_calls else "end_turn"


@dataclass
class ResponseSummary:
    """What an answer said, read from its bytes (see benchctl.gateway.wire.summarize)."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "input"} (input parsed when JSON)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    refusal: bool = False
    served_model: str | None = None
    error: str | None = None
    usage_final: bool = False  # the usage is the response's final count (see benchctl.gateway.wire)
    reasoning: list[Part] = field(default_factory=list)

    def response(self) -> dict[str, Any]:
        """The `response` of a `model_call` record: reasoning only when there is some."""
        out: dict[str, Any] = {"text": self.text, "tool_calls": self.tool_calls}
        if self.reasoning:
            out["reasoning"] = [p.record() for p in self.reasoning]
        return out
