"""InternalsClient: the host-side client of the internals protocol (benchctl/internals/protocol.py).

One async method per operation; each returns an `InternalsReply` with the response body, the
round-trip latency and the server's compute time. Like a model call through the gateway, every
attempt first asks the run's limits (`benchctl.limits.run.RunLimits`, under the target model's
limit keys, so `max_connections` for the target's server holds both its chat calls and these), and
a run stopping at its cost cap refuses new calls. Connection failures and 408/429/502/503/504 are
retried with exponential backoff (the gateway's RetryPolicy numbers, honouring Retry-After); other
errors fail at once with the server's message.

Where the server is: `[target] internals` is a URL (http://127.0.0.1:8100) or a NAME whose URL is
in the host environment as BENCHCTL_INTERNALS_<NAME>_URL (upper-cased, non-alphanumerics as _).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import orjson

from benchctl.gateway.retry import RetryPolicy, parse_retry_after
from benchctl.internals import protocol as p

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
TIMEOUT_S = 600.0  # an oracle query over a long prompt on a large model can take minutes


class InternalsCallError(Exception):
    """A failed internals call (after retries); the message says what failed and is safe to show."""

    def __init__(self, message: str, kind: str = "internal", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class InternalsConfigError(ValueError):
    """`[target] internals` names a server whose URL is not set."""


def url_env(name: str) -> str:
    return f"BENCHCTL_INTERNALS_{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}_URL"


def resolve_url(value: str) -> str:
    """A URL as given, or a NAME's URL from the environment."""
    if value.startswith(("http://", "https://")):
        return value.rstrip("/")
    var = url_env(value)
    url = os.environ.get(var, "").strip()
    if not url:
        raise InternalsConfigError(
            f"no URL for the internals server {value!r}: set {var} to its base URL, e.g. http://127.0.0.1:8100 "
            f"(`benchctl internals serve` prints it)"
        )
    return url.rstrip("/")


@dataclass
class InternalsReply:
    data: dict[str, Any]
    latency_s: float
    compute_s: float | None
    queue_s: float | None
    batch_size: int | None
    attempts: int = 1
    usage: dict[str, int] = field(default_factory=dict)


