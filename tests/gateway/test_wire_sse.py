"""The one-pass SSE reader the gateway uses on every streamed answer reads exactly what the
line-by-line reader (iter_sse) reads, whatever the stream looks like: when it cannot be sure,
it steps aside."""

from __future__ import annotations

import random

import pytest

from benchctl.gateway.wire import ResponseSummary
from benchctl.gateway.wire.sse import event_data as _event_data
from benchctl.gateway.wire.sse import json_events as _loads_json_events

LINES = [
    b"event: message_start",
    b"event: data: x",
    b'data: {"a": 1}',
    b'data:{"b": 2}',
    b"data:  [3]",
    b"data: [DONE]",
    b"data: ",
    b'data: {"c": "data: 4"}',
    b"data: {bad",
    b'data: "\xff"',
    b": ping",
    b"id: 7",
    b"retry: 10",
    b"",
    b"",
    b'data: "x"\r',
    b"dat: 5",
    b" data: 6",
]


def both(body: bytes) -> tuple[list, str | None, list, str | None]:
    fast, slow = ResponseSummary(), ResponseSummary()
    got = [obj for _, obj in _loads_json_events(body, fast, names=False)]
    want = [obj for _, obj in _loads_json_events(body, slow)]
    return got, fast.error, want, slow.error


@pytest.mark.parametrize(
    "body",
    [
        b'event: a\ndata: {"x": 1}\n\nevent: b\ndata: {"y": 2}\n\n',  # the vendors' form
        b'data: {"x": 1}\n\ndata: [DONE]\n\n',  # chat completions
        b'data: {"x": 1}\ndata: {"y": 2}\n\n',  # one event, two data lines
        b'data: {"x": 1}\n\ndata: {"y"',  # cut off mid-event
        b'data: {"x": 1}\r\n\r\ndata: {"y": 2}\r\n\r\n',  # CRLF
        b'event: data: {"z": 0}\n\ndata: 1\ndata: 2\n\n',  # "data:" inside an event line
        b'data: {"x": "\xe9"}\n\n',  # not UTF-8
        b"",
        b"\n\n",
        b'data: {"x": 1}\n\n\n\n: ping\n\ndata: 2\n\n',
    ],
)
def test_tricky_streams_read_alike(body: bytes) -> None:
    got, got_error, want, want_error = both(body)
    assert (got, got_error) == (want, want_error)


def test_random_streams_read_alike() -> None:
    rng = random.Random(19)
    fast_taken = 0
    for _ in range(3000):
        body = b"\n".join(rng.choice(LINES) for _ in range(rng.randint(0, 12))) + rng.choice([b"", b"\n", b"\n\n"])
        got, got_error, want, want_error = both(body)
        assert (got, got_error) == (want, want_error), body
        fast_taken += _event_data(body) is not None
    assert fast_taken > 300  # the fast path was taken often enough for this to mean something


def test_vendor_stream_takes_the_fast_path() -> None:
    body = b'event: message_start\ndata: {"type": "message_start"}\n\nevent: ping\ndata: {"type": "ping"}\n\n'
    assert _event_data(body) == [b'{"type": "message_start"}', b'{"type": "ping"}']


def test_responses_event_typed_only_by_its_name() -> None:
    """The Responses reader falls back on event names when a payload carries no "type"."""
    from benchctl.gateway.wire import summarize

    body = (
        b'event: response.output_text.delta\ndata: {"delta": "hel"}\n\n'
        b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "delta": "lo"}\n\n'
    )
    assert summarize("openai_responses", True, body).text == "hello"
