"""`LimitedUpstream`: an Upstream that asks the run's limits before every attempt it sends.

It sits between the retry layer and the provider (`registry.resolve_upstream` builds
`RetryingUpstream(LimitedUpstream(provider))`), so every attempt — a retry too — is one request
in the limiter's eyes: it waits for room, goes, and frees its room when its body has been read
to the end (a stream holds its connection slot until it ends). The response head tells the
limiter about the key (a 429's retry-after, a spent rate-limit header). When the call's keys
count tokens, the body's usage is read at its end and charged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from benchctl.gateway.upstream import ModelId, Upstream, UpstreamCall, UpstreamResponse, close_body
from benchctl.limits import Grant
from benchctl.limits.config import keys_for
from benchctl.limits.run import RunLimits


class LimitedUpstream:
    def __init__(self, inner: Upstream, limits: RunLimits, model: ModelId) -> None:
        self.inner = inner
        self.limits = limits
        self.model = str(model)
        self.keys = keys_for(model)
        self._count_tokens = any(limits.config.limit_for(k).tokens_per_minute for k in self.keys)

    async def send(self, call: UpstreamCall) -> UpstreamResponse:
        call_id = getattr(call, "call_id", None)
        call.waiting_for_limit = True  # a call cut off now was never sent (exchange.record)
        grant = await self.limits.acquire(self.keys, self.model, call_id)
        call.waiting_for_limit = False
        try:
            response = await self.inner.send(call)
        except BaseException:
            self.limits.finished(grant, 0)
            raise
        self.limits.observe(self.keys, response.status, response.headers)
        if not self.limits.follows(grant):
            return response
        response.body = self._follow(response.body, grant, call, response.status)
        return response

    async def _follow(
        self, body: AsyncIterator[bytes], grant: Grant, call: UpstreamCall, status: int
    ) -> AsyncIterator[bytes]:
        parts: list[bytes] | None = [] if self._count_tokens and status < 400 else None
        try:
            async for chunk in body:
                if parts is not None:
                    parts.append(chunk)
                yield chunk
        finally:
            tokens = _tokens(call, parts, status) if parts else 0
            self.limits.finished(grant, tokens)
            await close_body(body)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _tokens(call: UpstreamCall, parts: list[bytes], status: int) -> int:
    """What a token limit counts: uncached input + cache writes + output (cache reads are free of
    Anthropic's input-token limits; set OpenAI limits with that in mind)."""
    from benchctl.gateway.wire import summarize

    try:
        usage: dict[str, Any] = summarize(call.wire_api, call.stream, b"".join(parts), status).usage
    except Exception:
        return 0
    return int(sum(usage.get(k) or 0 for k in ("input_tokens", "cache_write_tokens", "output_tokens")))
