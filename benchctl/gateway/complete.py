"""One model call for graders and judges: `complete(model, messages)` -> Completion.

The request is built in the provider's native wire API (anthropic -> Anthropic Messages,
openai -> OpenAI Responses, openai-compatible -> chat completions, google -> Gemini
generateContent, scripted -> Anthropic Messages), sent through the same upstream layer the
gateway uses (`benchctl.gateway.registry.resolve_upstream`, retries included), read back with
the gateway's `benchctl.gateway.wire.summarize` and priced with its price table. So a judge call is
retried, counted and priced exactly like an agent's call.

All calls run on one background event loop owned by this module, with one upstream (one
keep-alive connection pool, one script state) per model id: `complete` is safe to call from
many threads and `acomplete` from any event loop, e.g. 64 judge calls at a time. For a
`scripted/<file>` model the in-order turns are therefore consumed across calls in this process.

    from benchctl.gateway.complete import complete
    c = complete("anthropic/claude-sonnet-5-5", [{"role": "user", "content": "Score this..."}],
                 system="You are a strict grader.", max_tokens=1024, temperature=0)
    c.text, c.usage, c.cost_usd, c.refusal

A message's content may be a list of text blocks instead of a string; a block with `"cache": true`
ends a prefix that later calls repeat byte for byte (a prompt-cache breakpoint: judges put one
after the part of a prompt every call of a grading session shares). The text the model sees is the
blocks' texts joined; see `benchctl.gateway.wire.neutral.TextBlock` for what each wire does with it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from benchctl.gateway.provider_env import PROVIDERS
from benchctl.gateway.upstream import ModelId, ModelIdError, Upstream, UpstreamCall
from benchctl.gateway.wire import WireApi, wire
from benchctl.gateway.wire.neutral import TextBlock
from benchctl.transcript import TranscriptWriter

T = TypeVar("T")

# provider -> the wire API its requests are built in
WIRE_FOR_PROVIDER: dict[str, WireApi] = {
    "anthropic": "anthropic_messages",
    "scripted": "anthropic_messages",
    "openai": "openai_responses",
    "openai-compatible": "openai_chat",
    "google": "gemini",
}


# provider -> (key variables, base-URL variable): a missing key is only an error when the
# vendor's real endpoint would be used (a base-URL override may be a keyless proxy or a fake).
@dataclass
class Completion:
    text: str
    usage: dict[str, int]
    cost_usd: float | None
    served_model: str
    stop_reason: str | None
    refusal: bool
    latency_s: float


class ModelCallError(Exception):
    """A model call that failed (after retries). The message says what failed and what to do.

    Host secrets are scrubbed from the message: it quotes upstream error bodies and exception
    text, and graders write it into grade files and logs, which are not redacted on the way."""

    def __init__(self, message: str) -> None:
        from benchctl.transcript import Redactor

        super().__init__(Redactor()(message.encode()).decode("utf-8", "replace"))


# ---------------------------------------------------------------- request bodies


def _blocks(content: Any) -> list[TextBlock]:
    """A message content given as a string or as a list of text blocks: `{"type": "text", "text": ...}`,
    with `"cache": true` on a block that ends a prefix meant for the prompt cache (neutral.TextBlock)."""
    if isinstance(content, str):
        return [TextBlock(content)]
    if isinstance(content, list):
        return [
            TextBlock(b.get("text", ""), bool(b.get("cache"))) if isinstance(b, dict) else TextBlock(str(b))
            for b in content
        ]
    raise ModelCallError(f"message content must be a string or a list of text blocks, got {type(content).__name__}")


def _check_messages(messages: list[dict[str, Any]]) -> None:
    if not messages:
        raise ModelCallError("complete() needs at least one message, e.g. [{'role': 'user', 'content': '...'}]")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or "content" not in m:
            raise ModelCallError(
                f"messages[{i}] must be {{'role': 'user'|'assistant', 'content': ...}}, got {m!r}; "
                f"pass the system prompt as system=..."
            )


def build_request(
    model: ModelId,
    messages: list[dict[str, Any]],
    system: str | None,
    max_tokens: int,
    temperature: float | None,
    top_p: float | None = None,
) -> UpstreamCall:
    """The non-streaming request for `model` in its provider's native wire API."""
    if model.provider not in WIRE_FOR_PROVIDER:
        raise ModelCallError(f"no wire API for provider {model.provider!r}; known: {', '.join(WIRE_FOR_PROVIDER)}")
    wire_api = WIRE_FOR_PROVIDER[model.provider]
    turns = [(str(m["role"]), _blocks(m["content"])) for m in messages]
    try:
        path, body = wire(wire_api).build_request(model.name, turns, system, max_tokens, temperature, top_p)
    except ValueError as e:  # e.g. more prompt-cache breakpoints than the wire allows
        raise ModelCallError(f"cannot build a {wire_api} request for {model}: {e}") from None
    return UpstreamCall(wire_api, "POST", path, model, body, False)


def _check_key(model: ModelId) -> None:
    env = PROVIDERS.get(model.provider)
    if env is not None and not env.configured():
        raise ModelCallError(
            f"cannot call {model}: set {' or '.join(env.keys)} in the environment "
            f"(or {env.base_url_var} to a proxy that needs no key)"
        )


# ---------------------------------------------------------------- the shared loop and upstreams


