"""The gateway's own errors, as the official SDKs read them.

For every wire API the gateway serves (Anthropic Messages, OpenAI chat completions and Responses,
Gemini) the gateway is made to fail in a real way: a wrong key, a refused model, a body over the
cap, a full body budget, an upstream that resets or goes silent; non-streaming, and in the middle
of a stream. The bytes it sends go to the vendor's own SDK (`anthropic`, `openai`, `google-genai`)
over the gateway's socket, and the test checks what the SDK makes of them: the exception class, the
HTTP status, the vendor's error type (Gemini: the canonical google.rpc status name) and the
gateway's message. The expected values are written out here, not read from the wire modules, so a
wrong table there fails here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from benchctl.gateway import Gateway, RetryPolicy
from benchctl.gateway.body_limits import MIN_BODY, BodyLimits
from benchctl.gateway.exchange import SANDBOX_TOKEN
from tests.rigs.gateway import FAST_RETRY, Rig, make_rig

pytestmark = pytest.mark.timeout(60)

MODELS = {
    "anthropic_messages": "anthropic/claude-haiku-4-5",
    "openai_chat": "openai/gpt-5",
    "openai_responses": "openai/gpt-5",
    "gemini": "google/gemini-2.5-flash",
}
WIRES = list(MODELS)
TEXT = {
    "turns": [
        {
            "text": "one two three four five six seven eight",
            "chunks": 8,
            "usage": {"input_tokens": 9, "output_tokens": 8},
        }
    ]
}
# One attempt per call and a short idle timeout: a reset or a silent upstream fails the call at once.
ONE_TRY = RetryPolicy(max_attempts=1, initial_wait=0.01, max_wait=0.1, jitter=0.0, idle_timeout=0.5, answer_timeout=0.5)


def _http(gw: Gateway) -> httpx2.Client:
    return httpx2.Client(transport=httpx2.HTTPTransport(uds=str(gw.socket_path)), timeout=httpx2.Timeout(30.0))


def ask(
    wire: str,
    gw: Gateway,
    *,
    key: str = SANDBOX_TOKEN,
    model: str | None = None,
    text: str = "hi",
    stream: bool = False,
) -> Any:
    """One call through the gateway with the vendor's SDK (no SDK retries: each answer is seen as sent).
    A stream is read to its end; the Responses API's stream is returned as its list of events."""
    model = model or MODELS[wire].split("/", 1)[1]
    if wire == "anthropic_messages":
        a = anthropic.Anthropic(api_key=key, base_url="http://gateway", http_client=_http(gw), max_retries=0)
        msgs = [{"role": "user", "content": text}]
        if stream:
            with a.messages.stream(model=model, max_tokens=5, messages=msgs) as s:  # type: ignore[arg-type]
                return s.get_final_message()
        return a.messages.create(model=model, max_tokens=5, messages=msgs)  # type: ignore[arg-type]
    if wire in ("openai_chat", "openai_responses"):
        o = openai.OpenAI(api_key=key, base_url="http://gateway/v1", http_client=_http(gw), max_retries=0)
        out: Any
        if wire == "openai_chat":
            out = o.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], stream=stream)
        else:
            out = o.responses.create(model=model, input=text, stream=stream)
        return list(out) if stream else out  # type: ignore[arg-type]
    g = genai.Client(
        api_key=key, http_options=genai_types.HttpOptions(base_url="http://gateway", httpx_client=_http(gw))
    )
    if stream:
        return list(g.models.generate_content_stream(model=model, contents=text))
    return g.models.generate_content(model=model, contents=text)


# ---------------------------------------------------------------- what each SDK must make of it

# status -> (exception class, error.type) for the Anthropic and OpenAI SDKs; (class, error.status) for Gemini.
Expected = dict[int, tuple[type[Exception], str]]
ANTHROPIC: Expected = {
    400: (anthropic.BadRequestError, "invalid_request_error"),
    401: (anthropic.AuthenticationError, "authentication_error"),
    413: (anthropic.ContentTooLargeError, "request_too_large"),
    429: (anthropic.RateLimitError, "rate_limit_error"),
    502: (anthropic.InternalServerError, "api_error"),
    504: (anthropic.GatewayTimeoutError, "api_error"),
}
OPENAI: Expected = {
    400: (openai.BadRequestError, "invalid_request_error"),
    401: (openai.AuthenticationError, "invalid_request_error"),  # OpenAI's own type for a bad key
    413: (openai.APIStatusError, "request_too_large"),
    429: (openai.RateLimitError, "rate_limit_exceeded"),
    502: (openai.InternalServerError, "server_error"),
    504: (openai.InternalServerError, "server_error"),
}
GEMINI: Expected = {
    400: (genai_errors.ClientError, "INVALID_ARGUMENT"),
    401: (genai_errors.ClientError, "UNAUTHENTICATED"),
    413: (genai_errors.ClientError, "INVALID_ARGUMENT"),
    429: (genai_errors.ClientError, "RESOURCE_EXHAUSTED"),
    502: (genai_errors.ServerError, "UNAVAILABLE"),
    504: (genai_errors.ServerError, "DEADLINE_EXCEEDED"),
}


