"""Upstream faults (injected by the fake upstream server) and refusal policies, end to end."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from benchctl.gateway.clients import anthropic_client
from tests.rigs.gateway import Rig, make_rig

pytestmark = pytest.mark.timeout(60)
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig(tmp_path, monkeypatch, {"turns": [{"text": "all good", "chunks": 6}]})


def _client(rig: Rig) -> anthropic.Anthropic:
    return anthropic_client(rig.gw, max_retries=0)  # only the gateway retries, so attempts are countable


@pytest.mark.parametrize("status", [429, 500, 529])
def test_retryable_status_is_retried_and_every_attempt_recorded(rig: Rig, status: int) -> None:
    rig.up.fail_next(status, retry_after=0.05 if status == 429 else None)
    msg = _client(rig).messages.create(model="m", max_tokens=5, messages=MSG)
    assert msg.content[0].text == "all good"
    call = rig.events("model_call")[0]
    retries = call["retries"]
    assert [a["status"] for a in retries] == [status, 200]
    assert retries[0]["error"] == f"HTTP {status}"
    # An error answer generated nothing: the call is priced by the answer it ended with.
    assert all("usage_unknown" not in a for a in retries) and call["cost_usd"] is not None
    assert rig.gw.summary()["cost_usd"] == call["cost_usd"] > 0
    if status == 429:
        assert retries[0]["wait_s"] == pytest.approx(0.05)  # honoured retry-after
    assert len(rig.up.generation_requests()) == 2


def test_persistent_5xx_is_surfaced_after_max_attempts(rig: Rig) -> None:
    rig.up.fail_next(503, times=3)
    with pytest.raises(anthropic.APIStatusError) as err:
        _client(rig).messages.create(model="m", max_tokens=5, messages=MSG)
    assert err.value.status_code == 503
    call = rig.events("model_call")[0]
    assert [a["status"] for a in call["retries"]] == [503, 503, 503] and call["status"] == 503
    assert rig.events("model_error")[0]["status"] == 503
    assert rig.gw.summary()["errors"] == 1


def test_other_4xx_is_not_retried(rig: Rig) -> None:
    rig.up.fail_next(400, message="bad field")
    with pytest.raises(anthropic.BadRequestError, match="bad field"):
        _client(rig).messages.create(model="m", max_tokens=5, messages=MSG)
    assert len(rig.up.generation_requests()) == 1


def test_reset_before_first_byte_is_retried(rig: Rig) -> None:
    rig.up.reset_next(after_pieces=0)
    with _client(rig).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
        assert s.get_final_message().content[0].text == "all good"
    retries = rig.events("model_call")[0]["retries"]
    assert len(retries) == 2 and "before first byte" in retries[0]["error"]


def test_reset_mid_stream_is_surfaced_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = {"turns": [{"text": "one two three four five six", "chunks": 6, "chunk_delay": 0.05}]}
    for rig in make_rig(tmp_path, monkeypatch, script):
        rig.up.reset_next(after_pieces=5)
        seen: list[str] = []
        with pytest.raises(anthropic.APIError, match="benchctl gateway: upstream stream failed"):
            with _client(rig).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
                for text in s.text_stream:
                    seen.append(text)
        assert seen, "the client got part of the stream before the reset"
        call = rig.events("model_call")[0]
        assert "bytes were sent to the client" in call["error"]
        assert len(rig.up.generation_requests()) == 1


def test_malformed_sse_is_passed_through_and_recorded(rig: Rig) -> None:
    rig.up.malformed_next(after_pieces=2)
    with pytest.raises(Exception):  # noqa: B017  the SDK's own error type for bad SSE varies by version
        with _client(rig).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
            s.get_final_message()
    call = rig.wait_for("model_call")[0]
    assert call["error"].startswith("malformed SSE")
    assert rig.gw.summary()["errors"] == 1


def test_unreachable_upstream_gives_clear_502(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rig in make_rig(tmp_path, monkeypatch):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
        from benchctl.gateway import Gateway, GatewayConfig
        from tests.rigs.gateway import FAST_RETRY

        with Gateway(
            GatewayConfig(model="anthropic/claude-opus-5-5", socket_path=tmp_path / "b.sock", retry=FAST_RETRY),
            rig.transcript,
        ) as gw:
            with pytest.raises(anthropic.APIStatusError, match="upstream unreachable") as err:
                anthropic_client(gw, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG)
            assert err.value.status_code == 502
        error = rig.events("model_error")[0]
        assert len(error["retries"]) == 3 and all(a["status"] is None for a in error["retries"])


def test_refusal_switches_run_to_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    by_model = {
        "claude-opus-5-5": {"turns": [{"refusal": True, "text": "I can't help with that."}]},
        "claude-opus-4-1": {"turns": [{"text": "Here is the analysis."}]},
    }
    for rig in make_rig(
        tmp_path,
        monkeypatch,
        by_model=by_model,
        model="anthropic/claude-opus-5-5",
        fallback="anthropic/claude-opus-4-1",
    ):
        client = _client(rig)
        first = client.messages.create(model="claude-opus-5-5", max_tokens=5, messages=MSG)
        assert first.stop_reason == "refusal"
        with client.messages.stream(model="claude-opus-5-5", max_tokens=5, messages=MSG) as s:
            assert s.get_final_message().content[0].text == "Here is the analysis."
        assert [r.body["model"] for r in rig.up.generation_requests()] == ["claude-opus-5-5", "claude-opus-4-1"]
        calls = rig.events("model_call")
        assert [c["served_model"] for c in calls] == ["anthropic/claude-opus-5-5", "anthropic/claude-opus-4-1"]
        assert calls[0]["refusal"] is True and calls[1]["refusal"] is False
        assert rig.events("refusal")[0]["action"] == "fallback"
        fb = rig.events("fallback")
        assert (
            len(fb) == 1 and fb[0]["from"] == "anthropic/claude-opus-5-5" and fb[0]["to"] == "anthropic/claude-opus-4-1"
        )
        summary = rig.gw.summary()
        assert summary["served_models"] == {"anthropic/claude-opus-5-5": 1, "anthropic/claude-opus-4-1": 1}
        assert summary["refusals"] == 1 and len(summary["fallbacks"]) == 1
        assert summary["current_model"] == "anthropic/claude-opus-4-1"


def test_refusal_retry_policy_asks_again_before_the_client_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {
        "turns": [
            {"refusal": True, "text": "no"},
            {"text": "ok then"},
            {"refusal": True, "text": "no"},
            {"refusal": True, "text": "no"},
        ]
    }
    for rig in make_rig(tmp_path, monkeypatch, script, refusal_policy="retry", refusal_retries=1):
        client = _client(rig)
        with client.messages.stream(model="m", max_tokens=5, messages=MSG) as s:
            assert s.get_final_message().content[0].text == "ok then"
        # Out of retries: the client gets the refusal.
        assert client.messages.create(model="m", max_tokens=5, messages=MSG).stop_reason == "refusal"
        assert len(rig.up.generation_requests()) == 4
        assert [r["action"] for r in rig.events("refusal")] == ["retry", "retry", "none"]
        summary = rig.gw.summary()
        assert summary["served_models"] == {"anthropic/claude-haiku-4-5": 4}
        assert summary["requested_models"] == {"m": 4}  # one per upstream answer, like served_models
        # The held refusals' tokens are in the transcript too, so it adds up to the summary.
        retried = [r for r in rig.events("refusal") if r["action"] == "retry"]
        assert all(r["usage"]["output_tokens"] > 0 and r["cost_usd"] is not None for r in retried)
        output_in_events = sum(e["usage"]["output_tokens"] for e in rig.events("model_call") + retried)
        assert output_in_events == summary["usage"]["output_tokens"]


def test_openai_compatible_base_url_per_name_and_clear_error_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchctl.gateway import Gateway, GatewayConfig
    from benchctl.gateway.clients import openai_client
    from benchctl.gateway.http_upstreams import UpstreamConfigError
    from benchctl.testing.fake_upstream import FakeUpstreamServer

    monkeypatch.delenv("OPENAI_COMPATIBLE_BASE_URL", raising=False)
    with pytest.raises(UpstreamConfigError, match="BENCHCTL_OPENAI_COMPATIBLE_QWEN3_CODER_BASE_URL"):
        Gateway(GatewayConfig(model="openai-compatible/qwen3-coder", socket_path=tmp_path / "x.sock"))
    with FakeUpstreamServer({"turns": [{"text": "open weights here"}]}) as up:
        monkeypatch.setenv("BENCHCTL_OPENAI_COMPATIBLE_QWEN3_CODER_BASE_URL", up.url + "/v1")
        monkeypatch.setenv("OPENAI_COMPATIBLE_QWEN3_CODER_API_KEY", "router-key-123456789")
        with Gateway(GatewayConfig(model="openai-compatible/qwen3-coder", socket_path=tmp_path / "y.sock")) as gw:
            chat = openai_client(gw).chat.completions.create(
                model="anything", messages=[{"role": "user", "content": "hi"}]
            )
        assert chat.choices[0].message.content == "open weights here"
        request = up.generation_requests()[0]
        assert (
            request.body["model"] == "qwen3-coder" and request.headers["authorization"] == "Bearer router-key-123456789"
        )


def test_no_retry_wait_runs_past_the_deadline(rig: Rig) -> None:
    import time

    rig.gw.set_deadline(time.time() + 0.5)
    # Retry-after far beyond both the deadline and any slowness of a loaded machine: waiting for
    # it would take 30 s; not waiting takes well under a second (10 s leaves room for load).
    rig.up.fail_next(503, retry_after=30, times=3)
    t0 = time.monotonic()
    with pytest.raises(anthropic.APIStatusError):
        _client(rig).messages.create(model="m", max_tokens=5, messages=MSG)
    assert time.monotonic() - t0 < 10
    assert len(rig.events("model_call")[0]["retries"]) == 1


def test_close_during_a_stream_returns_promptly_and_records_it(rig: Rig) -> None:
    import threading
    import time

    release = threading.Event()
    rig.up.pause_next(release, after_pieces=2)
    stream = _client(rig).messages.create(model="m", max_tokens=5, stream=True, messages=MSG)
    assert next(iter(stream)).type == "message_start"
    t0 = time.monotonic()
    rig.gw.close()
    assert time.monotonic() - t0 < 5
    release.set()
    call = rig.events("model_call")[0]
    assert call["outcome"] == "cancelled" and call["partial"] is True and "the gateway closed after" in call["error"]


def test_non_streaming_body_cut_short_is_retried(rig: Rig) -> None:
    rig.up.reset_next(after_pieces=1)
    assert _client(rig).messages.create(model="m", max_tokens=5, messages=MSG).content[0].text == "all good"
    retries = rig.events("model_call")[0]["retries"]
    assert len(retries) == 2 and retries[0]["error"].startswith("body failed")


@pytest.mark.parametrize("stream", [False, True])
def test_an_attempt_lost_after_a_2xx_head_makes_the_cost_unknown(rig: Rig, stream: bool) -> None:
    """A 2xx head means the vendor took the call (a non-streaming one's comes when the model has
    finished): it bills that attempt, whose usage never came, besides the retry that answered. So the
    call's cost is unknown (null), not the retry's price alone; the transcript says which attempt."""
    rig.up.reset_next(after_pieces=0 if stream else 1)  # a stream dies before its first byte; a body midway
    if stream:
        with _client(rig).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
            assert s.get_final_message().content[0].text == "all good"
    else:
        assert _client(rig).messages.create(model="m", max_tokens=5, messages=MSG).content[0].text == "all good"
    call = rig.events("model_call")[0]
    first, second = call["retries"]
    assert first["usage_unknown"] is True and "usage_unknown" not in second
    assert call["outcome"] == "ok" and call["usage"]["output_tokens"] > 0  # the answer's own usage, as reported
    assert call["cost_usd"] is None and rig.gw.summary()["cost_usd"] is None


def test_https_upstream_with_certificate_verification(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Vendors are HTTPS: the lean upstream client verifies the certificate (here a local CA via SSL_CERT_FILE)."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    from benchctl.gateway import Gateway, GatewayConfig
    from benchctl.testing.fake_upstream import FakeUpstreamServer

    up = FakeUpstreamServer({"turns": [{"text": "over TLS", "chunks": 3}]})
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    up._server.socket = context.wrap_socket(up._server.socket, server_side=True)  # the fake, served over TLS
    with up:
        port = up.url.rsplit(":", 1)[1]
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"https://localhost:{port}")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-0123456789")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        with Gateway(GatewayConfig(model="anthropic/claude-opus-5-5", socket_path=tmp_path / "gw.sock")) as gw:
            client = anthropic_client(gw, max_retries=0)
            with client.messages.stream(model="m", max_tokens=5, messages=MSG) as s:
                assert s.get_final_message().content[0].text == "over TLS"
            assert client.messages.create(model="m", max_tokens=5, messages=MSG).content[0].text == "over TLS"
        monkeypatch.delenv("SSL_CERT_FILE")  # an untrusted certificate is refused, clearly
        transcript = tmp_path / "t.jsonl"
        from benchctl.transcript import TranscriptWriter

        with (
            TranscriptWriter(transcript) as tw,
            Gateway(GatewayConfig(model="anthropic/claude-opus-5-5", socket_path=tmp_path / "gw2.sock"), tw) as gw,
        ):
            with pytest.raises(anthropic.APIStatusError, match="CERTIFICATE_VERIFY_FAILED"):
                anthropic_client(gw, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG)
        assert b'"retries":[]' in transcript.read_bytes()  # not retried: it would fail the same way


def test_bad_upstream_url_error_does_not_repeat_credentials_from_the_url() -> None:
    import asyncio

    from benchctl.gateway.http_client import ConnectionPool

    async def main() -> str:
        pool = ConnectionPool()
        try:
            await pool.request(
                "POST", "ftp://user:pw-in-url-123@proxy.example/v1/messages?key=qk-in-url-456", {}, b"{}"
            )
        except ValueError as e:
            return str(e)
        finally:
            await pool.aclose()
        raise AssertionError("a non-http URL was accepted")

    message = asyncio.run(main())
    assert "ftp://proxy.example/v1/messages" in message and "ANTHROPIC_BASE_URL" in message
    assert "pw-in-url-123" not in message and "qk-in-url-456" not in message


def test_stream_cut_while_held_for_the_refusal_retry_policy_is_answered_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under refusal_policy=retry the gateway reads each stream whole before answering: a reset in
    the middle must still give the client an error and the transcript a record."""
    script = {"turns": [{"text": "one two three four five six", "chunks": 6}]}
    for rig in make_rig(tmp_path, monkeypatch, script, refusal_policy="retry"):
        rig.up.reset_next(after_pieces=5)
        with pytest.raises(anthropic.APIStatusError, match="upstream stream failed") as err:
            with _client(rig).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
                s.get_final_message()
        assert err.value.status_code == 502
        call = rig.wait_for("model_call")[0]
        assert call["status"] == 502 and "upstream stream failed" in call["error"]
        assert rig.events("model_error") and rig.gw.summary()["errors"] == 1