class _Caller:
    """One background event loop and one upstream per model id, shared by every call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._upstreams: dict[str, Upstream] = {}

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="benchctl-models", daemon=True).start()
                self._loop = loop
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop())

    def upstream(self, model: ModelId) -> Upstream:
        # Runs on the background loop thread only, so no lock is needed around the dict.
        key = str(model)
        if key not in self._upstreams:
            try:
                from benchctl.gateway.registry import resolve_upstream

                self._upstreams[key] = resolve_upstream(model)
            except ModelCallError:
                raise
            except Exception as e:  # config errors (missing base URL, bad script) say what to fix
                raise ModelCallError(f"cannot set up {model}: {e}") from e
        return self._upstreams[key]

    def reset(self) -> None:
        """Forget all upstreams (fresh script state, fresh connections). For tests."""

        async def close_all() -> None:
            ups, self._upstreams = list(self._upstreams.values()), {}
            for u in ups:
                try:
                    await u.aclose()
                except Exception:
                    pass

        if self._loop is not None and not self._loop.is_closed():
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(30)


_CALLER = _Caller()


def reset_upstreams() -> None:
    """Drop cached upstreams: the next call to a scripted model starts its script from turn 0."""
    _CALLER.reset()


def _cost(model: ModelId, served: str | None, usage: dict[str, int]) -> float | None:
    return _price_table().cost_served(str(model), served, usage)


_PRICES: list[Any] = []


def _price_table() -> Any:
    if not _PRICES:
        from benchctl.gateway.pricing import PriceTable

        _PRICES.append(PriceTable())
    return _PRICES[0]


async def _call(model: ModelId, call: UpstreamCall) -> tuple[int, bytes, str | None, list[dict[str, Any]]]:
    upstream = _CALLER.upstream(model)
    try:
        response = await upstream.send(call)
        body = await response.read()
    except ModelCallError:
        raise
    except Exception as e:
        raise ModelCallError(f"{model}: call failed: {type(e).__name__}: {e}") from e
    return response.status, body, response.served_model, response.attempts


async def _complete_on_loop(
    model: str,
    messages: list[dict[str, Any]],
    system: str | None,
    max_tokens: int,
    temperature: float | None,
    transcript: TranscriptWriter | None,
) -> Completion:
    """The whole call; runs on the shared background loop."""
    try:
        mid = ModelId.parse(model)
    except ModelIdError as e:
        raise ModelCallError(str(e)) from None
    _check_messages(messages)
    _check_key(mid)
    from benchctl.gateway.retry import usage_unknown
    from benchctl.gateway.wire import summarize

    call = build_request(mid, messages, system, max_tokens, temperature)
    dropped: list[str] = []
    t0 = time.perf_counter()
    try:
        status, body, served_hdr, attempts = await _call(mid, call)
        s = summarize(call.wire_api, False, body, status)
        if status == 400 and temperature is not None and "temperature" in (s.error or "").lower():
            # Reasoning models (o-series, gpt-5, some thinking configs) reject `temperature`; a judge
            # config shared across models should still work, so resend once without it and record that.
            dropped.append("temperature")
            call = build_request(mid, messages, system, max_tokens, None)
            status, body, served_hdr, attempts = await _call(mid, call)
            s = summarize(call.wire_api, False, body, status)
    except ModelCallError as e:
        if transcript is not None:
            transcript.emit("model_error", "grader", requested_model=model, error=str(e))
        raise
    latency = time.perf_counter() - t0
    if status >= 400 or s.error:
        msg = f"{model}: {s.error or f'HTTP {status}'}"
        if len(attempts) > 1:
            msg += f" (after {len(attempts)} attempts)"
        if status in (401, 403):
            msg += "; check the API key for this provider"
        if transcript is not None:
            transcript.emit("model_error", "grader", requested_model=model, status=status, error=msg, attempts=attempts)
        raise ModelCallError(msg)
    served = s.served_model or served_hdr or mid.name
    cost = _cost(mid, served, s.usage)
    if usage_unknown(attempts):  # a retried attempt a vendor may bill lost its usage: the cost is unknown
        cost = None if _price_table().cost_of_unknown_usage(str(mid)) is None else cost
    completion = Completion(s.text, s.usage, cost, served, s.stop_reason, s.refusal, latency)
    if transcript is not None:
        transcript.emit(
            "model_call",
            "grader",
            requested_model=model,
            served_model=served,
            wire_api=call.wire_api,
            usage=s.usage,
            cost_usd=cost,
            latency_s=round(latency, 4),
            stop_reason=s.stop_reason,
            refusal=s.refusal,
            attempts=attempts,
            system=system,
            messages=messages,
            text=s.text,
            **({"dropped_params": dropped} if dropped else {}),
        )
    return completion


async def acomplete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    system: str | None = None,
    max_tokens: int = 4096,
    temperature: float | None = None,
    transcript: TranscriptWriter | None = None,
) -> Completion:
    """One non-streaming model call (retried on 429/5xx/overload); raises ModelCallError on failure."""
    coro = _complete_on_loop(model, messages, system, max_tokens, temperature, transcript)
    return await asyncio.wrap_future(_CALLER.submit(coro))


def complete(
    model: str,
    messages: list[dict[str, Any]],
    *,
    system: str | None = None,
    max_tokens: int = 4096,
    temperature: float | None = None,
    transcript: TranscriptWriter | None = None,
) -> Completion:
    """Synchronous `acomplete`; safe from any thread (including one that runs its own event loop)."""
    loop = _CALLER.loop()
    try:
        if asyncio.get_running_loop() is loop:
            # e.g. a Python-callable script calling complete(): blocking here would deadlock the loop.
            raise ModelCallError(
                "complete() called from benchctl.gateway.complete' own event loop; use `await acomplete(...)`"
            )
    except RuntimeError:
        pass  # no running loop in this thread: the normal case
    coro = _complete_on_loop(model, messages, system, max_tokens, temperature, transcript)
    return _CALLER.submit(coro).result()