def check_sdk_error(wire: str, status: int, err: Any, fragment: str) -> None:
    if wire == "anthropic_messages":
        cls, kind = ANTHROPIC[status]
        assert issubclass(type(err), cls) and err.status_code == status, repr(err)
        assert err.type == kind and fragment in (err.api_message or ""), (err.type, err.api_message)
    elif wire == "gemini":
        cls, name = GEMINI[status]
        assert issubclass(type(err), cls) and err.code == status, repr(err)
        assert err.status == name and fragment in (err.message or ""), (err.status, err.message)
    else:
        cls, kind = OPENAI[status]
        assert issubclass(type(err), cls) and err.status_code == status, repr(err)
        assert err.type == kind and err.code == kind, (err.type, err.code)
        assert isinstance(err.body, dict) and fragment in err.body["message"], err.body


# ---------------------------------------------------------------- non-streaming errors


def _wrong_key(rig: Rig, wire: str) -> Callable[[], Any]:
    return lambda: ask(wire, rig.gw, key="sk-not-the-sandbox-token")


def _other_model(rig: Rig, wire: str) -> Callable[[], Any]:
    return lambda: ask(wire, rig.gw, model="some-other-model")  # other_model_policy="reject"


def _body_over_cap(rig: Rig, wire: str) -> Callable[[], Any]:
    return lambda: ask(wire, rig.gw, text="x" * (MIN_BODY + 1024))  # max_body=MIN_BODY


def _budget_full(rig: Rig, wire: str) -> Callable[[], Any]:
    # As if other requests' bodies held all but 8 bytes of the gateway's body budget (set while the
    # gateway is idle: nothing else touches it then).
    rig.gw.body_budget.limit = 8
    return lambda: ask(wire, rig.gw)


def _upstream_reset(rig: Rig, wire: str) -> Callable[[], Any]:
    rig.up.reset_next(after_pieces=0)  # before the first byte, on the only attempt
    return lambda: ask(wire, rig.gw)


def _upstream_silent(rig: Rig, wire: str) -> Callable[[], Any]:
    rig.up.stall_next()  # no answer head: the idle timeout ends it
    return lambda: ask(wire, rig.gw)


CAUSES = {
    401: (_wrong_key, "invalid API key"),
    400: (_other_model, "this run serves"),
    413: (_body_over_cap, "over the"),
    429: (_budget_full, "holding too many request bytes"),
    502: (_upstream_reset, "upstream unreachable"),
    504: (_upstream_silent, "upstream timed out"),
}


@pytest.mark.parametrize("status", list(CAUSES))
@pytest.mark.parametrize("wire", WIRES)
def test_gateway_error_reaches_the_sdk_as_that_vendors_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: str, status: int
) -> None:
    cause, fragment = CAUSES[status]
    for rig in make_rig(
        tmp_path,
        monkeypatch,
        TEXT,
        model=MODELS[wire],
        retry=ONE_TRY,
        other_model_policy="reject",
        body_limits=BodyLimits(max_body=MIN_BODY, max_buffered=MIN_BODY),
    ):
        call = cause(rig, wire)
        with pytest.raises(Exception) as err:
            call()
        check_sdk_error(wire, status, err.value, fragment)


def test_gemini_errors_carry_the_canonical_status_for_the_http_code() -> None:
    """The statuses above cover what the gateway causes; the rest of Google's table, on the same
    builder's bytes, through the SDK's own response check (no made-up names such as API_ERROR)."""
    from benchctl.gateway import wire as wf

    canonical = {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND",
        429: "RESOURCE_EXHAUSTED",
        500: "INTERNAL",
        503: "UNAVAILABLE",
        504: "DEADLINE_EXCEEDED",
    }
    for status, name in canonical.items():
        response = httpx2.Response(
            status,
            content=wf.error_body("gemini", status, "m"),
            request=httpx2.Request("POST", "http://gateway/v1beta/models/m:generateContent"),
        )
        with pytest.raises(genai_errors.APIError) as err:
            genai_errors.APIError.raise_for_response(response)
        assert (err.value.code, err.value.status, err.value.message) == (status, name, "m")


