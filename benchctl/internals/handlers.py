"""Request bodies -> runner calls -> response bodies, for every operation the reference server
answers (run on its worker thread; a ProtocolError becomes the error response)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from benchctl.internals import operations as ops
from benchctl.internals import protocol as p
from benchctl.internals.protocol import Input, ProtocolError
from benchctl.internals.runner import Generated, GenRow, Runner

MAX_TOKENS = 4096  # per request: a runaway max_tokens would hold the whole batch


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def _sampling(body: dict[str, Any], default_max: int = 256) -> p.Sampling:
    s = p.parse_sampling(body, default_max)
    if s.max_tokens > MAX_TOKENS:
        raise ProtocolError(f"`max_tokens` {s.max_tokens} is over this server's limit of {MAX_TOKENS}")
    return s


def _openai_input(r: Runner, kind: str, body: dict[str, Any]) -> Input:
    if kind == "completion":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ProtocolError("`prompt` must be one string (batches of prompts are not served)")
        return p.parse_input({"prompt": prompt})
    if body.get("stream"):
        raise ProtocolError("streaming is not served: send stream=false")
    return p.parse_input(
        {k: body[k] for k in ("messages", "continue_final_message", "add_generation_prompt") if k in body}
    )


def gen_row(r: Runner, kind: str, body: dict[str, Any]) -> GenRow:
    if kind == "generate":
        inp = p.parse_input(body)
        steering = r.steering(p.parse_steering(body.get("steering")))
    else:
        inp, steering = _openai_input(r, kind, body), []
        if body.get("n", 1) != 1:
            raise ProtocolError("`n` must be 1")
    ids, _ = r.target.tokenize(inp)
    return GenRow(ids, _sampling(body), steering)


def gen_response(r: Runner, kind: str, body: dict[str, Any], g: Generated) -> dict[str, Any]:
    if kind == "generate":
        return {
            "text": g.text,
            "finish_reason": g.finish_reason,
            "usage": {"input_tokens": g.input_tokens, "output_tokens": g.output_tokens},
        }
    usage = {
        "prompt_tokens": g.input_tokens,
        "completion_tokens": g.output_tokens,
        "total_tokens": g.input_tokens + g.output_tokens,
    }
    model = str(body.get("model") or r.info()["model"])
    if kind == "completion":
        choice: dict[str, Any] = {"index": 0, "text": g.text, "finish_reason": g.finish_reason, "logprobs": None}
        return {
            "id": new_id("cmpl"),
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": usage,
        }
    choice = {"index": 0, "message": {"role": "assistant", "content": g.text}, "finish_reason": g.finish_reason}
    return {
        "id": new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage,
    }


def analysis(r: Runner, kind: str, body: dict[str, Any], max_batch: int) -> dict[str, Any]:
    if kind == "steering_vector":
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ProtocolError("`name` must be a non-empty string")
        return ops.build_vector(r, name, p.integer(body, "layer", None, 0), p.parse_pairs(body.get("pairs")))
    inp = p.parse_input(body)
    where = p.positions(body)
    if kind == "logit_lens":
        layers = body.get("layers")
        if layers is not None and not (
            isinstance(layers, list) and layers and all(isinstance(x, int) and not isinstance(x, bool) for x in layers)
        ):
            raise ProtocolError("`layers` must be a non-empty list of layer numbers (or absent: every layer)")
        return ops.logit_lens(r, inp, layers, p.integer(body, "top_k", 10, 1, p.MAX_TOP_K), where)
    if kind == "sae_features":
        layer = body.get("layer")
        if layer is not None:
            layer = p.integer(body, "layer", None, 0)
        return ops.sae_features(r, inp, layer, p.integer(body, "top_k", 50, 1, p.MAX_TOP_K), where)
    if kind == "oracle":
        question = body.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ProtocolError("`question` must be a non-empty string")
        return ops.oracle(
            r,
            inp,
            question,
            p.integer(body, "layer", None, 0),
            where,
            p.integer(body, "samples", 1, 1, p.MAX_SAMPLES),
            _sampling(body, 40),
            max_batch,
        )
    raise ProtocolError(f"unknown operation {kind!r}")
