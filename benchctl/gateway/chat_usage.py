"""Usage for every chat-completions stream, whether or not its client asked for it.

OpenAI's chat completions stream reports usage only when the request sets
`stream_options.include_usage`: then a last chunk with `"choices": []` carries it, and every other
chunk has `"usage": null`. Without it a streamed call's usage, and so its cost, is unknown (and
with it the run's). So the gateway asks for it on every chat stream whose client did not
(`ask_for_usage`), records the usage from the bytes the upstream sent, and `UsageChunkFilter` takes
out of what that client receives what asking added: the usage-only chunk and the null usage
fields. The client then gets the bytes the vendor would have sent it.

The filter holds back only an event not yet complete (an SSE client cannot use part of an event)
and reads events only in a piece where a `"usage"` is left once the null ones are gone: the one
piece with the usage chunk.
"""
from __future__ import annotations

import re
from typing import Any

import orjson

# A null usage field, as OpenAI puts one in every chunk but the last when include_usage is set. A quote
# inside a JSON string is escaped, so `,"usage":null` can only be a field.
_NULL_USAGE = re.compile(rb',\s*"usage"\s*:\s*null(?=\s*[,}])')
_EVENT = re.compile(rb".*?\n\r?\n", re.S)   # one SSE event with the blank line that ends it (LF or CRLF)


def ask_for_usage(body: dict[str, Any]) -> bool:
    """Make a chat-completions stream request ask for its usage; True when it did not already, so
    the client must not see what asking adds. Other stream options are kept."""
    options = body.get("stream_options")
    if options is None:
        body["stream_options"] = {"include_usage": True}
        return True
    if isinstance(options, dict) and options.get("include_usage") is not True:
        body["stream_options"] = {**options, "include_usage": True}
        return True
    return False   # asked already, or not an object: the upstream answers that with its own 400


def _usage_only(event: bytes) -> bool:
    """An event whose chunk has no choices and a usage count: the chunk include_usage adds."""
    data = b"\n".join(line[5:] for line in event.splitlines() if line.startswith(b"data:"))
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and not obj.get("choices") and obj.get("usage") is not None


def _clean(events: bytes) -> bytes:
    """Complete events without the null usage fields and without the usage-only chunk."""
    events = _NULL_USAGE.sub(b"", events)
    if b'"usage"' not in events:
        return events
    return b"".join(e for e in _EVENT.findall(events) if not _usage_only(e))


class UsageChunkFilter:
    """The client's view of a chat stream the gateway asked usage for: feed it the upstream's bytes
    as they arrive, send what it returns, and at the end what `end` returns."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""    # the start of an event not yet complete

    def feed(self, data: bytes) -> bytes:
        if self._tail:
            data = self._tail + data
        lf, crlf = data.rfind(b"\n\n"), data.rfind(b"\n\r\n")
        end = max(lf + 2 if lf >= 0 else 0, crlf + 3 if crlf >= 0 else 0)
        done, self._tail = data[:end], data[end:]
        return _clean(done) if b'"usage"' in done else done

    def end(self) -> bytes:
        """What is left: an event the stream ended without a blank line after, or the part of an
        event that a broken stream sent (passed on as it came, as it would be without the filter)."""
        tail, self._tail = self._tail, b""
        if b'"usage"' not in tail:
            return tail
        tail = _NULL_USAGE.sub(b"", tail)
        return b"" if b'"usage"' in tail and _usage_only(tail) else tail
