"""The internals protocol: paths, request shapes and errors (documented in docs/internals.md).

Every operation is one JSON request and one JSON response over HTTP:

    GET  /v1/internals/info              what the server holds: layers, hidden size, SAE, oracle
    POST /v1/internals/generate          text, optionally steered
    POST /v1/internals/steering_vectors  build (and keep, by name) a vector from contrastive pairs
    POST /v1/internals/logit_lens        per layer and position: top tokens and KL to the final layer
    POST /v1/internals/sae_features      per position: the SAE's top features
    POST /v1/internals/oracle            per position: the activation oracle's answers to a question

An *input* is a raw prompt, `{"prompt": "text"}`, tokenized as it is, or a chat,
`{"messages": [{"role", "content"}...]}`, rendered with the model's chat template (a generation
prompt is added unless the last message is the assistant's, which is then continued; both can be
set with `add_generation_prompt` and `continue_final_message`). The analyses answer with the
input's `tokens` and `system_end`: the first position after a chat's system prompt (0 without one).
`positions` selects what is analysed: a list of positions, or "after_system" (default: all).

A failed request is a 4xx/5xx with `{"error": {"type": ..., "message": ...}}`. Every successful
answer carries `usage` ({input_tokens, output_tokens}), `compute_s` (model time of the batch that
computed it), `queue_s` (time waiting for it) and `batch_size`.

This module is plain Python (no torch): the client, the reference server and the fake share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VERSION = 1
PREFIX = "/v1/internals"
PATHS = {
    "info": f"{PREFIX}/info",
    "generate": f"{PREFIX}/generate",
    "steering_vector": f"{PREFIX}/steering_vectors",
    "logit_lens": f"{PREFIX}/logit_lens",
    "sae_features": f"{PREFIX}/sae_features",
    "oracle": f"{PREFIX}/oracle",
}
ERROR_STATUS = {
    "bad_request": 400,
    "unknown_vector": 404,  # a steering vector by a name the server does not hold (rebuild it)
    "no_sae": 409,  # the server runs without --sae, or with an SAE of another layer
    "no_oracle": 409,
    "overloaded": 503,  # the queue is full: retry later
    "internal": 500,
}
MAX_TOP_K = 1000
MAX_SAMPLES = 32


class ProtocolError(Exception):
    """A request the server cannot serve; `kind` is the error type of the body."""

    def __init__(self, message: str, kind: str = "bad_request") -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def status(self) -> int:
        return ERROR_STATUS.get(self.kind, 400)

    def body(self) -> dict[str, Any]:
        return error_body(self.kind, str(self))


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message}}


@dataclass(frozen=True)
class Input:
    """A raw prompt or a chat (exactly one of the two)."""

    prompt: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.prompt is not None:
            return {"prompt": self.prompt}
        return {
            "messages": [{"role": r, "content": c} for r, c in self.messages or ()],
            "add_generation_prompt": self.add_generation_prompt,
            "continue_final_message": self.continue_final_message,
        }

    @property
    def system(self) -> str | None:
        if self.messages and self.messages[0][0] == "system":
            return self.messages[0][1]
        return None


def chat(messages: list[dict[str, str]], *, system: str | None = None) -> Input:
    """A chat input; the last message decides between a generation prompt and a continuation."""
    turns = ([("system", system)] if system else []) + [(m["role"], m["content"]) for m in messages]
    cont = bool(turns) and turns[-1][0] == "assistant"
    return Input(messages=tuple(turns), add_generation_prompt=not cont, continue_final_message=cont)


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI-style content parts
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")]
        if all(isinstance(p, str) for p in parts):
            return "".join(str(p) for p in parts)
    raise ProtocolError(f"{where}: content must be a string or a list of text parts")


def parse_input(obj: Any, where: str = "request") -> Input:
    if not isinstance(obj, dict):
        raise ProtocolError(f"{where}: expected an object with `prompt` or `messages`")
    prompt, messages = obj.get("prompt"), obj.get("messages")
    if (prompt is None) == (messages is None):
        raise ProtocolError(f"{where}: give exactly one of `prompt` (raw text) and `messages` (a chat)")
    if prompt is not None:
        if not isinstance(prompt, str) or not prompt:
            raise ProtocolError(f"{where}: `prompt` must be a non-empty string")
        return Input(prompt=prompt)
    if not isinstance(messages, list) or not messages:
        raise ProtocolError(f"{where}: `messages` must be a non-empty list of {{role, content}}")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise ProtocolError(f"{where}: messages[{i}] needs a role of system, user or assistant")
        turns.append((str(m["role"]), _text(m.get("content"), f"{where}: messages[{i}]")))
    last_assistant = turns[-1][0] == "assistant"
    cont = _bool(obj, "continue_final_message", last_assistant, where)
    gen = _bool(obj, "add_generation_prompt", not cont, where)
    if cont and gen:
        raise ProtocolError(f"{where}: continue_final_message and add_generation_prompt exclude each other")
    return Input(messages=tuple(turns), add_generation_prompt=gen, continue_final_message=cont)


def _bool(obj: dict[str, Any], key: str, default: bool, where: str) -> bool:
    v = obj.get(key, default)
    if not isinstance(v, bool):
        raise ProtocolError(f"{where}: `{key}` must be true or false")
    return v


def integer(obj: dict[str, Any], key: str, default: int | None, lo: int, hi: int | None = None) -> int:
    v = obj.get(key, default)
    if v is None or isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        bound = f" and <= {hi}" if hi is not None else ""
        raise ProtocolError(f"`{key}` must be an integer >= {lo}{bound}, got {v!r}")
    return v


def number(obj: dict[str, Any], key: str, default: float | None, lo: float | None = None) -> float | None:
    v = obj.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (lo is not None and v < lo):
        raise ProtocolError(f"`{key}` must be a number{f' >= {lo}' if lo is not None else ''}, got {v!r}")
    return float(v)


def positions(obj: dict[str, Any]) -> list[int] | str | None:
    """None (every position), "after_system", or a list of positions (checked against the input later)."""
    v = obj.get("positions")
    if v is None or v == "after_system":
        return v
    if isinstance(v, list) and v and all(isinstance(p, int) and not isinstance(p, bool) for p in v):
        return list(v)
    raise ProtocolError('`positions` must be a non-empty list of integers or "after_system"')


@dataclass(frozen=True)
class Steering:
    """Add `coefficient` x the vector to the output of decoder layer `layer` at every position."""

    vector: str | tuple[float, ...]  # a name the server holds, or the values
    layer: int
    coefficient: float

    def to_json(self) -> dict[str, Any]:
        vec = self.vector if isinstance(self.vector, str) else list(self.vector)
        return {"vector": vec, "layer": self.layer, "coefficient": self.coefficient}


def parse_steering(obj: Any) -> Steering | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise ProtocolError("`steering` must be an object {vector, layer, coefficient}")
    vec = obj.get("vector")
    if isinstance(vec, list) and vec and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vec):
        vector: str | tuple[float, ...] = tuple(float(x) for x in vec)
    elif isinstance(vec, str) and vec:
        vector = vec
    else:
        raise ProtocolError("`steering.vector` must be a vector's name or a non-empty list of numbers")
    coefficient = number(obj, "coefficient", None)
    if coefficient is None:
        raise ProtocolError("`steering.coefficient` is required")
    return Steering(vector, integer(obj, "layer", None, 0), coefficient)


@dataclass(frozen=True)
class Sampling:
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None


def parse_sampling(obj: dict[str, Any], max_tokens: int = 256, temperature: float = 1.0) -> Sampling:
    top_p = number(obj, "top_p", 1.0, 0.0)
    if top_p is None or not 0 < top_p <= 1:
        raise ProtocolError(f"`top_p` must be in (0, 1], got {obj.get('top_p')!r}")
    seed = obj.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ProtocolError(f"`seed` must be a non-negative integer, got {seed!r}")
    return Sampling(
        max_tokens=integer(obj, "max_tokens", max_tokens, 1),
        temperature=number(obj, "temperature", temperature, 0.0) or 0.0,
        top_p=top_p,
        seed=seed,
    )


def parse_pairs(obj: Any) -> list[tuple[Input, Input]]:
    if not isinstance(obj, list) or not obj:
        raise ProtocolError("`pairs` must be a non-empty list of {positive, negative} inputs")
    out = []
    for i, p in enumerate(obj):
        if not isinstance(p, dict):
            raise ProtocolError(f"pairs[{i}] must be an object with `positive` and `negative`")
        out.append(
            (
                parse_input(p.get("positive"), f"pairs[{i}].positive"),
                parse_input(p.get("negative"), f"pairs[{i}].negative"),
            )
        )
    return out
