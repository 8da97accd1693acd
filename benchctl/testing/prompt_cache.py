"""PromptCache: the vendors' prompt caches as the fake upstream simulates them.

Tokens are estimated at ~4 characters a token (`benchctl.gateway.scripted.upstream.estimate_tokens`,
the fake's estimate for every count), so "1,024 tokens" is about 4,096 characters of prompt.

- Anthropic Messages (explicit): a content block (tool, system block, message block) marked
  `cache_control` is a breakpoint; the request up to and including it is a cacheable prefix when it
  is at least `min_tokens(model)` long. The longest prefix that ends at a block boundary no later
  than the last breakpoint and that an earlier request wrote is read (`cache_read_input_tokens`);
  the rest up to the last cacheable breakpoint is written (`cache_creation_input_tokens`), an entry
  per breakpoint; `input_tokens` is what is left. A prefix is the exact content up to there (the
  blocks as sent, their `cache_control` aside) for one model. Anthropic looks back at most 20
  blocks before a breakpoint; the fake looks at every boundary.
- OpenAI Responses and chat completions, Gemini (implicit): every request whose prompt is at least
  `min_tokens(model)` long is cached; a later request that starts with the same text (and offers
  the same tools, to the same model) reads the longest shared prefix in 128-token steps, 1,024 at
  least (`input_tokens_details.cached_tokens`, `prompt_tokens_details.cached_tokens`,
  `cachedContentTokenCount`). There are no writes to pay for.

An entry becomes readable once the request that wrote it is answered (`commit`, called by the
server after the response is sent), as on the vendors' APIs, where requests sent at the same time all
miss; entries never expire here (the vendors' live 5 minutes or more, refreshed on each read).
`hits`, `misses`, `read_tokens` and `write_tokens` count what was served, for tests.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

from benchctl.gateway.scripted.request import ScriptRequest
from benchctl.gateway.scripted.upstream import estimate_tokens

STEP_TOKENS = 128  # OpenAI's cache-hit granularity past the first 1,024 tokens (used for Gemini too)
CHARS_PER_TOKEN = 4


def min_tokens(wire_api: str, model: str) -> int:
    """The shortest prefix a vendor caches: Anthropic 1,024 (2,048 for Haiku models), OpenAI 1,024,
    Gemini 1,024 (4,096 for Pro models)."""
    if wire_api.startswith("anthropic"):
        return 2048 if "haiku" in model else 1024
    if wire_api == "gemini":
        return 4096 if "pro" in model else 1024
    return 1024


@dataclass
class CacheUse:
    """What one request reads from and writes to the cache (tokens), and the entries it writes."""

    read: int = 0
    write: int = 0
    entries: list[str] = field(default_factory=list)


class PromptCache:
    def __init__(self) -> None:
        self._entries: set[str] = set()
        self._lock = threading.Lock()
        self.hits = 0  # requests that read a cached prefix
        self.misses = 0  # requests with a cacheable prefix that read none
        self.read_tokens = 0
        self.write_tokens = 0

    def plan(self, wire_api: str, model: str, body: dict[str, Any], req: ScriptRequest) -> CacheUse | None:
        """What the request reads and would write, decided when it arrives (against the entries of
        requests answered by then); None when nothing of it is cacheable."""
        if wire_api == "anthropic_messages":
            return self._explicit(model, body)
        if wire_api in ("openai_responses", "openai_chat", "gemini"):
            return self._implicit(wire_api, model, body, req)
        return None

    def commit(self, use: CacheUse | None) -> None:
        """The request was answered: its entries become readable and what it read and wrote counts."""
        if use is None:
            return
        with self._lock:
            self._entries.update(use.entries)
            if use.read:
                self.hits += 1
            else:
                self.misses += 1
            self.read_tokens += use.read
            self.write_tokens += use.write

    def _has(self, key: str) -> bool:
        with self._lock:
            return key in self._entries

    # -- Anthropic: explicit breakpoints
    def _explicit(self, model: str, body: dict[str, Any]) -> CacheUse | None:
        h = hashlib.sha256(f"anthropic\0{model}\0".encode())
        chars = 0
        bounds: list[tuple[str, int, bool]] = []  # (prefix key, prefix tokens, breakpoint here)
        for block in _anthropic_blocks(body):
            marked = isinstance(block, dict) and "cache_control" in block
            plain = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
            h.update(orjson.dumps(plain, option=orjson.OPT_SORT_KEYS))
            chars += len(block.get("text", "")) if isinstance(block, dict) and "text" in block else len(str(plain))
            bounds.append((h.hexdigest(), (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN, marked))
        least = min_tokens("anthropic_messages", model)
        cacheable = [i for i, (_, tokens, marked) in enumerate(bounds) if marked and tokens >= least]
        if not cacheable:
            return None
        last = cacheable[-1]
        read = max((bounds[i][1] for i in range(last + 1) if self._has(bounds[i][0])), default=0)
        writes = [i for i in cacheable if bounds[i][1] > read]
        write = bounds[last][1] - read if writes else 0
        return CacheUse(read, write, [bounds[i][0] for i in writes])

    # -- OpenAI, Gemini: implicit prefix caching
    def _implicit(self, wire_api: str, model: str, body: dict[str, Any], req: ScriptRequest) -> CacheUse | None:
        text = req.full_text
        tokens = estimate_tokens(text)
        least = min_tokens(wire_api, model)
        if tokens < least:
            return None
        tools = body.get("tools")
        h = hashlib.sha256(f"{wire_api}\0{model}\0".encode() + orjson.dumps(tools, option=orjson.OPT_SORT_KEYS))
        step = STEP_TOKENS * CHARS_PER_TOKEN
        read, keys = 0, []
        for k in range(1, len(text) // step + 1):
            h.update(text[(k - 1) * step : k * step].encode("utf-8", "replace"))
            if k * STEP_TOKENS < least:
                continue
            key = h.hexdigest()
            keys.append(key)
            if self._has(key):
                read = k * STEP_TOKENS
        return CacheUse(read, 0, keys)


def _anthropic_blocks(body: dict[str, Any]) -> list[Any]:
    """A request's content blocks in the order the cache reads them: tools, system, messages."""
    out: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        out.append({"type": "text", "text": system})
    elif isinstance(system, list):
        out.extend(system)
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else m
        role = m.get("role") if isinstance(m, dict) else None
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        # the role is part of the content: the same text said by another role is another prefix
        out.extend({**b, "_role": role} if isinstance(b, dict) else b for b in blocks)
    return out
