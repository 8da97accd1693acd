"""What every wire module shares: server-sent events read and written, ids, pieces of a stream."""

from __future__ import annotations

import base64
import random
import re
import secrets
import string
from collections.abc import Iterator
from typing import Any

import orjson

from benchctl.gateway.wire.neutral import ResponseSummary

_ALNUM = string.ascii_letters + string.digits
_RNG = random.Random(secrets.randbits(128))  # ids need uniqueness, not secrecy; this is 30x faster


def new_id(prefix: str, n: int = 24) -> str:
    """A vendor-looking unique id, e.g. toolu_01AbC..., call_..., msg_..."""
    return prefix + "".join(_RNG.choices(_ALNUM, k=n))


def new_signature(n: int = 64) -> str:
    """An opaque signature for a scripted answer: standard base64 of random bytes (the Gemini SDK
    rejects one that is not base64; the others never look inside)."""
    return base64.b64encode(_RNG.randbytes(n)).decode()


def split_text(text: str, size: int) -> list[str]:
    if not text:
        return []
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def pieces_for(length: int, chunks: int | None, default_size: int = 64) -> int:
    """Piece size that splits a text of `length` characters into about `chunks` pieces (or the default size)."""
    if chunks and chunks > 0 and length:
        return max(1, -(-length // chunks))
    return default_size


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


# ---------------------------------------------------------------- reading


def iter_sse(body: bytes) -> Iterator[tuple[str | None, str]]:
    """(event name, data) for each server-sent event; comments and empty events are skipped."""
    text = body.decode("utf-8", errors="replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        event: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        if data:
            yield event, "\n".join(data)


# A `data:` line that ends its event: a blank line follows (not consumed: it may precede the next one).
_LAST_DATA_LINE = re.compile(rb"\ndata: ?(.*)\n(?=\n)")


def event_data(body: bytes) -> list[bytes] | None:
    """The data of every event, in one regex pass (an eighth of iter_sse's time: the gateway reads
    each streamed answer), when each event has at most one `data:` line, as the vendors send them,
    and no CR; else None. Event names are not read."""
    if b"\r" in body:
        return None
    lines = b"\n" + body  # every line now starts after a newline
    found = _LAST_DATA_LINE.findall(lines)
    # As many data lines ending their events as data lines at all: no event has two.
    return found if len(found) == lines.count(b"\ndata:") else None


def json_events(body: bytes, summary: ResponseSummary, names: bool = True) -> list[tuple[str | None, Any]]:
    """Parse every SSE data payload as JSON; a bad payload marks the summary as malformed.
    names=False: the caller ignores event names (they may be None), which allows the fast path."""
    if not names and (payloads := event_data(body)) is not None:
        try:
            return [(None, orjson.loads(d)) for d in payloads if d.strip() != b"[DONE]"]
        except orjson.JSONDecodeError:
            pass  # a bad payload (or bytes that are not UTF-8): read again below, which names it
    out: list[tuple[str | None, Any]] = []
    for event, data in iter_sse(body):
        if data.strip() == "[DONE]":
            continue
        try:
            out.append((event, orjson.loads(data)))
        except orjson.JSONDecodeError:
            summary.error = f"malformed SSE: data is not JSON: {data[:120]!r}"
    return out


def parse_args(text: str) -> Any:
    try:
        return orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return text


def error_message(obj: Any) -> str:
    err = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err if err is not None else obj)[:500]


def error_headers(retry_after: float | None) -> dict[str, str]:
    h = {"content-type": "application/json"}
    if retry_after is not None:
        h["retry-after"] = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
        h["retry-after-ms"] = str(int(float(retry_after) * 1000))
    return h
