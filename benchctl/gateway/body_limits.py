"""How much request body the gateway holds in memory: per request, and for all requests at once.

Everything an agent sends passes through the gateway's process, so an agent could otherwise make
the host buffer as much as it likes (three parallel 200 MB uploads took a run's process from
93 MB to 1.1 GB). Two caps, both checked before a byte of the body is read:

- `max_body` (default 32 MiB, env BENCHCTL_GATEWAY_MAX_BODY): one request's body, as sent and
  after gzip/deflate decompression. 32 MB is Anthropic's documented limit for the Messages and
  token-counting APIs (a bigger request gets 413 `request_too_large` there too); OpenAI documents
  up to 50 MB of image bytes per request, so raise it for image-heavy runs. Bigger: 413.
- `max_buffered` (default 128 MiB, env BENCHCTL_GATEWAY_MAX_BUFFERED): the bodies of all
  requests in flight together, each counted from the moment its head arrives until its answer
  has been sent. A request that does not fit now gets 429 with `retry-after` (the vendor SDKs and
  the agent CLIs retry it).

Values take a unit like `[limits]` memory ("32m", "1g"). Memory use on top of the bodies is
bounded too: at most MAX_CONNECTIONS connections at once, each with at most MAX_HEADER_BYTES of
request head (http11.py). A parsed request being forwarded takes a few times its body's size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from benchctl.sandbox.limits import LimitError, size_bytes

MAX_BODY_ENV = "BENCHCTL_GATEWAY_MAX_BODY"
MAX_BUFFERED_ENV = "BENCHCTL_GATEWAY_MAX_BUFFERED"
DEFAULT_MAX_BODY = 32 << 20
DEFAULT_MAX_BUFFERED = 128 << 20
MIN_BODY = 64 << 10  # an agent CLI's requests are tens of KB at the very least


def env_bytes(name: str, default: int) -> int:
    """A size such as "32m" from the environment, or `default` when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        n = size_bytes(raw, name, f'e.g. {name}="{default >> 20}m"')
    except LimitError as e:
        raise ValueError(f"{name}={raw!r} must be a size with a unit, e.g. {name}={default >> 20}m") from e
    if n < MIN_BODY:
        raise ValueError(f"{name}={raw!r} is below the minimum of {MIN_BODY >> 10}k")
    return n


@dataclass(frozen=True)
class BodyLimits:
    max_body: int = field(default_factory=lambda: env_bytes(MAX_BODY_ENV, DEFAULT_MAX_BODY))
    max_buffered: int = field(default_factory=lambda: env_bytes(MAX_BUFFERED_ENV, DEFAULT_MAX_BUFFERED))

    def __post_init__(self) -> None:
        if self.max_body < MIN_BODY:
            raise ValueError(f"max_body {self.max_body} is below the minimum of {MIN_BODY} bytes")
        if self.max_buffered < self.max_body:
            # Otherwise a request within max_body could never be accepted.
            raise ValueError(
                f"max_buffered ({self.max_buffered} bytes, {MAX_BUFFERED_ENV}) must be at least "
                f"max_body ({self.max_body} bytes, {MAX_BODY_ENV})"
            )


class BodyBudget:
    """Bytes of request body held at once by one gateway. Used from its event loop only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0

    def take(self, n: int) -> bool:
        """Reserve `n` more bytes; False (nothing reserved) when they do not fit."""
        if self.held + n > self.limit:
            return False
        self.held += n
        self.peak = max(self.peak, self.held)
        return True

    def give(self, n: int) -> None:
        self.held -= n
