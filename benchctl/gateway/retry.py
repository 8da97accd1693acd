"""Retries around any Upstream: exponential backoff with jitter, honouring retry-after.

Retried: 429, 5xx (529 "overloaded" included), connection errors and resets, an upstream that
went silent past the idle timeout (see below), a non-streaming body cut short, and a stream that
dies before its first byte. Not retried: other 4xx (the request is wrong; retrying
cannot help). A stream already partly passed to the client cannot be retried: its error is
surfaced (the gateway ends the stream with an error event and records it). No retry waits
past the run's deadline: the last failure is surfaced instead.

Idle timeout (HTTP upstreams): an attempt fails when the upstream sends no byte for
`idle_timeout` seconds (default 120, env BENCHCTL_GATEWAY_IDLE_TIMEOUT) — before a streaming
response's head, or between any two pieces of a body. A non-streaming answer comes all at once
when the model has finished, so its head may take up to `answer_timeout` seconds (default 600,
the vendors' own SDK default; env BENCHCTL_GATEWAY_ANSWER_TIMEOUT).

Every attempt is recorded in `UpstreamResponse.attempts` as
{"attempt": n, "status": int | None, "error": str | None, "wait_s": float}, where wait_s is
the pause before the next attempt (0 for the last), plus "usage_unknown": true for a failed
attempt that a vendor may bill and whose usage never came: the upstream took the request and then
went silent past the idle timeout, or answered 2xx and broke off before its answer was whole (a
non-streaming body cut short, a stream that died before its first byte; a non-streaming 2xx head
comes when the model has finished). An attempt answered with an error status, or that failed to
connect or to send, generated nothing. The gateway prices a call with such an attempt as
unknown (exchange.py), and so do judges (benchctl.gateway.complete).
"""

from __future__ import annotations

import asyncio
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.stop import stop_base

from benchctl.gateway.http_client import ANSWER_TIMEOUT, IDLE_TIMEOUT, UpstreamIdleTimeout
from benchctl.gateway.upstream import Upstream, UpstreamCall, UpstreamResponse


class stop_when(stop_base):
    """Stop retrying when a predicate of the retry state says so (here: the run's deadline)."""

    def __init__(self, predicate: Callable[[RetryCallState], bool]) -> None:
        self.predicate = predicate

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.predicate(retry_state)


RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504, 529}
RATE_LIMIT_STATUSES = frozenset({429, 529})  # "slow down": waiting on them is a rate-limit wait


def _rate_limited(state: RetryCallState) -> bool:
    exc = state.outcome.exception() if state.outcome else None
    response = getattr(exc, "response", None)
    return response is not None and response.status in RATE_LIMIT_STATUSES