def test_a_request_of_no_known_wire_api_gets_the_anthropic_shape_which_every_sdk_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown path has no wire API: the answer is Anthropic-shaped, and each SDK still finds the
    gateway's message in it (all three read error.message)."""
    for rig in make_rig(tmp_path, monkeypatch, TEXT):
        a = anthropic.Anthropic(
            api_key=SANDBOX_TOKEN, base_url="http://gateway", http_client=_http(rig.gw), max_retries=0
        )
        with pytest.raises(anthropic.NotFoundError) as a_err:
            a.get("/v1/no-such-thing", cast_to=object)
        assert a_err.value.type == "not_found_error"
        assert "no route for GET /v1/no-such-thing" in (a_err.value.api_message or "")
        o = openai.OpenAI(api_key=SANDBOX_TOKEN, base_url="http://gateway/v1", http_client=_http(rig.gw), max_retries=0)
        with pytest.raises(openai.NotFoundError) as o_err:
            o.files.list()
        assert isinstance(o_err.value.body, dict) and "no route for GET /v1/files" in o_err.value.body["message"]
        g = genai.Client(
            api_key=SANDBOX_TOKEN,
            http_options=genai_types.HttpOptions(base_url="http://gateway", httpx_client=_http(rig.gw)),
        )
        with pytest.raises(genai_errors.ClientError) as g_err:
            g.models.embed_content(model="gemini-2.5-flash", contents="hi")  # not a served Gemini method
        g_message = g_err.value.message or ""
        assert g_err.value.code == 404 and "no route for POST /" in g_message and ":batchEmbedContents" in g_message


# ---------------------------------------------------------------- errors in the middle of a stream


def check_stream_error(wire: str, status: int, outcome: Any, fragment: str) -> None:
    """What the SDK made of a 200 stream that ended with the gateway's error event."""
    if wire == "anthropic_messages":  # `event: error`: APIStatusError of the 200 response, typed
        assert isinstance(outcome, anthropic.APIStatusError) and outcome.status_code == 200, repr(outcome)
        assert outcome.type == ANTHROPIC[status][1] and fragment in (outcome.api_message or ""), outcome.body
    elif wire == "openai_chat":  # a `data: {"error": ...}` chunk: APIError
        assert isinstance(outcome, openai.APIError) and not isinstance(outcome, openai.APIStatusError), repr(outcome)
        assert outcome.code == "server_error" and outcome.type == "server_error", (outcome.code, outcome.type)
        assert fragment in outcome.message
    elif wire == "openai_responses":  # the Responses `error` event is an event, not an exception
        assert isinstance(outcome, list), repr(outcome)
        last = outcome[-1]
        assert isinstance(last, openai.types.responses.ResponseErrorEvent), last
        assert last.code == "server_error" and fragment in last.message
        assert len(outcome) > 1 and outcome[0].type == "response.created"  # it did stream before that
    else:  # a `data: {"error": ...}` chunk: the status's APIError subclass
        cls, name = GEMINI[status]
        assert issubclass(type(outcome), cls) and outcome.code == status and outcome.status == name, repr(outcome)
        assert fragment in (outcome.message or "")


def _read_stream(wire: str, gw: Gateway) -> Any:
    try:
        return ask(wire, gw, stream=True)
    except Exception as e:
        return e


@pytest.mark.parametrize("wire", WIRES)
def test_upstream_failing_mid_stream_reaches_the_sdk_as_an_in_stream_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: str
) -> None:
    """The client already has a 200 and part of the answer: the gateway ends the stream with the
    vendor's error event, saying 502 as a whole answer would (the upstream failed)."""
    for rig in make_rig(tmp_path, monkeypatch, TEXT, model=MODELS[wire], retry=ONE_TRY):
        rig.up.reset_next(after_pieces=4)
        outcome = _read_stream(wire, rig.gw)
        check_stream_error(wire, 502, outcome, "benchctl gateway: upstream stream failed")
        assert "upstream stream failed" in rig.wait_for("model_call")[0]["error"]


@pytest.mark.parametrize("wire", WIRES)
def test_stream_cut_at_the_deadline_reaches_the_sdk_as_an_in_stream_400(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: str
) -> None:
    """Cut at the run's deadline mid-stream: the error event says 400 (time budget exhausted), as the
    whole answer of a call cut before its first byte does."""
    for rig in make_rig(tmp_path, monkeypatch, TEXT, model=MODELS[wire], retry=FAST_RETRY):
        rig.up.stall_next(after_pieces=4)  # part of the answer, then silence until the cut
        rig.gw.set_deadline(time.time() + 1.0)
        outcome = _read_stream(wire, rig.gw)
        check_stream_error(wire, 400, outcome, "time budget exhausted")


def test_gemini_stream_error_event_is_framed_like_the_rest_of_googles_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Google's alt=sse stream ends every event with CRLF CRLF; the gateway's error event, appended
    to it, does the same (one framing in one stream), and is the last event."""
    for rig in make_rig(tmp_path, monkeypatch, TEXT, model=MODELS["gemini"], retry=ONE_TRY):
        rig.up.reset_next(after_pieces=4)
        with _http(rig.gw) as http:
            r = http.post(
                "http://gateway/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                headers={"x-goog-api-key": SANDBOX_TOKEN},
                json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            )
        assert r.status_code == 200
        events = r.content.split(b"\r\n\r\n")
        assert events[-1] == b"" and len(events) >= 3, r.content
        assert all(e.startswith(b"data: {") and b"\n" not in e for e in events[:-1]), r.content
        assert events[-2].startswith(b'data: {"error":{"code":502,') and b'"status":"UNAVAILABLE"' in events[-2]
