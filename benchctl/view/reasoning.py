"""Reasoning as the run page shows it: the blocks of an event, and its opaque parts kept out of the page.

A reasoning block has the one neutral shape every wire and harness records (the README's
transcript section): `{"type": "reasoning", "text", "summary", "redacted", "signature", "id"}`.
`model_call` events carry them in `response.reasoning`, harness `assistant` events in
`reasoning`. Transcripts written before that shape carry reasoning as a harness_event of kind
`thinking` (Claude Code) or `reasoning` (Codex), or an assistant event's `thinking` text; those
are read as one visible block each.

Signatures, redacted data and encrypted content are opaque strings the vendor needs back byte
for byte. They mean nothing to a reader, so the page shows their size, never their bytes: in
the reasoning shown inline, in the JSON shown under an event (`mask_opaque`), and in search
(`is_opaque`: search looks only at what a reader sees). The event's JSON link has them whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Keys whose string values are opaque wherever they sit: the neutral block's signature, and the
# same data in the vendors' own shapes inside a recorded request or response.
OPAQUE_KEYS = frozenset({"signature", "encrypted_content", "thoughtSignature", "thought_signature"})
# Block types whose `data` is opaque (Anthropic's redacted thinking).
OPAQUE_DATA_TYPES = frozenset({"redacted_thinking"})
LONG_CHARS = 1500  # a reasoning text longer than this (or of more lines) starts collapsed
LONG_LINES = 12


@dataclass(frozen=True, slots=True)
class Reasoning:
    text: str
    summary: bool  # the text is the vendor's summary of hidden reasoning
    redacted: bool  # withheld: only opaque data exists
    opaque_chars: int  # size of the signature / redacted data (0: none)

    @property
    def long(self) -> bool:
        return len(self.text) > LONG_CHARS or self.text.count("\n") >= LONG_LINES


def _block(raw: Any) -> Reasoning | None:
    if isinstance(raw, str):
        return Reasoning(raw, False, False, 0)
    if not isinstance(raw, dict):
        return None
    text = raw.get("text")
    sig = raw.get("signature")
    return Reasoning(
        text if isinstance(text, str) else "",
        raw.get("summary") is True,
        raw.get("redacted") is True,
        len(sig) if isinstance(sig, str) else 0,
    )


def blocks(raw: Any) -> list[Reasoning]:
    """A recorded `reasoning` list (or one block) as blocks; anything else is no reasoning."""
    items = raw if isinstance(raw, list) else [raw] if raw else []
    return [b for b in map(_block, items) if b is not None]


def of_event(ev: dict[str, Any]) -> list[Reasoning]:
    """The reasoning an event records, in the order given."""
    type_ = ev.get("type")
    if type_ == "assistant":
        out = blocks(ev.get("reasoning"))
        thinking = ev.get("thinking")  # older harness versions
        return out + ([Reasoning(thinking, False, False, 0)] if isinstance(thinking, str) and thinking else [])
    if type_ == "model_call":
        resp = ev.get("response")
        return blocks(resp.get("reasoning")) if isinstance(resp, dict) else []
    if type_ == "harness_event" and ev.get("kind") in ("thinking", "reasoning"):
        text = ev.get("text")
        return [Reasoning(text if isinstance(text, str) else "", False, False, 0)]
    return []


def is_opaque(key: Any, parent: dict[str, Any]) -> bool:
    """Whether `parent[key]` is opaque data (a signature, redacted or encrypted reasoning)."""
    return key in OPAQUE_KEYS or (key == "data" and parent.get("type") in OPAQUE_DATA_TYPES)


def mask_opaque(value: Any) -> Any:
    """`value` with every opaque string replaced by a note of its size (the rest unchanged)."""
    if isinstance(value, dict):
        return {
            k: (
                f"[{len(v):,} chars of opaque data]"
                if isinstance(v, str) and is_opaque(k, value)
                else mask_opaque(v)
                if isinstance(v, (dict, list))
                else v
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask_opaque(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def without_reasoning(response: Any) -> Any:
    """A model_call response without its reasoning (shown inline, so not again in its JSON)."""
    if isinstance(response, dict) and "reasoning" in response:
        return {k: v for k, v in response.items() if k != "reasoning"}
    return response