def _refuse_anthropic(gw) -> None:  # type: ignore[no-untyped-def]
    assert (
        anthropic_client(gw, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG).stop_reason
        == "refusal"
    )


def _refuse_responses(gw) -> None:  # type: ignore[no-untyped-def]
    from benchctl.gateway.clients import openai_client

    out = openai_client(gw, max_retries=0).responses.create(model="m", input="hi").output
    assert out[0].content[0].type == "refusal"


def _refuse_chat(gw) -> None:  # type: ignore[no-untyped-def]
    from benchctl.gateway.clients import openai_client

    chat = openai_client(gw, max_retries=0).chat.completions.create(model="m", messages=MSG)
    assert chat.choices[0].finish_reason == "content_filter"


def _refuse_gemini(gw) -> None:  # type: ignore[no-untyped-def]
    from benchctl.gateway.clients import genai_client

    r = genai_client(gw).models.generate_content(model="m", contents="hi")
    assert r.candidates[0].finish_reason.name == "SAFETY"


@pytest.mark.parametrize(
    "provider,primary,fallback,ask,vendor_reason",
    [
        ("anthropic", "claude-opus-5-5", "claude-opus-4-1", _refuse_anthropic, None),
        ("openai", "gpt-5", "gpt-4.1", _refuse_responses, "completed"),
        ("openai", "gpt-5", "gpt-4.1", _refuse_chat, "content_filter"),
        ("google", "gemini-2.5-pro", "gemini-2.5-flash", _refuse_gemini, "SAFETY"),
    ],
)
def test_refusal_is_recorded_as_refusal_in_every_wire_api(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    primary: str,
    fallback: str,
    ask,  # type: ignore[no-untyped-def]
    vendor_reason: str | None,
) -> None:
    """fallbacks[0] and the refusal event say "refusal" whatever the wire API calls it (Responses'
    status "completed", chat's content_filter, Gemini's SAFETY); the vendor's word is kept beside it."""
    by_model = {
        primary: {"turns": [{"refusal": True, "text": "I can't help with that."}]},
        fallback: {"turns": [{"text": "ok"}]},
    }
    for rig in make_rig(
        tmp_path, monkeypatch, by_model=by_model, model=f"{provider}/{primary}", fallback=f"{provider}/{fallback}"
    ):
        ask(rig.gw)
        (call,) = rig.events("model_call")
        (refusal,) = rig.events("refusal")
        assert refusal["stop_reason"] == "refusal" and refusal.get("upstream_stop_reason") == vendor_reason
        (entry,) = rig.gw.summary()["fallbacks"]
        assert entry["reason"] == "refusal" and entry.get("upstream_stop_reason") == vendor_reason
        assert (entry["from"], entry["to"], entry["call_id"]) == (
            f"{provider}/{primary}",
            f"{provider}/{fallback}",
            call["call_id"],
        )
        assert isinstance(entry["t"], float)
        assert rig.events("fallback")[0] == {**rig.events("fallback")[0], **entry}
