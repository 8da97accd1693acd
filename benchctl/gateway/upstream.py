"""The Upstream seam: where a model call actually goes.

The gateway (and `benchctl.gateway.complete.complete`, used by judges) hand an `UpstreamCall` to an
`Upstream` and stream back an `UpstreamResponse` whose body is the raw wire bytes exactly
as the upstream sent them (SSE or JSON), so the gateway can pass them through as they
arrive. Real upstreams speak HTTP to a vendor; the scripted upstream generates the same
wire format from a script. Both plug in here; nothing patches anything.

Model ids are `provider/name`: anthropic/claude-..., openai/gpt-..., google/gemini-...,
openai-compatible/<name>, scripted/<path-or-py:module:function>.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchctl.gateway.wire.neutral import WireApi

PROVIDERS = ("anthropic", "openai", "google", "openai-compatible", "scripted")


class ModelIdError(ValueError):
    pass


@dataclass(frozen=True)
class ModelId:
    provider: str
    name: str

    @classmethod
    def parse(cls, text: str) -> ModelId:
        provider, sep, name = text.partition("/")
        if not sep or not name:
            raise ModelIdError(
                f"model id {text!r} must look like provider/name, e.g. anthropic/claude-sonnet-5-5, "
                f"openai/gpt-5, google/gemini-2.5-pro, openai-compatible/<name>, scripted/<script.json>"
            )
        if provider not in PROVIDERS:
            raise ModelIdError(f"unknown provider {provider!r} in model id {text!r}; known: {', '.join(PROVIDERS)}")
        return cls(provider, name)

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


@dataclass
class UpstreamCall:
    wire_api: WireApi
    method: str
    path: str  # as the client sent it, e.g. /v1/messages (query string separate)
    model: ModelId  # the model that must serve this call (after mapping/fallback)
    body: dict[str, Any] | None  # parsed JSON body (model field already rewritten to model.name)
    stream: bool
    query: str = ""
    headers: dict[str, str] = field(
        default_factory=dict
    )  # safe pass-through headers (anthropic-version, anthropic-beta, ...); never auth
    # Attempts of the send in progress that have ended, kept up to date by the retry layer: a caller
    # cut off before `send` returns (deadline, Ctrl-C) still records them.
    attempts: list[dict[str, Any]] = field(default_factory=list)
    call_id: str | None = None  # the gateway's id for this call (names it in `rate_limit_wait` events)
    waiting_for_limit: bool = False  # True while the limiter holds it back (benchctl/limits): not sent yet


@dataclass
class UpstreamResponse:
    status: int
    headers: dict[str, str]
    body: AsyncIterator[bytes]  # raw bytes, yielded as they arrive from upstream
    served_model: str | None = None  # what the upstream says served it, when known
    attempts: list[dict[str, Any]] = field(default_factory=list)  # retries: {"attempt", "status", "error", "wait_s"}
    data: bytes | None = None  # the whole body, once `read()` has read it

    async def read(self) -> bytes:
        """The whole body; read once (by the retry layer, for a non-streaming answer), then kept."""
        if self.data is None:
            chunks: list[bytes] = []
            async for chunk in self.body:
                chunks.append(chunk)
            self.data = b"".join(chunks)
        return self.data


async def close_body(body: Any) -> None:
    """Close an upstream body iterator (its connection goes back or away), quietly: it is closed
    because the call is over, and an error from closing it changes nothing about the call."""
    close = getattr(body, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:
            pass


class Upstream(Protocol):
    """One provider. `send` returns as soon as the status and headers are known."""

    async def send(self, call: UpstreamCall) -> UpstreamResponse: ...

    async def aclose(self) -> None: ...
