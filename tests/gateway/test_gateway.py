"""The gateway against the real vendor SDKs and a fake upstream HTTP server (nothing mocked inside)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from benchctl.gateway import SANDBOX_TOKEN
from benchctl.gateway.clients import anthropic_client, genai_client, openai_client
from tests.rigs.gateway import REAL_KEY, TOOL_TURN, Rig, make_rig

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig(tmp_path, monkeypatch)


def test_anthropic_streaming_and_plain_pass_tool_calls_and_usage_through(rig: Rig) -> None:
    client = anthropic_client(rig.gw)
    with client.messages.stream(
        model="claude-haiku-4-5", max_tokens=100, messages=[{"role": "user", "content": "look"}]
    ) as s:
        msg = s.get_final_message()
    assert msg.content[0].text == "Let me look."
    assert msg.content[1].name == "bash" and msg.content[1].input == {"command": "ls /data"}
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (120, 30)
    second = client.messages.create(
        model="claude-haiku-4-5", max_tokens=100, messages=[{"role": "user", "content": "look"}]
    )
    assert second.content[0].text == "Done."
    calls = rig.events("model_call")
    assert [c["stream"] for c in calls] == [True, False]
    first = calls[0]
    assert first["usage"]["input_tokens"] == 120 and first["usage"]["output_tokens"] == 30
    assert first["response"]["tool_calls"][0]["input"] == {"command": "ls /data"}
    assert (
        first["stop_reason"] == "tool_use" and first["ttfb_ms"] is not None and first["latency_ms"] >= first["ttfb_ms"]
    )
    assert first["cost_usd"] == pytest.approx((120 * 1 + 30 * 5) / 1e6)
    assert first["headers"]["anthropic-version"] and "headers" not in calls[1]  # recorded once, when new
    summary = rig.gw.summary()
    assert summary["calls"] == 2 and summary["served_models"] == {"anthropic/claude-haiku-4-5": 2}
    assert summary["usage"]["output_tokens"] == 30 + calls[1]["usage"]["output_tokens"]


def test_requested_model_is_mapped_to_the_runs_model_and_recorded(rig: Rig) -> None:
    anthropic_client(rig.gw).messages.create(
        model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "side call"}]
    )
    assert rig.up.generation_requests()[0].body["model"] == "claude-haiku-4-5"
    call = rig.events("model_call")[0]
    assert call["requested_model"] == "claude-haiku-4-5"
    summary = rig.gw.summary()
    assert summary["requested_models"] == {"claude-haiku-4-5": 1}
    assert summary["current_model"] == "anthropic/claude-haiku-4-5"
    assert call["served_model"] == "anthropic/claude-haiku-4-5"


def test_first_chunk_reaches_client_before_upstream_finishes(rig: Rig) -> None:
    release = threading.Event()
    rig.up.pause_next(release, after_pieces=2)
    safety = threading.Timer(10, release.set)  # if the gateway buffered, the test fails instead of hanging
    safety.start()
    try:
        stream = anthropic_client(rig.gw).messages.create(
            model="m", max_tokens=10, stream=True, messages=[{"role": "user", "content": "hi"}]
        )
        first = next(iter(stream))
        released_before_first = release.is_set()
        release.set()
        rest = [ev.type for ev in stream]
    finally:
        safety.cancel()
    assert first.type == "message_start"
    assert not released_before_first, "the first event only arrived after the upstream finished"
    assert rest[-1] == "message_stop"


def test_openai_responses_and_chat_streaming_and_plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [TOOL_TURN]}, model="openai/gpt-5"):
        client = openai_client(rig.gw)
        r = client.responses.create(model="gpt-5", input="look")
        call = [o for o in r.output if o.type == "function_call"][0]
        assert call.name == "bash" and call.arguments == '{"command":"ls /data"}'
        assert r.usage.input_tokens == 120 and r.usage.output_tokens == 30
        with client.responses.stream(model="gpt-5", input="look") as s:
            final = s.get_final_response()
        assert final.output_text == "Let me look." and final.usage.output_tokens == 30
        chat = client.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "x"}])
        assert chat.choices[0].message.tool_calls[0].function.name == "bash"
        assert chat.usage.prompt_tokens == 120
        chunks = list(
            client.chat.completions.create(
                model="gpt-5",
                messages=[{"role": "user", "content": "x"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Let me look."
        calls = rig.events("model_call")  # (once the calls in flight are recorded: see Rig.events)
        assert [c["wire_api"] for c in calls] == ["openai_responses"] * 2 + ["openai_chat"] * 2
        assert all(c["usage"]["input_tokens"] == 120 and c["usage"]["output_tokens"] == 30 for c in calls)
        assert all(c["response"]["tool_calls"][0]["name"] == "bash" for c in calls)


def test_gemini_generate_and_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [TOOL_TURN]}, model="google/gemini-2.5-pro"):
        client = genai_client(rig.gw)
        r = client.models.generate_content(model="gemini-2.5-pro", contents="look")
        assert r.function_calls[0].name == "bash" and r.function_calls[0].args == {"command": "ls /data"}
        assert r.usage_metadata.prompt_token_count == 120
        chunks = list(client.models.generate_content_stream(model="gemini-other", contents="look"))
        assert (
            "".join(
                c.text or ""
                for c in chunks
                if c.candidates and c.candidates[0].content.parts and c.candidates[0].content.parts[0].text
            )
            == "Let me look."
        )
        calls = rig.events("model_call")
        assert [c["stream"] for c in calls] == [False, True]
        assert rig.up.generation_requests()[1].path.endswith("/models/gemini-2.5-pro:streamGenerateContent")
        assert calls[1]["requested_model"] == "gemini-other"
        assert all(c["usage"]["input_tokens"] == 120 for c in calls)


def test_bad_token_is_rejected_and_real_key_never_reaches_client_or_transcript(rig: Rig) -> None:
    bad = anthropic.Anthropic(
        api_key="not-the-token", base_url="http://gateway", max_retries=0, http_client=anthropic_client(rig.gw)._client
    )
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert rig.up.requests == []  # never forwarded
    # A good call: the upstream got the real key, the client and the transcript never see it.
    raw = anthropic_client(rig.gw).messages.with_raw_response.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": f"echo {REAL_KEY}"}]
    )
    assert rig.up.requests[0].headers["x-api-key"] == REAL_KEY
    seen = raw.http_response.read() + str(dict(raw.http_response.headers)).encode()
    assert REAL_KEY.encode() not in seen
    assert REAL_KEY.encode() not in rig.transcript_path.read_bytes()
    assert b"[REDACTED]" in rig.transcript_path.read_bytes()  # the user echoed it; the recorder scrubbed it


def test_deadline_answers_with_clear_non_retryable_error(rig: Rig) -> None:
    rig.gw.set_deadline(time.time() - 1)
    client = anthropic_client(rig.gw)
    with pytest.raises(anthropic.BadRequestError, match="time budget exhausted"):
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert rig.up.requests == []
    oa = openai_client(rig.gw)
    with pytest.raises(openai.BadRequestError, match="time budget exhausted"):
        oa.responses.create(model="gpt-5", input="x")
    errors = rig.events("model_error")
    assert len(errors) == 2 and all("time budget exhausted" in e["error"] for e in errors)
    rig.gw.set_deadline(None)
    assert client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]).content


def test_unknown_path_404_models_list_count_tokens_and_extra_route(rig: Rig) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(rig.gw.socket_path))
    sock.sendall(
        f"GET /v2/nothing HTTP/1.1\r\nhost: gateway\r\nx-api-key: {SANDBOX_TOKEN}\r\nconnection: close\r\n\r\n".encode()
    )
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    sock.close()
    assert reply.startswith(b"HTTP/1.1 404") and b"no route for GET /v2/nothing" in reply
    client = anthropic_client(rig.gw)
    assert [m.id for m in client.models.list()] == ["claude-haiku-4-5"]
    count = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello"}])
    assert count.input_tokens > 0
    rig.gw.add_route(
        "/benchctl/hooks/",
        lambda method, path, body: (200, {"content-type": "text/plain"}, f"{method} {path} {body.decode()}".encode()),
    )
    import httpx2

    with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(rig.gw.socket_path))) as h:
        r = h.post("http://gateway/benchctl/hooks/stop", content=b"{}", headers={"x-api-key": SANDBOX_TOKEN})
        anonymous = h.post("http://gateway/benchctl/hooks/stop", content=b"{}")  # extra routes need the token too
    assert r.status_code == 200 and r.text == "POST /benchctl/hooks/stop {}"
    assert anonymous.status_code == 401
    seen = [(e["path"], e["status"]) for e in rig.events("model_call")]
    assert ("/v2/nothing", 404) in seen and ("/v1/models", 200) in seen and ("/benchctl/hooks/stop", 401) in seen
    assert ("/v1/messages/count_tokens", 200) in seen  # passed through to the Anthropic upstream
    assert rig.gw.summary()["calls"] == 0  # side calls are recorded, not counted as model calls


def test_tcp_listen_and_socket_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rig in make_rig(tmp_path, monkeypatch):
        assert rig.gw.socket_path.stat().st_mode & 0o777 == 0o666
    from benchctl.gateway import Gateway, GatewayConfig

    with Gateway(GatewayConfig(model="anthropic/claude-haiku-4-5", listen="127.0.0.1:0")) as gw:
        assert gw.url and gw.url.startswith("http://127.0.0.1:")
        client = anthropic.Anthropic(api_key=SANDBOX_TOKEN, base_url=gw.url)
        assert [m.id for m in client.models.list()] == ["claude-haiku-4-5"]
    gw.close()  # idempotent
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return  # no IPv6 loopback on this machine
    with Gateway(GatewayConfig(model="anthropic/claude-haiku-4-5", listen="[::1]:0")) as gw:
        assert gw.url and gw.url.startswith("http://[::1]:")  # a URL clients can use as is
        client = anthropic.Anthropic(api_key=SANDBOX_TOKEN, base_url=gw.url)
        assert [m.id for m in client.models.list()] == ["claude-haiku-4-5"]


def test_upstream_echoing_the_real_key_is_scrubbed_before_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [{"match": ".", "text": f"your key is {REAL_KEY}"}]}):
        client = anthropic_client(rig.gw)
        assert (
            client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]).content[0].text
            == "your key is [REDACTED]"
        )
        with client.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
            assert REAL_KEY not in s.get_final_message().content[0].text
        assert REAL_KEY.encode() not in rig.transcript_path.read_bytes()


def test_expect_100_continue_and_gemini_query_key_is_not_forwarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rig in make_rig(tmp_path, monkeypatch, model="google/gemini-2.5-pro"):
        body = b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}'
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(rig.gw.socket_path))
        sock.sendall(
            f"POST /v1beta/models/x:generateContent?key={SANDBOX_TOKEN} HTTP/1.1\r\nhost: g\r\n"
            f"expect: 100-continue\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        )
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        sock.close()
        assert reply.startswith(b"HTTP/1.1 200") and b"Let me look." in reply
        upstream = rig.up.generation_requests()[0]
        assert SANDBOX_TOKEN not in upstream.query and upstream.headers["x-goog-api-key"] == REAL_KEY


def test_httpx2_upstream_client_option_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHCTL_GATEWAY_HTTP_CLIENT", "httpx2")
    for rig in make_rig(tmp_path, monkeypatch):
        client = anthropic_client(rig.gw)
        with client.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
            assert s.get_final_message().content[1].input == {"command": "ls /data"}
        assert (
            client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]).content[0].text
            == "Done."
        )
        provider = rig.gw.upstream_for(rig.gw.router.primary).inner.inner  # retries > the run's limits > provider
        assert type(provider._client).__name__ == "AsyncClient"


def test_gzip_request_body_is_accepted_and_unknown_encoding_refused(rig: Rig) -> None:
    import gzip

    import httpx2

    body = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
    headers = {"x-api-key": SANDBOX_TOKEN, "content-type": "application/json"}
    with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(rig.gw.socket_path))) as h:
        ok = h.post(
            "http://gateway/v1/messages", content=gzip.compress(body), headers={**headers, "content-encoding": "gzip"}
        )
        bad = h.post("http://gateway/v1/messages", content=body, headers={**headers, "content-encoding": "zstd"})
    assert ok.status_code == 200 and ok.json()["content"][0]["text"] == "Let me look."
    assert bad.status_code == 415 and "zstd" in bad.json()["error"]["message"]


def test_async_clients_and_a_wire_api_the_model_cannot_speak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from benchctl.gateway.clients import async_anthropic_client, async_openai_client

    async def main(gw: object) -> tuple[str, str]:
        a = async_anthropic_client(gw)
        async with a.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
            first = (await s.get_final_message()).content[0].text
        await a.close()
        o = async_openai_client(gw)
        with pytest.raises(Exception, match="does not speak the openai_chat wire API"):
            await o.with_options(max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
        await o.close()
        return first, "ok"

    for rig in make_rig(tmp_path, monkeypatch):
        assert asyncio.run(main(rig.gw)) == ("Let me look.", "ok")
        assert rig.events("model_error")[0]["status"] == 400  # the mismatch is recorded, with the reason


def test_error_text_quoting_an_upstream_exception_never_carries_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway's own error answers quote exception text; an upstream that puts the key there is scrubbed."""
    from benchctl.gateway import Gateway, GatewayConfig
    from benchctl.transcript import TranscriptWriter

    (tmp_path / "leaky_upstream_script.py").write_text(
        "import os\n\n"
        "def turn(request):\n"
        "    raise RuntimeError('upstream rejected key ' + os.environ['ANTHROPIC_API_KEY'])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_KEY)
    with (
        TranscriptWriter(tmp_path / "t.jsonl") as tw,
        Gateway(
            GatewayConfig(model="scripted/py:leaky_upstream_script:turn", socket_path=tmp_path / "gw.sock"), tw
        ) as gw,
    ):
        with pytest.raises(anthropic.APIStatusError) as err:
            anthropic_client(gw, max_retries=0).messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
    assert err.value.status_code == 502
    answer = err.value.response.text
    assert "upstream rejected key [REDACTED]" in answer and REAL_KEY not in answer
    assert REAL_KEY.encode() not in (tmp_path / "t.jsonl").read_bytes()


def test_chunked_request_body_over_the_size_cap_is_refused_before_reading(rig: Rig) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(5)  # a gateway that waits for the announced bytes never answers: the test fails, not hangs
    sock.connect(str(rig.gw.socket_path))
    sock.sendall(
        f"POST /v1/messages HTTP/1.1\r\nhost: g\r\nx-api-key: {SANDBOX_TOKEN}\r\n"
        f"transfer-encoding: chunked\r\n\r\n{rig.gw.body_limits.max_body + 1:x}\r\n".encode()
    )
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    sock.close()
    assert reply.startswith(b"HTTP/1.1 413") and b"over the" in reply and b"request_too_large" in reply
    assert rig.up.requests == []


def test_compressed_request_body_is_capped_after_decompression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small gzip body that inflates past the body cap is refused, not decompressed whole on the host."""
    import gzip

    import httpx2

    from benchctl.gateway.body_limits import BodyLimits

    # 1 MB here, so the bomb stays small
    rig = Rig(tmp_path, monkeypatch, body_limits=BodyLimits(max_body=1 << 20, max_buffered=4 << 20))
    bomb = gzip.compress(b'{"model": "m", "pad": "' + b" " * (2 << 20) + b'"}')
    assert len(bomb) < 10_000
    headers = {"x-api-key": SANDBOX_TOKEN, "content-type": "application/json", "content-encoding": "gzip"}
    with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(rig.gw.socket_path))) as h:
        big = h.post("http://gateway/v1/messages", content=bomb, headers=headers)
        cut = h.post("http://gateway/v1/messages", content=gzip.compress(b'{"model": "m"}')[:-6], headers=headers)
    assert big.status_code == 413 and "decompressed request body is over the" in big.json()["error"]["message"]
    assert cut.status_code == 400 and "not valid gzip" in cut.json()["error"]["message"]
    assert rig.up.requests == []
    deadline = time.monotonic() + 5  # (given back just after the answer is written)
    while rig.gw.body_budget.held and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rig.gw.body_budget.held == 0  # every byte reserved was given back
    rig.close()
