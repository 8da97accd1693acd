"""What a provider's response headers say about its rate limits: hold the key until when?

- `retry-after` / `retry-after-ms` on a 429 (or 529 overloaded): the key waits that long;
- Anthropic `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-remaining` with
  `...-reset` (an RFC 3339 time);
- OpenAI `x-ratelimit-remaining-{requests,tokens}` with `x-ratelimit-reset-{requests,tokens}`
  (a duration such as `1s`, `6m0s`, `59.6s`, `20ms`).

A limit whose remaining count is 0 holds the key until its reset. Only the counts are read on
every response (a few dict lookups); the reset is parsed when a count is spent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from benchctl.gateway.retry import RATE_LIMIT_STATUSES, parse_retry_after

MAX_HOLD_S = 600.0  # never trust a header to hold a key longer than this

_ANTHROPIC = ("requests", "tokens", "input-tokens", "output-tokens")
_OPENAI = ("requests", "tokens")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(text: str) -> float | None:
    """OpenAI's reset durations: '1s', '6m0s', '59.6s', '20ms', '1h2m3s'."""
    parts = _DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _until(reset: str | None, now: float) -> float | None:
    """Anthropic's reset (RFC 3339) or OpenAI's (a duration) as unix seconds."""
    if not reset:
        return None
    d = duration_s(reset)
    if d is not None:
        return now + d
    try:
        return datetime.fromisoformat(reset.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _spent(value: str | None) -> bool:
    if value is None:
        return False
    try:
        return float(value) <= 0
    except ValueError:
        return False


def hold_until(status: int, headers: Mapping[str, str], now: float) -> tuple[float, str] | None:
    """(unix seconds to hold the key until, why) when the headers say the key is spent, else None.
    `why` is `retry_after` (a 429/529 that said how long) or `rate_limit_headers` (a count at 0)."""
    if status in RATE_LIMIT_STATUSES:
        ra = parse_retry_after(headers)  # type: ignore[arg-type]
        if ra is not None and ra > 0:
            return now + min(ra, MAX_HOLD_S), "retry_after"
    until: float | None = None
    for kind in _ANTHROPIC:
        if _spent(headers.get(f"anthropic-ratelimit-{kind}-remaining")):
            t = _until(headers.get(f"anthropic-ratelimit-{kind}-reset"), now)
            until = t if until is None or (t is not None and t > until) else until
    for kind in _OPENAI:
        if _spent(headers.get(f"x-ratelimit-remaining-{kind}")):
            t = _until(headers.get(f"x-ratelimit-reset-{kind}"), now)
            until = t if until is None or (t is not None and t > until) else until
    if until is None or until <= now:
        return None
    return min(until, now + MAX_HOLD_S), "rate_limit_headers"