def is_retryable_status(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


IDLE_TIMEOUT_ENV = "BENCHCTL_GATEWAY_IDLE_TIMEOUT"
ANSWER_TIMEOUT_ENV = "BENCHCTL_GATEWAY_ANSWER_TIMEOUT"


def env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment, or `default` when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{name}={raw!r} must be a positive number of seconds, e.g. {name}={default:g}")
    return value


@dataclass
class RetryPolicy:
    max_attempts: int = 5  # total attempts, first included
    initial_wait: float = 1.0  # seconds before the 2nd attempt (then doubling)
    max_wait: float = 60.0  # cap per wait, retry-after included
    jitter: float = 1.0  # uniform extra seconds added to each exponential wait
    # Silence allowed from an upstream before the attempt fails (and is retried): see the module doc.
    idle_timeout: float = field(default_factory=lambda: env_seconds(IDLE_TIMEOUT_ENV, IDLE_TIMEOUT))
    answer_timeout: float = field(default_factory=lambda: env_seconds(ANSWER_TIMEOUT_ENV, ANSWER_TIMEOUT))


def is_timeout(e: BaseException) -> bool:
    """The upstream went silent (our idle timeout, or httpx2's read timeout)."""
    return isinstance(e, (UpstreamIdleTimeout, httpx2.TimeoutException, asyncio.TimeoutError))


def _silent_after_taking(e: BaseException) -> bool:
    """A timeout after the whole request was sent: the upstream may be answering it, and billing, still.
    (httpx2's connect, pool and write timeouts come before it was.)"""
    return is_timeout(e) and not isinstance(e, (httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.WriteTimeout))


def usage_unknown(attempts: Iterable[dict[str, Any]]) -> bool:
    """Whether some attempt may be billed with a usage that never came (see the module doc)."""
    return any(a.get("usage_unknown") for a in attempts)


class RetryableFailure(Exception):
    """One failed attempt that may be retried. Carries the response (if any) to surface at the end."""

    def __init__(
        self,
        message: str,
        response: UpstreamResponse | None = None,
        retry_after: float | None = None,
        timed_out: bool = False,
        usage_unknown: bool = False,
    ) -> None:
        super().__init__(message)
        self.response = response
        self.retry_after = retry_after
        self.timed_out = timed_out
        self.usage_unknown = usage_unknown  # a vendor may bill this attempt (see the module doc)

    def attempt(self, n: int) -> dict[str, Any]:
        """This failure as the record of attempt n."""
        record: dict[str, Any] = {
            "attempt": n,
            "status": self.response.status if self.response else None,
            "error": str(self),
            "wait_s": 0.0,
        }
        if self.usage_unknown:
            record["usage_unknown"] = True
        return record


def parse_retry_after(headers: dict[str, str]) -> float | None:
    for key in ("retry-after-ms", "retry-after"):
        value = headers.get(key)
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            return None  # HTTP-date form: fall back to backoff
        return seconds / 1000 if key == "retry-after-ms" else seconds
    return None


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    try:
        yield first
        async for chunk in rest:
            yield chunk
    finally:  # closing this closes the body behind it at once (its connection, its limiter slot)
        close = getattr(rest, "aclose", None)
        if close is not None:
            await close()


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover  (makes this an async generator)


async def _drain(response: UpstreamResponse) -> bytes:
    try:
        return await response.read()
    except Exception:
        return b""


async def _bytes_iter(data: bytes) -> AsyncIterator[bytes]:
    yield data


class RetryingUpstream:
    """Wraps an Upstream; `send` returns a response whose first chunk has already arrived."""

    def __init__(
        self,
        inner: Upstream,
        policy: RetryPolicy | None = None,
        deadline: Callable[[], float | None] | None = None,
        waits: Any = None,
        model: str = "",
    ) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.deadline = deadline  # unix seconds (or None); no retry wait may end past it
        # A run's benchctl.limits.run.RunLimits, or None: waits after a 429 / 529 are rate-limit waits,
        # recorded there, and (with the budget pause on) they move the deadline with them.
        self.waits = waits
        self.model = model

    def _past_deadline(self, state: RetryCallState) -> bool:
        deadline = self.deadline() if self.deadline else None
        if deadline is None:
            return False
        if self.waits is not None and self.waits.pauses_backoff() and _rate_limited(state):
            return False  # the budget is paused while it waits: this wait cannot end past the deadline
        return time.time() + self._wait_preview(state) > deadline

    def _wait_preview(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.policy.max_wait)
        return min(self.policy.initial_wait * (2 ** (state.attempt_number - 1)), self.policy.max_wait)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.policy.max_wait)
        base = self.policy.initial_wait * (2 ** (state.attempt_number - 1))
        return min(base + random.uniform(0, self.policy.jitter), self.policy.max_wait)

    async def _attempt(self, call: UpstreamCall) -> UpstreamResponse:
        try:
            response = await self.inner.send(call)
        except ssl.SSLCertVerificationError:
            raise  # a certificate that fails verification will fail again: not retried
        except (TimeoutError, httpx2.TransportError, OSError) as e:
            raise RetryableFailure(
                f"{type(e).__name__}: {e}", timed_out=is_timeout(e), usage_unknown=_silent_after_taking(e)
            ) from e
        if response.status >= 400:
            if is_retryable_status(response.status):
                body = await _drain(response)
                response.body = _bytes_iter(body)
                raise RetryableFailure(f"HTTP {response.status}", response, parse_retry_after(response.headers))
            return response
        if not call.stream:
            # Nothing reaches the client before the whole body is here: a body cut short can be retried.
            try:
                data = await response.read()
            except (TimeoutError, httpx2.TransportError, OSError) as e:
                raise RetryableFailure(
                    f"body failed: {type(e).__name__}: {e}", timed_out=is_timeout(e), usage_unknown=True
                ) from e
            response.body = _bytes_iter(data)
            return response
        # Pull the first chunk now: a stream that dies before sending anything can still be retried.
        chunks = response.body.__aiter__()
        try:
            first = await chunks.__anext__()
        except StopAsyncIteration:
            response.body = _empty()
            return response
        except (TimeoutError, httpx2.TransportError, OSError) as e:
            raise RetryableFailure(
                f"stream failed before first byte: {type(e).__name__}: {e}", timed_out=is_timeout(e), usage_unknown=True
            ) from e
        response.body = _prepend(first, chunks)
        return response

    async def send(self, call: UpstreamCall) -> UpstreamResponse:
        # Fast path: the first attempt runs outside tenacity, which costs ~25 us per call even when
        # nothing fails (a fifth of the gateway's CPU per call); tenacity takes over after a failure.
        call.attempts = []  # filled as attempts end, so a caller cut off mid-send still sees them
        try:
            response = await self._attempt(call)
        except RetryableFailure as first:
            return await self._retry(call, first)
        response.attempts = [{"attempt": 1, "status": response.status, "error": None, "wait_s": 0.0}]
        return response

    async def _retry(self, call: UpstreamCall, first: RetryableFailure) -> UpstreamResponse:
        attempts: list[dict[str, Any]] = call.attempts
        last = first

        failed: list[RetryableFailure] = []  # the failure the next sleep follows

        def before_sleep(state: RetryCallState) -> None:
            attempts[-1]["wait_s"] = round(state.next_action.sleep if state.next_action else 0.0, 3)
            exc = state.outcome.exception() if state.outcome else None
            failed[:] = [exc] if isinstance(exc, RetryableFailure) else []

        async def sleep(seconds: float) -> None:
            e = failed[0] if failed else None
            if (
                self.waits is not None
                and e is not None
                and e.response is not None
                and e.response.status in RATE_LIMIT_STATUSES
            ):
                await self.waits.backoff(
                    seconds, e.response.status, e.retry_after is not None, self.model, call.call_id
                )
            else:
                await asyncio.sleep(seconds)

        stop = stop_after_attempt(max(1, self.policy.max_attempts)) | stop_when(self._past_deadline)
        retrying = AsyncRetrying(
            stop=stop,
            wait=self._wait,
            sleep=sleep,
            retry=retry_if_exception_type(RetryableFailure),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    n = attempt.retry_state.attempt_number
                    try:
                        if n == 1:
                            raise first  # it already happened on the fast path: tenacity decides what next
                        response = await self._attempt(call)
                    except RetryableFailure as e:
                        last = e
                        attempts.append(e.attempt(n))
                        raise
                    attempts.append({"attempt": n, "status": response.status, "error": None, "wait_s": 0.0})
                    response.attempts = attempts
                    return response
        except RetryableFailure:
            pass
        if last.response is not None:  # surface the upstream's own error (status, body) to the client
            last.response.attempts = attempts
            return last.response
        raise UpstreamUnavailable(str(last), attempts, last.timed_out) from last

    async def aclose(self) -> None:
        await self.inner.aclose()


class UpstreamUnavailable(Exception):
    """Every attempt failed without an HTTP response (connection refused, reset, timeout)."""

    def __init__(self, message: str, attempts: list[dict[str, Any]], timed_out: bool = False) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.timed_out = timed_out  # the last attempt failed by the idle timeout
