"""The first call with a cached prefix goes alone: `PrefixGate`.

A vendor's prompt cache holds a prefix only once a call that wrote it has been answered; calls
sent at the same time all miss, and on Anthropic each writes it again at 1.25x the input price.
A grading session sends its calls many at a time (a report's coverage batches at once, several
reports at once), so without care the first wave writes the shared prefix once per call and
caching costs more than it saves. The gate makes the first call with a prefix the session has not
sent yet go alone: calls with the same prefix wait for it to end (answered or failed), then go
together and read the cache.

Only a prefix long enough to be cached is gated (`MIN_CACHED_CHARS`, about 1,024 tokens at ~4
characters a token, the vendors' smallest minimum); a shorter one would not be cached anyway, so
waiting for it would only slow grading. Keys are per model (each model has its own cache).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

MIN_CACHED_CHARS = 4096  # ~1,024 tokens: the smallest prefix any vendor caches


def prefix_keys(model: str, system: str, messages: list[dict[str, Any]]) -> list[str]:
    """A key per prompt-cache breakpoint of the request (`"cache": true` text blocks) whose prefix
    is long enough to be cached, shortest prefix first."""
    h = hashlib.sha256(f"{model}\0{system}\0".encode("utf-8", "replace"))
    chars, keys = len(system), []
    for m in messages:
        content = m.get("content")
        if not isinstance(content, list):
            h.update(str(content).encode("utf-8", "replace"))
            chars += len(str(content))
            continue
        for b in content:
            text = str(b.get("text", "")) if isinstance(b, dict) else str(b)
            h.update(text.encode("utf-8", "replace"))
            chars += len(text)
            if isinstance(b, dict) and b.get("cache") and chars >= MIN_CACHED_CHARS:
                keys.append(h.copy().hexdigest())
    return keys


class PrefixGate:
    """Which cached prefixes this session has sent, and which are being written now."""

    def __init__(self) -> None:
        self._sent: set[str] = set()
        self._writing: dict[str, asyncio.Event] = {}

    @asynccontextmanager
    async def first(self, keys: list[str]) -> AsyncIterator[None]:
        """Wait until no other call is writing any of these prefixes; the ones nobody has sent yet
        are this call's to write, and calls that need them wait until it ends. Prefixes nest (each
        key's prefix extends the one before), so calls claim them in one order and cannot deadlock."""
        mine: list[str] = []
        for key in keys:
            while key not in self._sent and key in self._writing:
                await self._writing[key].wait()
            if key not in self._sent:
                self._writing[key] = asyncio.Event()
                mine.append(key)
        try:
            yield
        finally:
            for key in mine:  # answered or failed: the others go (one of them writes it if it failed)
                self._sent.add(key)
                self._writing.pop(key).set()
