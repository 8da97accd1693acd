"""Host-side SDK clients pointed at a running gateway (the ReAct loop, graders, tests).

Each uses the gateway's unix socket when it has one (an httpx2 transport with `uds=`),
else its TCP url; base URL "http://gateway"; the dummy sandbox token as the key. The
vendor SDKs add their usual paths (/v1/messages, /v1/responses, /v1beta/models/...).
"""

from __future__ import annotations

from typing import Any

import httpx2

from benchctl.gateway.exchange import SANDBOX_TOKEN


def _where(gw: Any) -> tuple[str, str | None]:
    """(base url, unix socket path or None) for a Gateway, or for a socket path / url string."""
    sock = getattr(gw, "socket_path", None)
    url = getattr(gw, "url", None)
    if isinstance(gw, str):
        return (gw, None) if gw.startswith("http") else ("http://gateway", gw)
    if hasattr(gw, "__fspath__"):
        return "http://gateway", str(gw)
    if sock is not None:
        return "http://gateway", str(sock)
    if url:
        return url, None
    raise ValueError("gateway is not listening: call gw.start() first")


def _sync_http(sock: str | None) -> httpx2.Client:
    return httpx2.Client(
        transport=httpx2.HTTPTransport(uds=sock) if sock else httpx2.HTTPTransport(),
        timeout=httpx2.Timeout(600.0, connect=10.0),
    )


def _async_http(sock: str | None) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        transport=httpx2.AsyncHTTPTransport(uds=sock) if sock else httpx2.AsyncHTTPTransport(),
        timeout=httpx2.Timeout(600.0, connect=10.0),
    )


def anthropic_client(gw: Any, **kwargs: Any) -> Any:
    import anthropic

    base, sock = _where(gw)
    return anthropic.Anthropic(api_key=SANDBOX_TOKEN, base_url=base, http_client=_sync_http(sock), **kwargs)


def async_anthropic_client(gw: Any, **kwargs: Any) -> Any:
    import anthropic

    base, sock = _where(gw)
    return anthropic.AsyncAnthropic(api_key=SANDBOX_TOKEN, base_url=base, http_client=_async_http(sock), **kwargs)


def openai_client(gw: Any, **kwargs: Any) -> Any:
    import openai

    base, sock = _where(gw)
    return openai.OpenAI(
        api_key=SANDBOX_TOKEN, base_url=base.rstrip("/") + "/v1", http_client=_sync_http(sock), **kwargs
    )


def async_openai_client(gw: Any, **kwargs: Any) -> Any:
    import openai

    base, sock = _where(gw)
    return openai.AsyncOpenAI(
        api_key=SANDBOX_TOKEN, base_url=base.rstrip("/") + "/v1", http_client=_async_http(sock), **kwargs
    )


def genai_client(gw: Any, **kwargs: Any) -> Any:
    """google-genai Client; both its sync and async (`.aio`) sides go through the gateway."""
    from google import genai
    from google.genai import types

    base, sock = _where(gw)
    options = types.HttpOptions(base_url=base, httpx_client=_sync_http(sock), httpx_async_client=_async_http(sock))
    return genai.Client(api_key=SANDBOX_TOKEN, http_options=options, **kwargs)