class InternalsClient:
    def __init__(
        self,
        url: str,
        *,
        retry: RetryPolicy | None = None,
        limits: Any = None,
        limit_model: str | None = None,
        timeout: float = TIMEOUT_S,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.limits = limits  # a RunLimits, or None (no shared limits, no cost cap)
        self.limit_model = limit_model
        self._keys: tuple[str, ...] = ()
        if limits is not None and limit_model:
            from benchctl.gateway.upstream import ModelId
            from benchctl.limits.config import keys_for

            self._keys = keys_for(ModelId.parse(limit_model))
        self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(timeout, connect=15.0))

    async def aclose(self) -> None:
        await self._client.aclose()

    # ---------------------------------------------------------------- operations

    async def info(self) -> dict[str, Any]:
        return (await self.call("info", None)).data

    async def generate(
        self,
        inp: p.Input,
        *,
        max_tokens: int,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        steering: p.Steering | None = None,
    ) -> InternalsReply:
        body: dict[str, Any] = {**inp.to_json(), "max_tokens": max_tokens}
        for key, value in (("temperature", temperature), ("top_p", top_p), ("seed", seed)):
            if value is not None:
                body[key] = value
        if steering is not None:
            body["steering"] = steering.to_json()
        return await self.call("generate", body)

    async def build_vector(self, name: str, layer: int, pairs: list[tuple[p.Input, p.Input]]) -> InternalsReply:
        body = {
            "name": name,
            "layer": layer,
            "pairs": [{"positive": a.to_json(), "negative": b.to_json()} for a, b in pairs],
        }
        return await self.call("steering_vector", body)

    async def logit_lens(
        self, inp: p.Input, *, layers: list[int] | None, top_k: int, positions: list[int] | str | None = None
    ) -> InternalsReply:
        return await self.call(
            "logit_lens", {**inp.to_json(), "layers": layers, "top_k": top_k, "positions": positions}
        )

    async def sae_features(
        self, inp: p.Input, *, layer: int | None, top_k: int, positions: list[int] | str | None = None
    ) -> InternalsReply:
        return await self.call(
            "sae_features", {**inp.to_json(), "layer": layer, "top_k": top_k, "positions": positions}
        )

    async def oracle(
        self,
        inp: p.Input,
        *,
        question: str,
        layer: int,
        positions: list[int] | str | None = None,
        samples: int = 1,
        max_tokens: int = 40,
        temperature: float = 1.0,
        seed: int | None = None,
    ) -> InternalsReply:
        body: dict[str, Any] = {
            **inp.to_json(),
            "question": question,
            "layer": layer,
            "positions": positions,
            "samples": samples,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if seed is not None:
            body["seed"] = seed
        return await self.call("oracle", body)

    # ---------------------------------------------------------------- one call

    async def call(self, op: str, body: dict[str, Any] | None) -> InternalsReply:
        path = p.PATHS[op]
        t0 = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            grant = await self._acquire(op)
            status, raw, failure = 0, b"", None  # failure: why no answer came (a connection error)
            try:
                if body is None:
                    r = await self._client.get(self.url + path)
                else:
                    r = await self._client.post(
                        self.url + path, content=orjson.dumps(body), headers={"content-type": "application/json"}
                    )
                status, raw = r.status_code, r.content
                retry_after = parse_retry_after({k.lower(): v for k, v in r.headers.items()})
            except httpx2.TransportError as e:
                failure = f"{type(e).__name__}: {e or 'no answer'}"
            finally:
                self._release(grant, _tokens(raw) if status == 200 else 0)
            if failure is None and status == 200:
                return _reply(op, raw, time.perf_counter() - t0, attempt)
            retryable = failure is not None or status in RETRY_STATUSES
            if not retryable or attempt >= self.retry.max_attempts:
                if failure is not None:
                    raise InternalsCallError(
                        f"no answer from the internals server {self.url} after {attempt} attempt(s): {failure}",
                        "unreachable",
                    )
                kind, message = _error(raw, status)
                raise InternalsCallError(f"internals {op}: HTTP {status} ({kind}): {message}", kind, status)
            await asyncio.sleep(self._wait(attempt, retry_after))

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry.max_wait)
        base = min(self.retry.initial_wait * 2 ** (attempt - 1), self.retry.max_wait)
        return base + random.uniform(0, self.retry.jitter)

    async def _acquire(self, op: str) -> Any:
        if self.limits is None or not self._keys:
            return None
        from benchctl.limits.run import CallRefused

        try:
            return await self.limits.acquire(self._keys, str(self.limit_model), None)
        except CallRefused as e:
            raise InternalsCallError(f"internals {op} not sent: {e}", "refused") from None

    def _release(self, grant: Any, tokens: int) -> None:
        if grant is not None:
            self.limits.finished(grant, tokens)


def _tokens(raw: bytes) -> int:
    try:
        usage = orjson.loads(raw).get("usage") or {}
        return int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return 0


def _error(raw: bytes, status: int) -> tuple[str, str]:
    try:
        err = orjson.loads(raw)["error"]
        return str(err["type"]), str(err["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return "internal", f"unparseable error body {raw[:200]!r}"


def _reply(op: str, raw: bytes, latency: float, attempts: int) -> InternalsReply:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InternalsCallError(f"internals {op}: the answer is not JSON: {raw[:200]!r}", "bad_answer") from None
    if not isinstance(data, dict):
        raise InternalsCallError(f"internals {op}: the answer is not a JSON object", "bad_answer")
    raw_usage = data.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    return InternalsReply(
        data=data,
        latency_s=round(latency, 6),
        compute_s=_num(data.get("compute_s")),
        queue_s=_num(data.get("queue_s")),
        batch_size=data.get("batch_size") if isinstance(data.get("batch_size"), int) else None,
        attempts=attempts,
        usage={k: int(usage.get(k) or 0) for k in ("input_tokens", "output_tokens")},
    )


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
