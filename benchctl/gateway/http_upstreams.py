"""Real upstreams: Anthropic, OpenAI, Google (Gemini) and OpenAI-compatible servers over HTTP.

Each holds a keep-alive connection pool (the lean client in http_client.py, or an
`httpx2.AsyncClient` when BENCHCTL_GATEWAY_HTTP_CLIENT=httpx2) and forwards the call's JSON body (model
already rewritten) to the vendor, returning as soon as status and headers arrive; the body
is yielded raw, chunk by chunk, so the gateway can pass it straight through.

Endpoints and keys (read from the gateway's host environment only):

  anthropic/*          ANTHROPIC_BASE_URL (default https://api.anthropic.com), ANTHROPIC_API_KEY
  openai/*             OPENAI_BASE_URL (default https://api.openai.com/v1), OPENAI_API_KEY
  google/*             GOOGLE_GEMINI_BASE_URL (default https://generativelanguage.googleapis.com),
                       GEMINI_API_KEY or GOOGLE_API_KEY
  openai-compatible/N  BENCHCTL_OPENAI_COMPATIBLE_<N>_BASE_URL (N upper-cased, non-alphanumerics
                       as _), else OPENAI_COMPATIBLE_BASE_URL; key OPENAI_COMPATIBLE_<N>_API_KEY,
                       else OPENAI_COMPATIBLE_API_KEY (may be empty for local servers)
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import AsyncIterator, Mapping

import httpx2
import orjson

from benchctl.gateway.http_client import ANSWER_TIMEOUT, IDLE_TIMEOUT, ConnectionPool
from benchctl.gateway.provider_env import PROVIDERS
from benchctl.gateway.upstream import ModelId, UpstreamCall, UpstreamResponse

# Headers from the upstream that are about the hop, not the content; we set our own.
HOP_HEADERS = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
    "date",
    "server",
    "set-cookie",
    "alt-svc",
    "via",
    "cf-ray",
    "cf-cache-status",
}
TIMEOUT = httpx2.Timeout(connect=15.0, read=600.0, write=60.0, pool=60.0)


class UpstreamConfigError(ValueError):
    pass


class UnsupportedWireApi(ValueError):
    """The model's provider does not speak the wire API the agent used (no translation)."""


def _env_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _make_client() -> httpx2.AsyncClient:
    # TCP_NODELAY: a small write (a request, an SSE event) goes out at once instead of waiting for the
    # ACK of the previous one, which the peer may delay by up to 40 ms (Nagle's algorithm).
    transport = httpx2.AsyncHTTPTransport(
        limits=httpx2.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=60.0),
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )
    return httpx2.AsyncClient(transport=transport, timeout=TIMEOUT, trust_env=True)  # honours HTTPS_PROXY


def response_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower() not in HOP_HEADERS}


