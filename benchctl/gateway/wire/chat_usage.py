"""Usage for every chat-completions stream, whether or not its client asked for it.

OpenAI's chat completions stream reports usage only when the request sets
`stream_options.include_usage`: then a last chunk with `"choices": []` carries it, and every other
chunk has `"usage": null`. Without it a streamed call's usage, and so its cost, is unknown (and
with it the run's). So the gateway asks for it on every chat stream whose client did not
(`ask_for_usage`), records the usage from the bytes the upstream sent, and `UsageChunkFilter` takes
out of what that client receives what asking added: the usage-only chunk and the null usage
fields. The client then gets the bytes the vendor would have sent it.

The filter holds back only an event not yet complete (an SSE client cannot use part of an event).
Each piece costs a search for the last event end and one replace (the null fields); only the piece
with the usage count has an event parsed.
"""

from __future__ import annotations

from typing import Any

import orjson

# The null usage field OpenAI puts in every chunk but the last when include_usage is set, as its bytes
# (compact JSON, as pydantic-based servers write it too): a plain replace, the cheapest pass over a piece.
# A quote inside a JSON string is escaped, so these bytes can only be a field. (A server that spaces its
# JSON keeps its `"usage": null`: a null the SDKs read as no usage.)
NULL_USAGE = b',"usage":null'


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
    return False  # asked already, or not an object: the upstream answers that with its own 400


def _usage_only(event: bytes) -> bool:
    """An event whose chunk has no choices and a usage count: the chunk include_usage adds."""
    data = b"\n".join(line[5:] for line in event.splitlines() if line.startswith(b"data:"))
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and not obj.get("choices") and obj.get("usage") is not None


def _without_usage_chunk(events: bytes, blank: bytes) -> bytes:
    """`events` (each ended by `blank`) without the usage-only chunk: each event with a usage field is
    parsed (after the null ones are gone, the one with the count)."""
    at = events.find(b'"usage"')
    while at >= 0:
        start = events.rfind(blank, 0, at)
        start = 0 if start < 0 else start + len(blank)
        end = events.find(blank, at)
        end = len(events) if end < 0 else end + len(blank)
        if _usage_only(events[start:end]):
            events = events[:start] + events[end:]
            end = start
        at = events.find(b'"usage"', end)
    return events


class UsageChunkFilter:
    """The client's view of a chat stream the gateway asked usage for: feed it the upstream's bytes
    as they arrive, send what it returns, and at the end what `end` returns."""

    __slots__ = ("_tail", "_blank")

    def __init__(self) -> None:
        self._tail = b""  # the start of an event not yet complete
        self._blank = b""  # what ends an event: a blank line, in the stream's line ends (known at its first)

    def feed(self, data: bytes) -> bytes:
        if self._tail:
            data = self._tail + data
        if not self._blank:
            nl = data.find(b"\n")
            if nl < 0:
                self._tail = data
                return b""
            self._blank = b"\r\n\r\n" if data[nl - 1 : nl] == b"\r" else b"\n\n"
        end = data.rfind(self._blank)
        if end < 0:
            self._tail = data
            return b""
        end += len(self._blank)
        self._tail = data[end:]
        done = data[:end].replace(NULL_USAGE, b"")
        return _without_usage_chunk(done, self._blank) if b'"usage"' in done else done

    def end(self) -> bytes:
        """What is left: an event the stream ended without a blank line after, or the part of an
        event that a broken stream sent (passed on as it came, as it would be without the filter)."""
        tail, self._tail = self._tail, b""
        tail = tail.replace(NULL_USAGE, b"")
        return _without_usage_chunk(tail, self._blank or b"\n\n") if b'"usage"' in tail else tail
