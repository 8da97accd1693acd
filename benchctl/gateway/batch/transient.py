"""Retries for the batch clients' HTTP calls, classified like the gateway's (benchctl/gateway/retry.py).

Retried: 429, 408, 409, 5xx and 529 answers (honouring `retry-after`), connection errors and timeouts.
Not retried: other 4xx (the request is wrong). A batch *create* is retried only on answers that say
the vendor did not take it (408, 429, 503, 529) and on a connection that failed before sending:
after a 500 the batch may exist, and creating it again would bill every request twice. A call that
still fails raises `ModelCallError` (its message scrubbed of host secrets), naming what failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from benchctl.gateway.complete import ModelCallError
from benchctl.gateway.retry import is_retryable_status, parse_retry_after
from benchctl.transcript import Redactor

T = TypeVar("T")

ATTEMPTS = 5
NOT_TAKEN = frozenset({408, 429, 503, 529})  # the vendor refused the request: nothing was created


class HttpStatusError(Exception):
    """An error answer from a vendor called without its SDK (Gemini)."""

    def __init__(self, status_code: int, headers: dict[str, str], text: str) -> None:
        super().__init__(f"HTTP {status_code}: {text[:500]}")
        self.status_code = status_code
        self.headers = headers


def status_of(e: BaseException) -> int | None:
    """The HTTP status of an error answer (the SDKs' APIStatusError, HttpStatusError), else None."""
    status = getattr(e, "status_code", None)
    return status if isinstance(status, int) else None


def _headers_of(e: BaseException) -> dict[str, str]:
    headers = getattr(e, "headers", None)
    if headers is None:
        headers = getattr(getattr(e, "response", None), "headers", None)
    return {str(k).lower(): str(v) for k, v in dict(headers or {}).items()}


def _connection_error(e: BaseException) -> bool:
    # The SDKs' APIConnectionError / APITimeoutError, httpx2's transport errors, the OS's own.
    names = {c.__name__ for c in type(e).__mro__}
    return bool(names & {"APIConnectionError", "APITimeoutError", "TransportError", "TimeoutException"}) or isinstance(
        e, (ConnectionError, TimeoutError)
    )


def _not_sent(e: BaseException) -> bool:
    """A connection error from before the request went out (nothing can have been created)."""
    chain: BaseException | None = e
    while chain is not None:
        if type(chain).__name__ in ("ConnectError", "ConnectTimeout", "ConnectionRefusedError"):
            return True
        chain = chain.__cause__ or chain.__context__
    return False


def transient(e: BaseException, *, creates: bool = False) -> bool:
    status = status_of(e)
    if status is not None:
        return status in NOT_TAKEN if creates else is_retryable_status(status)
    if creates:
        return _not_sent(e)
    return _connection_error(e)


class _wait:
    """The vendor's retry-after when it sent one, else exponential backoff with jitter."""

    def __init__(self) -> None:
        self._backoff = wait_exponential_jitter(initial=1, max=30)

    def __call__(self, state: RetryCallState) -> float:
        e = state.outcome.exception() if state.outcome else None
        after = parse_retry_after(_headers_of(e)) if e is not None else None
        return min(after, 60.0) if after is not None else float(self._backoff(state))


async def retried(what: str, op: Callable[[], Awaitable[T]], *, creates: bool = False, attempts: int = ATTEMPTS) -> T:
    """`await op()`, retried while it fails transiently; ModelCallError("<what>: ...") when it gives up."""

    def retry_on(e: BaseException) -> bool:
        return transient(e, creates=creates)

    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(retry_on), stop=stop_after_attempt(attempts), wait=_wait(), reraise=True
        ):
            with attempt:
                return await op()
    except ModelCallError:
        raise
    except Exception as e:
        status = status_of(e)
        hint = "; check the API key for this provider" if status in (401, 403) else ""
        raise ModelCallError(f"{what}: {type(e).__name__}: {e}{hint}") from e
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover


def error_text(error: Any) -> str:
    """A vendor error object ({type?, message, code?, status?}) as one line, scrubbed of host
    secrets (it goes into grade files, which are not redacted on the way)."""
    if isinstance(error, dict):
        inner: dict[str, Any] = error["error"] if isinstance(error.get("error"), dict) else error
        kind = inner.get("type") or inner.get("status") or inner.get("code")
        message = inner.get("message") or ""
        text = f"{kind}: {message}" if kind else str(message or error)
    else:
        text = str(error)
    return Redactor()(text.encode()).decode("utf-8", "replace")