class HttpUpstream:
    """Base: subclasses say which wire APIs they speak, where and with which auth header."""

    provider = ""
    wire_apis: tuple[str, ...] = ()

    def __init__(self, model: ModelId, base_url: str, api_key: str) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        # The lean client is the default (see http_client.py for why); httpx2 stays available.
        self._use_httpx = os.environ.get("BENCHCTL_GATEWAY_HTTP_CLIENT", "") == "httpx2"
        self._client = _make_client() if self._use_httpx else None
        self._pool = None if self._use_httpx else ConnectionPool()
        self.idle_timeout, self.answer_timeout = IDLE_TIMEOUT, ANSWER_TIMEOUT

    def set_timeouts(self, idle: float, answer: float) -> None:
        """Silence allowed from the upstream: `idle` before a stream's head and within any body,
        `answer` before a non-streaming answer's head (it arrives when the model has finished)."""
        self.idle_timeout, self.answer_timeout = idle, answer
        if self._pool is not None:
            self._pool.idle_timeout = idle

    def url(self, call: UpstreamCall) -> str:
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def default_headers(self) -> dict[str, str]:
        return {}

    async def send(self, call: UpstreamCall) -> UpstreamResponse:
        if call.wire_api not in self.wire_apis:
            raise UnsupportedWireApi(
                f"{self.model} ({self.provider}) does not speak the {call.wire_api} wire API the agent used; "
                f"pick a model whose provider speaks it ({self.provider} speaks: {', '.join(self.wire_apis)})"
            )
        url = self.url(call)
        if call.query:
            url += ("&" if "?" in url else "?") + call.query
        # The client's pass-through headers may replace the defaults, never the key.
        headers = {**self.default_headers(), **call.headers, **self.auth_headers(), "accept-encoding": "identity"}
        content = None
        if call.body is not None:
            content = orjson.dumps(call.body)
            headers["content-type"] = "application/json"
        head_timeout = self.idle_timeout if call.stream else max(self.idle_timeout, self.answer_timeout)
        if self._pool is not None:
            raw = await self._pool.request(call.method, url, headers, content, head_timeout)
            headers = {k: v for k, v in raw.headers.items() if k not in HOP_HEADERS}  # (names already lower-case)
            return UpstreamResponse(status=raw.status, headers=headers, body=raw.aiter_raw())
        assert self._client is not None
        # httpx2 has one read timeout per request: the head's limit, which then also bounds each body read.
        timeout = httpx2.Timeout(connect=15.0, read=head_timeout, write=60.0, pool=60.0)
        request = self._client.build_request(call.method, url, content=content, headers=headers, timeout=timeout)
        response = await self._client.send(request, stream=True)
        return UpstreamResponse(
            status=response.status_code, headers=response_headers(response.headers), body=_iter_body(response)
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._pool is not None:
            await self._pool.aclose()


async def _iter_body(response: httpx2.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            if chunk:
                yield chunk
    finally:
        await response.aclose()


class AnthropicUpstream(HttpUpstream):
    provider = "anthropic"
    wire_apis: tuple[str, ...] = ("anthropic_messages", "anthropic_count_tokens")

    def __init__(self, model: ModelId) -> None:
        env = PROVIDERS["anthropic"]
        super().__init__(model, env.base_url(), env.api_key())

    def url(self, call: UpstreamCall) -> str:
        return self.base_url + call.path  # /v1/messages, /v1/messages/count_tokens

    def auth_headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key} if self._api_key else {}

    def default_headers(self) -> dict[str, str]:
        return {"anthropic-version": "2023-06-01"}  # used only when the client sent none


class OpenAIUpstream(HttpUpstream):
    provider = "openai"
    wire_apis: tuple[str, ...] = ("openai_responses", "openai_chat")

    def __init__(self, model: ModelId, base_url: str | None = None, api_key: str | None = None) -> None:
        env = PROVIDERS["openai"]
        super().__init__(model, base_url or env.base_url(), env.api_key() if api_key is None else api_key)

    def url(self, call: UpstreamCall) -> str:
        # The client spoke /v1/<endpoint>; vendor base URLs include the /v1 (OpenAI SDK convention).
        path = call.path[3:] if call.path.startswith("/v1/") else call.path
        return self.base_url + path

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}


class OpenAICompatibleUpstream(OpenAIUpstream):
    provider = "openai-compatible"
    wire_apis: tuple[str, ...] = ("openai_responses", "openai_chat", "anthropic_messages")

    def __init__(self, model: ModelId) -> None:
        env = _env_name(model.name)
        base = os.environ.get(f"BENCHCTL_OPENAI_COMPATIBLE_{env}_BASE_URL") or os.environ.get(
            "OPENAI_COMPATIBLE_BASE_URL"
        )
        if not base:
            raise UpstreamConfigError(
                f"no base URL for {model}: set BENCHCTL_OPENAI_COMPATIBLE_{env}_BASE_URL (or OPENAI_COMPATIBLE_BASE_URL) "
                f"to the server's OpenAI-style base URL, e.g. http://localhost:8000/v1"
            )
        key = os.environ.get(f"OPENAI_COMPATIBLE_{env}_API_KEY") or os.environ.get("OPENAI_COMPATIBLE_API_KEY", "")
        super().__init__(model, base, key)


class GoogleUpstream(HttpUpstream):
    provider = "google"
    wire_apis: tuple[str, ...] = ("gemini",)

    def __init__(self, model: ModelId) -> None:
        env = PROVIDERS["google"]
        super().__init__(model, env.base_url(), env.api_key())

    def url(self, call: UpstreamCall) -> str:
        return self.base_url + call.path  # /v1beta/models/<name>:(stream)generateContent

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key} if self._api_key else {}


def http_upstream(
    model: ModelId, idle_timeout: float = IDLE_TIMEOUT, answer_timeout: float = ANSWER_TIMEOUT
) -> HttpUpstream:
    classes = {
        "anthropic": AnthropicUpstream,
        "openai": OpenAIUpstream,
        "google": GoogleUpstream,
        "openai-compatible": OpenAICompatibleUpstream,
    }
    if model.provider not in classes:
        raise UpstreamConfigError(f"no HTTP upstream for provider {model.provider!r}")
    upstream = classes[model.provider](model)
    upstream.set_timeouts(idle_timeout, answer_timeout)
    return upstream
