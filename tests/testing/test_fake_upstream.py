"""FakeUpstreamServer: routing, recording, keep-alive and fault injection, over real sockets."""

from __future__ import annotations

import http.client
import threading
import time

import anthropic
import httpx2
import pytest

from benchctl.testing import FakeUpstreamServer

SCRIPT = {"turns": [{"text": "alpha beta gamma delta " * 10, "chunks": 8}]}


def _client(up: FakeUpstreamServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=up.url, api_key="sk-ant-real-key-123", max_retries=0)


def _stream_req(model: str = "claude-test") -> dict:
    return {"model": model, "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def test_records_requests_and_keeps_connections_alive() -> None:
    with FakeUpstreamServer(SCRIPT) as up:
        conn = http.client.HTTPConnection("127.0.0.1", int(up.url.rsplit(":", 1)[1]))
        for _ in range(3):
            conn.request(
                "POST",
                "/v1/messages?beta=true",
                body=b'{"model":"m","max_tokens":5,"messages":[]}',
                headers={"content-type": "application/json", "x-api-key": "k1"},
            )
            r = conn.getresponse()
            assert r.status == 200 and b'"type":"message"' in r.read()
        local_port = conn.sock.getsockname()[1]
        conn.request("GET", "/v1/models")
        r = conn.getresponse()
        assert r.status == 200 and b"claude-sonnet-5-5" in r.read()
        assert conn.sock.getsockname()[1] == local_port  # same TCP connection throughout
        conn.close()
        rec = up.requests[0]
        assert rec.path == "/v1/messages" and rec.query == "beta=true"
        assert rec.headers["x-api-key"] == "k1" and rec.body["model"] == "m"
        assert [r.wire_api for r in up.requests] == ["anthropic_messages"] * 3 + ["models_list"]


def test_unknown_path_is_404_in_vendor_shape() -> None:
    with FakeUpstreamServer(SCRIPT) as up:
        r = httpx2.post(up.url + "/v1/nothing", json={})
        assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    "status,exc",
    [(429, anthropic.RateLimitError), (500, anthropic.InternalServerError), (529, anthropic.OverloadedError)],
)
def test_injected_status_errors_do_not_consume_turns(status: int, exc: type) -> None:
    with FakeUpstreamServer({"turns": [{"text": "first"}, {"text": "second"}]}) as up:
        up.fail_next(status, retry_after=3, times=2)
        c = _client(up)
        for _ in range(2):
            with pytest.raises(exc) as err:
                c.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
            assert err.value.status_code == status and err.value.response.headers["retry-after"] == "3"
        m = c.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert m.content[0].text == "first"


def test_sdk_retries_through_injected_429() -> None:
    with FakeUpstreamServer(SCRIPT) as up:
        up.fail_next(429, retry_after=0)
        c = anthropic.Anthropic(base_url=up.url, api_key="k", max_retries=2)
        m = c.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert m.content[0].text.startswith("alpha") and len(up.requests) == 2


def test_pause_mid_stream_delivers_first_events_before_the_rest() -> None:
    release = threading.Event()
    with FakeUpstreamServer(SCRIPT) as up:
        up.pause_next(release, after_pieces=3)
        got: list[str] = []
        with httpx2.stream("POST", up.url + "/v1/messages", json=_stream_req(), timeout=10) as r:
            lines = r.iter_lines()
            while len(got) < 3:
                line = next(lines)
                if line.startswith("event:"):
                    got.append(line)
            # three events arrived while the server is still paused
            assert got[0] == "event: message_start" and not release.is_set()
            release.set()
            rest = [line for line in lines if line.startswith("event:")]
        assert rest[-1] == "event: message_stop"


def test_reset_mid_stream_is_a_client_error() -> None:
    with FakeUpstreamServer(SCRIPT) as up:
        up.reset_next(after_pieces=2)
        c = _client(up)
        seen: list[str] = []
        # Mid-stream the SDK surfaces the transport's error as is.
        with pytest.raises((anthropic.APIConnectionError, httpx2.ReadError, httpx2.RemoteProtocolError)) as err:
            with c.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
                for ev in s:
                    seen.append(ev.type)
        assert "reset" in str(err.value).lower() or "incomplete" in str(err.value).lower()
        assert "message_stop" not in seen
        # the server survives and serves the next call
        m = c.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert m.stop_reason == "end_turn"


def test_malformed_sse_event_breaks_the_parse() -> None:
    with FakeUpstreamServer(SCRIPT) as up:
        up.malformed_next(after_pieces=2)
        with pytest.raises(Exception) as err:
            with _client(up).messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
                for _ in s:
                    pass
        assert "JSON" in type(err.value).__name__ or "Expecting" in str(err.value) or "json" in str(err.value).lower()


def test_fixed_latency_and_turn_delay() -> None:
    with FakeUpstreamServer({"turns": [{"text": "x", "delay": 0.1}]}, latency=0.1) as up:
        t0 = time.perf_counter()
        _client(up).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert time.perf_counter() - t0 >= 0.2


def test_by_model_routes_to_its_own_script() -> None:
    with FakeUpstreamServer(
        {"turns": [{"refusal": True, "text": "no"}]}, by_model={"fallback-model": {"turns": [{"text": "sure"}]}}
    ) as up:
        c = _client(up)
        kw = dict(max_tokens=5, messages=[{"role": "user", "content": "x"}])
        assert c.messages.create(model="primary", **kw).stop_reason == "refusal"
        m = c.messages.create(model="fallback-model", **kw)
        assert m.content[0].text == "sure" and m.model == "fallback-model"


def test_wait_for_requests_times_out_clearly() -> None:
    with FakeUpstreamServer(SCRIPT) as up:
        with pytest.raises(TimeoutError, match="got 0 request"):
            up.wait_for_requests(1, timeout=0.05)


def test_chunked_request_body_is_read() -> None:
    def body():
        yield b'{"model":"m","max_tokens":5,'
        yield b'"messages":[{"role":"user","content":"chunked hello"}]}'

    with FakeUpstreamServer(SCRIPT) as up:
        r = httpx2.post(up.url + "/v1/messages", content=body(), headers={"content-type": "application/json"})
        assert r.status_code == 200
        assert up.requests[0].body["messages"][0]["content"] == "chunked hello"


def test_in_stream_error_event_reaches_the_sdk() -> None:
    import openai

    with FakeUpstreamServer(SCRIPT) as up:
        up.error_event_next(after_pieces=3, message="Overloaded mid-stream")
        with pytest.raises(anthropic.APIStatusError, match="Overloaded mid-stream"):
            with _client(up).messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
                for _ in s:
                    pass
        up.error_event_next(after_pieces=2, message="chat broke")
        oc = openai.OpenAI(base_url=up.url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.APIError, match="chat broke"):
            list(oc.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True))


def test_close_ends_idle_keep_alive_connections() -> None:
    up = FakeUpstreamServer(SCRIPT).start()
    conn = http.client.HTTPConnection("127.0.0.1", int(up.url.rsplit(":", 1)[1]))
    conn.request("GET", "/v1/models")
    conn.getresponse().read()
    up.close()
    conn.sock.settimeout(2)
    assert conn.sock.recv(1) == b""  # the server ended the idle connection (EOF), it did not leave it open
    conn.close()
