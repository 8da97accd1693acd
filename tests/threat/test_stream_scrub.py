"""Threat model: an upstream that echoes a host key mid-stream never gets it to the agent, however
the key is cut by the upstream's reads (the gateway scrubs across the pieces of a stream)."""

from __future__ import annotations

import json
import threading

import pytest

from benchctl.transcript import Redactor
from tests.rigs.threat import REAL_KEY, SOCKET, threat_rig

MARK = "KEY-FOLLOWS:"

# Inside the sandbox: one streamed Messages call per offset; after the bytes before the key have
# arrived it says READY (the host then lets the upstream send the rest) and finally prints the body.
CLIENT = r"""
import json, socket, sys
def call(k):
    s = socket.socket(socket.AF_UNIX); s.connect(%(socket)r)
    body = json.dumps({"model": "m", "max_tokens": 50, "stream": True,
                       "messages": [{"role": "user", "content": "echo"}]}).encode()
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: gateway\r\nx-api-key: benchctl-sandbox-token\r\n"
              b"content-type: application/json\r\nconnection: close\r\ncontent-length: %%d\r\n\r\n" %% len(body) + body)
    data, ready = b"", False
    while True:
        piece = s.recv(65536)
        if not piece:
            break
        data += piece
        if not ready and %(mark)r.encode() in data:
            ready = True
            print("READY", k, flush=True)
    head, _, rest = data.partition(b"\r\n\r\n")
    out = b""
    while rest:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            break
        out, rest = out + rest[:n], rest[n + 2:]
    print("BODY", k, json.dumps(out.decode()), flush=True)
for k in map(int, sys.argv[1:] or %(offsets)r):
    call(k)
"""


def deltas(sse: str) -> str:
    """The text an SSE Messages stream spells out (what a client shows)."""
    text = ""
    for line in sse.splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event.get("type") == "content_block_delta":
                text += event["delta"].get("text", "")
    return text


@pytest.mark.docker
@pytest.mark.timeout(240)
def test_a_key_cut_at_every_offset_never_reaches_the_sandbox(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {"turns": [{"text": MARK + REAL_KEY, "chunks": 1}]}
    offsets = list(range(1, len(REAL_KEY)))
    with threat_rig(monkeypatch, sandbox_image, script) as rig:
        go = {k: threading.Event() for k in offsets}
        for k in offsets:  # the k-th call's stream is cut k bytes into the key, and waits
            rig.up.split_next((MARK + REAL_KEY[:k]).encode(), go[k])

        def on_line(line: str) -> None:
            if line.startswith("READY "):
                go[int(line.split()[1])].set()

        out = rig.python_live(CLIENT % {"socket": SOCKET, "mark": MARK, "offsets": offsets}, on_line)
        bodies = {
            int(line.split(" ", 2)[1]): json.loads(line.split(" ", 2)[2])
            for line in out.splitlines()
            if line.startswith("BODY ")
        }
        assert sorted(bodies) == offsets
        for k, body in bodies.items():
            assert REAL_KEY not in body, f"key cut at offset {k} reached the sandbox"
            assert deltas(body) == MARK + "[REDACTED]", (k, body)
        # Every cut really was a separate read on the way in: the upstream waited for READY each time.
        assert all(e.is_set() for e in go.values())


def test_stream_redactor_at_every_split_and_in_every_piece_size() -> None:
    secrets = [REAL_KEY, "sk-other-0123456789"]
    text = f"a {REAL_KEY} b sk-oth sk-other-0123456789 {REAL_KEY[:-1]} end sk-other-01234567"
    want = Redactor(secrets)(text.encode())
    assert REAL_KEY.encode() not in want
    for size in range(1, len(text) + 1):  # the stream in pieces of every size
        scrub = Redactor(secrets).stream()
        data = text.encode()
        out = b"".join(scrub.feed(data[i : i + size]) for i in range(0, len(data), size)) + scrub.end()
        assert out == want, size
    for cut in range(len(text) + 1):  # and cut in two at every offset
        scrub = Redactor(secrets).stream()
        data = text.encode()
        assert scrub.feed(data[:cut]) + scrub.feed(data[cut:]) + scrub.end() == want, cut


def test_stream_redactor_holds_back_only_what_could_start_a_key() -> None:
    scrub = Redactor([REAL_KEY]).stream()
    assert scrub.feed(b"data: {}\n\n") == b"data: {}\n\n"  # an SSE event leaves at once
    assert scrub.feed(b"x " + REAL_KEY[:5].encode()) == b"x "  # a key's start waits for what follows
    assert scrub.feed(b"!") == REAL_KEY[:5].encode() + b"!"  # ...and leaves once it is not a key
    assert Redactor([]).stream().feed(b"abc") == b"abc"
