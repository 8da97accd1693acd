"""One call to the target (or the auxiliary model) through benchctl's upstream layer.

The same `resolve_upstream` the gateway uses (retries included), so a target call is sent,
retried, parsed (`benchctl.gateway.wire.summarize`) and priced (`PriceTable`) exactly like an agent's call.
What each operation sends:

  chat         the provider's native chat request with the target's fixed system prompt
               (anthropic -> Messages, openai -> Responses, google -> Gemini,
               openai-compatible and scripted -> chat completions)
  prefill      chat + a final assistant message holding the forced start. Anthropic continues a
               trailing assistant message natively (trailing whitespace stripped: the API rejects
               it); chat-completions servers get `continue_final_message: true,
               add_generation_prompt: false` (vLLM / SGLang). The reply returned is prefill + continuation.
  sample_user  chat completions whose final message is a *user* message (empty, or the given
               start) with `continue_final_message: true`: the target writes the user's turn.
  complete     raw text, no chat template and no system prompt: `POST /v1/completions`
               {"prompt": ...} on an openai-compatible server. A scripted target (which speaks
               only chat wire APIs) gets the prompt as one user message with `"raw_completion": true`
               in the body, so scripts can tell the two apart.

A scripted target is addressed like an openai-compatible server (chat completions), so scripts
and tests see exactly the body a vLLM server would get.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from benchctl.gateway.complete import build_request
from benchctl.gateway.pricing import PriceTable
from benchctl.gateway.registry import resolve_upstream, wrap_upstream
from benchctl.gateway.retry import RetryPolicy
from benchctl.gateway.upstream import ModelId, Upstream, UpstreamCall
from benchctl.gateway.wire import empty_usage, summarize, wire


class TargetCallError(Exception):
    """A target or auxiliary call that failed after retries; the message is safe to show the agent."""


@dataclass
class Reply:
    text: str  # what the tool shows (prefill included for prefill)
    usage: dict[str, int]
    cost_usd: float | None
    served_model: str
    latency_s: float
    stop_reason: str | None = None
    refusal: bool = False
    request: dict[str, Any] = field(default_factory=dict)  # what was sent, minus the system prompt


def _completions_upstream(model: ModelId, retry: RetryPolicy | None, limits: Any = None) -> Upstream:
    """An openai-compatible upstream that also passes POST /v1/completions (wire 'other')."""
    from benchctl.gateway.http_upstreams import OpenAICompatibleUpstream

    class CompletionsUpstream(OpenAICompatibleUpstream):
        wire_apis = OpenAICompatibleUpstream.wire_apis + ("other",)

    return wrap_upstream(CompletionsUpstream(model), model, retry, limits=limits)


class ModelCaller:
    """Upstreams per model id for one run; must be used from one event loop (TargetTools owns it)."""

    def __init__(self, retry: RetryPolicy | None = None, prices: PriceTable | None = None, limits: Any = None) -> None:
        self.retry = retry
        self.prices = prices or PriceTable()
        self.limits = limits  # the run's benchctl.limits.run.RunLimits: the sweep's limiter and cost caps
        self._upstreams: dict[tuple[str, str], Upstream] = {}

    def upstream(self, model: ModelId, kind: str = "chat") -> Upstream:
        key = (str(model), kind)
        if key not in self._upstreams:
            if kind == "completions" and model.provider == "openai-compatible":
                self._upstreams[key] = _completions_upstream(model, self.retry, self.limits)
            elif kind == "completions":
                return self.upstream(model, "chat")  # scripted: the same script state as chat
            else:
                self._upstreams[key] = resolve_upstream(model, self.retry, limits=self.limits)
        return self._upstreams[key]

    async def aclose(self) -> None:
        for u in self._upstreams.values():
            try:
                await u.aclose()
            except Exception:
                pass
        self._upstreams.clear()

    async def send(self, model: ModelId, call: UpstreamCall, kind: str = "chat") -> tuple[int, bytes, str | None]:
        try:
            response = await self.upstream(model, kind).send(call)
            body = await response.read()
        except Exception as e:
            raise TargetCallError(f"{model}: call failed: {type(e).__name__}: {e}") from e
        return response.status, body, response.served_model

    def cost(self, model: ModelId, served: str | None, usage: dict[str, int]) -> float | None:
        return self.prices.cost_served(str(model), served, usage)

    # ------------------------------------------------------------------ operations

    def _chat_call(
        self,
        model: ModelId,
        system: str | None,
        messages: list[dict[str, Any]],
        max_tokens: int,
        temperature: float | None,
        top_p: float | None,
    ) -> UpstreamCall:
        # scripted targets are addressed like an openai-compatible server (see the module docstring)
        as_model = ModelId("openai-compatible", model.name) if model.provider == "scripted" else model
        return replace(build_request(as_model, messages, system, max_tokens, temperature, top_p), model=model)

    async def chat(
        self,
        model: str,
        system: str | None,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        temperature: float | None = None,
        top_p: float | None = None,
        prefill: str | None = None,
        user_start: str | None = None,
    ) -> Reply:
        """A chat call; `prefill` forces the assistant's start, `user_start` samples the user turn."""
        mid = ModelId.parse(model)
        msgs = [dict(m) for m in messages]
        continue_final = False
        lead = ""
        if prefill is not None:
            if mid.provider == "anthropic":
                prefill = prefill.rstrip()
            else:
                continue_final = True
            msgs.append({"role": "assistant", "content": prefill})
            lead = prefill
        elif user_start is not None:
            if mid.provider not in ("openai-compatible", "scripted"):
                raise TargetCallError(f"{mid.provider} models cannot write the user turn")
            msgs.append({"role": "user", "content": user_start})
            continue_final = True
            lead = user_start
        call = self._chat_call(mid, system, msgs, max_tokens, temperature, top_p)
        if continue_final:
            if call.wire_api != "openai_chat":
                raise TargetCallError(f"{mid.provider} models cannot continue a final message")
            assert call.body is not None
            call.body["continue_final_message"] = True
            call.body["add_generation_prompt"] = False
        return await self._run(mid, call, "chat", lead)

    async def complete(
        self, model: str, prompt: str, *, max_tokens: int, temperature: float | None = None, top_p: float | None = None
    ) -> Reply:
        mid = ModelId.parse(model)
        if mid.provider == "scripted":
            call = self._chat_call(mid, None, [{"role": "user", "content": prompt}], max_tokens, temperature, top_p)
            assert call.body is not None
            call.body["raw_completion"] = True
            return await self._run(mid, call, "chat", "")
        if mid.provider != "openai-compatible":
            raise TargetCallError(f"{mid.provider} models do not offer raw text completion")
        body: dict[str, Any] = {"model": mid.name, "prompt": prompt, "max_tokens": max_tokens}
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        call = UpstreamCall("other", "POST", "/v1/completions", mid, body, False)
        return await self._run(mid, call, "completions", "")

    async def _run(self, mid: ModelId, call: UpstreamCall, kind: str, lead: str) -> Reply:
        t0 = time.perf_counter()
        status, raw, served_hdr = await self.send(mid, call, kind)
        latency = time.perf_counter() - t0
        if call.wire_api == "other":
            text, usage, served, stop, err = _parse_completions(raw, status)
            refusal = False
        else:
            s = summarize(call.wire_api, False, raw, status)
            text, usage, served, stop, err, refusal = s.text, s.usage, s.served_model, s.stop_reason, s.error, s.refusal
        if status >= 400 or err:
            raise TargetCallError(f"{mid}: {err or f'HTTP {status}'}")
        served = served or served_hdr or mid.name
        if refusal and not text.strip():
            text = "[the model refused to answer]"  # an empty tool result would read like a bug
        body = call.body or {}
        request = dict(body) if call.wire_api == "other" else wire(call.wire_api).without_system(body)
        return Reply(
            lead + text, usage, self.cost(mid, served, usage), served, round(latency, 4), stop, refusal, request
        )


def _parse_completions(raw: bytes, status: int) -> tuple[str, dict[str, int], str | None, str | None, str | None]:
    usage = empty_usage()
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "", usage, None, None, f"HTTP {status}: unparseable completions response {raw[:200]!r}"
    if status >= 400 or "choices" not in obj:
        err = obj.get("error") if isinstance(obj, dict) else None
        msg = err.get("message") if isinstance(err, dict) else (err or str(obj)[:300])
        return "", usage, None, None, f"HTTP {status}: {msg}"
    choice = (obj.get("choices") or [{}])[0]
    u = obj.get("usage") or {}
    usage["input_tokens"] = int(u.get("prompt_tokens") or 0)
    usage["output_tokens"] = int(u.get("completion_tokens") or 0)
    return str(choice.get("text") or ""), usage, obj.get("model"), choice.get("finish_reason"), None
