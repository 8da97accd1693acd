"""Calls that do not end normally, end to end through the real gateway, the vendors' SDKs and the
fake upstream over real HTTP: a call cut off because its client left or the gateway closed, and an
upstream that goes silent (the idle timeout). Each forwarded call is in the transcript exactly
once, with its outcome, what had arrived and an honest cost (null when its usage is unknown)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from benchctl.gateway import RetryPolicy
from benchctl.gateway import wire as wf
from benchctl.gateway.clients import anthropic_client, genai_client, openai_client
from benchctl.gateway.retry import IDLE_TIMEOUT_ENV, env_seconds
from benchctl.gateway.wire import summarize
from benchctl.testing.fake_upstream import AT_END
from tests.rigs.gateway import TOOL_TURN, Rig, make_rig

pytestmark = pytest.mark.timeout(90)
MSG = [{"role": "user", "content": "hi"}]
# Idle timeouts of a second, so a stall is noticed quickly; two attempts per call.
QUICK = RetryPolicy(max_attempts=2, initial_wait=0.01, max_wait=0.1, jitter=0.0, idle_timeout=1.0, answer_timeout=1.0)
TEXT = "one two three four five six seven eight"
SLOW_TEXT = {"turns": [{"text": TEXT, "chunks": 8, "usage": {"input_tokens": 50, "output_tokens": 9}}]}


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    yield from make_rig(
        tmp_path, monkeypatch, {"turns": [{"text": "Done.", "usage": {"input_tokens": 7, "output_tokens": 2}}]}
    )


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run a blocking client call in the background; its result or exception lands in the list."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn())
        except Exception as e:
            out.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


def wait_until(pred: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# ---------------------------------------------------------------- cut off: gateway closed, client gone


def test_call_waiting_for_its_answer_when_the_gateway_closes_is_recorded_once(rig: Rig) -> None:
    rig.up.stall_next()  # the upstream takes the request and says nothing
    thread, out = in_thread(
        lambda: anthropic_client(rig.gw, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG)
    )
    rig.up.wait_for_requests(1)
    time.sleep(0.2)
    rig.gw.close()  # the run ends (or Ctrl-C) with the call in flight
    thread.join(10)
    assert isinstance(out[0], anthropic.APIError)
    (call,) = rig.events("model_call")
    assert call["call_id"] == "call-1" and call["outcome"] == "cancelled" and call["status"] is None
    assert "the gateway closed" in call["error"] and call["response"] is None
    assert call["retries"] == [{"attempt": 1, "status": None, "error": call["error"], "wait_s": 0.0}]
    assert call["cost_usd"] is None  # usage unknown on a priced model: unknown, not 0
    assert not rig.events("model_error")  # the run cut it: not an upstream error
    summary = rig.gw.summary()  # read after close: the cut call is counted
    assert summary["calls"] == 1 and summary["cost_usd"] is None and summary["errors"] == 0
    assert summary["served_models"] == {"anthropic/claude-haiku-4-5": 1}


@pytest.mark.parametrize("deadline_passed", [False, True])
def test_client_leaving_stops_the_upstream_call_and_records_it_at_once(rig: Rig, deadline_passed: bool) -> None:
    client = anthropic_client(rig.gw, max_retries=0, timeout=1.5)  # like ReAct's: gives up at its own time
    rig.up.stall_next()
    rig.gw.set_deadline(time.time() + (0.5 if deadline_passed else 3600))
    # Past the deadline the gateway cuts the call itself (before the client's own timeout) and says why.
    with pytest.raises(anthropic.BadRequestError if deadline_passed else anthropic.APITimeoutError) as err:
        client.messages.create(model="m", max_tokens=5, messages=MSG)
    (call,) = rig.wait_for("model_call")  # recorded while the gateway still runs
    assert call["outcome"] == ("timeout" if deadline_passed else "cancelled")
    if deadline_passed:
        assert "time budget exhausted" in str(err.value)
        assert call["error"].startswith("cut off by the gateway after")
    else:
        assert call["error"].startswith("the client went away after")
    assert call["error"].endswith(", past the run's deadline") == deadline_passed
    wait_until(lambda: rig.up.abandoned == 1, "the gateway to drop the upstream call")
    # The next call is served normally on a new connection.
    rig.gw.set_deadline(None)
    assert client.messages.create(model="m", max_tokens=5, messages=MSG).content[0].text == "Done."
    calls = rig.events("model_call")
    assert [c["outcome"] for c in calls] == [call["outcome"], "ok"]
    assert rig.gw.summary()["calls"] == 2 and rig.gw.summary()["cost_usd"] is None


def _anthropic_stream(gw: Any) -> Iterator[str]:
    with anthropic_client(gw, max_retries=0).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
        yield from s.text_stream


def _responses_stream(gw: Any) -> Iterator[str]:
    with openai_client(gw, max_retries=0).responses.stream(model="gpt-5", input="hi") as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                yield ev.delta


def _chat_stream(gw: Any) -> Iterator[str]:
    stream = openai_client(gw, max_retries=0).chat.completions.create(
        model="gpt-5", messages=MSG, stream=True, stream_options={"include_usage": True}
    )
    with stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                yield chunk.choices[0].delta.content


def _gemini_stream(gw: Any) -> Iterator[str]:
    for chunk in genai_client(gw).models.generate_content_stream(model="gemini-2.5-pro", contents="hi"):
        yield chunk.text or ""


STREAMS = {
    "anthropic/claude-haiku-4-5": (_anthropic_stream, 5),
    "openai/gpt-5": (_responses_stream, 6),
    "openai/gpt-5#chat": (_chat_stream, 3),
    "google/gemini-2.5-pro": (_gemini_stream, 2),
}


@pytest.mark.parametrize("model", list(STREAMS))
def test_stream_cut_when_its_client_leaves_keeps_what_arrived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    reader, pieces = STREAMS[model]
    for rig in make_rig(tmp_path, monkeypatch, SLOW_TEXT, model=model.split("#")[0]):
        rig.up.stall_next(after_pieces=pieces)  # some text, then silence
        seen = ""
        stream = reader(rig.gw)
        while len(seen.split()) < 2:
            seen += next(stream)
        stream.close()  # the client gives up mid-stream
        (call,) = rig.wait_for("model_call")
        assert call["outcome"] == "cancelled" and call["partial"] is True and call["status"] == 200
        text = call["response"]["text"]
        assert text.startswith(seen) and TEXT.startswith(text) and text != TEXT
        assert call["cost_usd"] is None  # the final usage never came
        summary = rig.gw.summary()
        assert summary["calls"] == 1 and summary["cost_usd"] is None and summary["errors"] == 0


class _Responses:
    """A call observer (what the hook ledger, harnesses/hooks/ledger.py, is told of each answer)."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[str], str]] = []

    def request(self, headers: dict[str, str], wire_api: str, body: dict[str, Any]) -> None:
        pass

    def response(self, headers: dict[str, str], wire_api: str, tool_call_ids: list[str], outcome: str) -> None:
        self.seen.append((tool_call_ids, outcome))


def test_client_leaving_once_it_has_the_whole_answer_cut_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex drops its connection at `response.completed`, before the upstream's end of body (which
    comes late under load): the answer was whole, so the call is `ok` and its tool calls count (a
    PostToolUse hook for one is honoured only then). Recorded `cancelled`, the hook was refused."""
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [TOOL_TURN]}, model="openai/gpt-5"):
        observer = _Responses()
        rig.gw.add_observer(observer)
        end = threading.Event()
        rig.up.pause_next(end, after_pieces=AT_END)  # every event, then the end of body held back
        try:
            with openai_client(rig.gw, max_retries=0).responses.stream(model="gpt-5", input="hi") as s:
                for ev in s:
                    if ev.type == "response.completed":
                        break  # the client has its answer: it leaves
            (call,) = rig.wait_for("model_call")
        finally:
            end.set()
        assert call["outcome"] == "ok" and "partial" not in call and "error" not in call
        assert call["status"] == 200 and call["cost_usd"] is not None  # the final usage had come
        (tool_call,) = call["response"]["tool_calls"]
        assert tool_call["name"] == "bash" and observer.seen == [([tool_call["id"]], "ok")]


def test_settle_waits_until_the_calls_in_flight_are_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gateway.settle(timeout), which the CLI harnesses call once their CLI exited: a client can have
    its whole answer before the call is recorded (here it stays while the upstream holds its end of
    body back). settle says False at its timeout while that call is unrecorded, and returns True as
    soon as it is recorded; with nothing in flight, at once."""
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [TOOL_TURN]}, model="openai/gpt-5"):
        assert rig.gw.settle(0.0) is True  # nothing in flight
        end = threading.Event()
        rig.up.pause_next(end, after_pieces=AT_END)
        try:
            with openai_client(rig.gw, max_retries=0).responses.stream(model="gpt-5", input="hi") as s:
                for ev in s:
                    if ev.type == "response.completed":
                        break  # the whole answer; the connection stays
                t0 = time.monotonic()
                assert rig.gw.settle(0.2) is False  # bounded: the call is still unrecorded
                assert 0.2 <= time.monotonic() - t0 < 5 and rig.events("model_call", settle=0) == []
                threading.Timer(0.3, end.set).start()
                assert rig.gw.settle(10) is True
                (call,) = rig.events("model_call")  # written before settle returned
        finally:
            end.set()
        assert call["outcome"] == "ok" and call["latency_ms"] >= 300


def test_every_wire_apis_stream_cut_anywhere_is_summarized_as_far_as_it_got() -> None:
    """What arrived of a cut stream, read from the scripted encoder's real wire bytes cut after each
    event: text so far, tool calls as far as they arrived, and usage final only with the last count."""
    reply = wf.Reply(
        "one two three",
        [wf.ToolCall("c1", "bash", {"command": "ls /data"})],
        False,
        None,
        wf.Usage(input_tokens=10, output_tokens=5),
        "m",
    )
    reply.chunk_chars = 4
    for api in ("anthropic_messages", "openai_responses", "openai_chat", "gemini"):
        _ctype, pieces = wf.encode(
            api, reply, stream=True, body={"stream_options": {"include_usage": True}}, query="alt=sse"
        )
        whole = summarize(api, True, b"".join(pieces))
        assert (
            whole.usage_final
            and whole.text == "one two three"
            and whole.tool_calls[0]["input"] == {"command": "ls /data"}
        )
        saw_tool = False
        for n in range(1, len(pieces)):
            s = summarize(api, True, b"".join(pieces[:n]))
            assert "one two three".startswith(s.text), (api, n, s.text)
            if s.tool_calls:
                saw_tool = True
                assert s.tool_calls[0]["name"] == "bash" and s.text == "one two three", (api, n)
            assert not s.usage_final or n == len(pieces) - 1, (api, n)  # only the last count is final
        assert saw_tool or api == "gemini", api  # Gemini sends a call whole, in its last chunk


# ---------------------------------------------------------------- stalled upstreams: the idle timeout


@pytest.mark.parametrize("client", ["lean", "httpx2"])
def test_silent_upstream_is_timed_out_and_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str) -> None:
    if client == "httpx2":
        monkeypatch.setenv("BENCHCTL_GATEWAY_HTTP_CLIENT", "httpx2")
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [{"text": "Done."}]}, retry=QUICK):
        rig.up.stall_next()  # first attempt: silence, no head
        msg = anthropic_client(rig.gw, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG)
        assert msg.content[0].text == "Done."
        (call,) = rig.events("model_call")
        assert call["outcome"] == "ok" and [a["status"] for a in call["retries"]] == [None, 200]
        assert "timeout" in call["retries"][0]["error"].lower()
        # The upstream took the first request and may be answering (and billing) it still: its usage is
        # unknown, so the call's cost is too (the model is priced), though the retry's usage is known.
        assert call["retries"][0]["usage_unknown"] is True and call["usage"]["output_tokens"] > 0
        assert call["cost_usd"] is None
        wait_until(lambda: rig.up.abandoned == 1, "the stalled upstream connection to be dropped")


def test_upstream_silent_on_every_attempt_is_a_recorded_timeout_with_unknown_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rig in make_rig(tmp_path, monkeypatch, model="anthropic/claude-unpriced-test", retry=QUICK):
        rig.up.stall_next(times=2)
        with pytest.raises(anthropic.APIStatusError, match="upstream timed out") as err:
            anthropic_client(rig.gw, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG)
        assert err.value.status_code == 504
        (call,) = rig.events("model_call")
        assert call["outcome"] == "timeout" and call["status"] == 504 and call["cost_usd"] is None
        assert [a["status"] for a in call["retries"]] == [None, None]
        assert all("sent nothing for 1 s (idle timeout)" in a["error"] for a in call["retries"])
        assert rig.events("model_error")[0]["call_id"] == call["call_id"]
        summary = rig.gw.summary()
        assert summary["calls"] == 1 and summary["errors"] == 1 and summary["cost_usd"] is None


def test_stream_that_goes_silent_before_its_first_event_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rig in make_rig(tmp_path, monkeypatch, {"turns": [{"text": "Done.", "chunks": 2}]}, retry=QUICK):
        rig.up.stall_next(after_pieces=0)  # head sent, then silence
        with anthropic_client(rig.gw, max_retries=0).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
            assert s.get_final_message().content[0].text == "Done."
        (call,) = rig.events("model_call")
        assert call["outcome"] == "ok" and [a["status"] for a in call["retries"]] == [None, 200]
        assert "before first byte" in call["retries"][0]["error"]


def test_stream_that_goes_silent_midway_ends_with_an_error_and_a_partial_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rig in make_rig(tmp_path, monkeypatch, SLOW_TEXT, retry=QUICK):
        rig.up.stall_next(after_pieces=5)
        seen: list[str] = []
        with pytest.raises(anthropic.APIError, match="idle timeout"):
            for text in _anthropic_stream(rig.gw):
                seen.append(text)
        (call,) = rig.events("model_call")
        assert call["outcome"] == "timeout" and call["partial"] is True and call["cost_usd"] is None
        assert call["response"]["text"] == "".join(seen) and seen
        assert "idle timeout" in call["error"] and rig.events("model_error")
        assert len(rig.up.generation_requests()) == 1  # the client has part of it: not retried


def test_idle_timeouts_come_from_the_environment_and_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IDLE_TIMEOUT_ENV, "45")
    monkeypatch.setenv("BENCHCTL_GATEWAY_ANSWER_TIMEOUT", "900")
    policy = RetryPolicy()
    assert (policy.idle_timeout, policy.answer_timeout) == (45.0, 900.0)
    monkeypatch.delenv(IDLE_TIMEOUT_ENV)
    assert RetryPolicy().idle_timeout == 120.0
    for bad in ("soon", "0", "-3", "inf"):
        monkeypatch.setenv(IDLE_TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=f"{IDLE_TIMEOUT_ENV}=.*positive number of seconds"):
            env_seconds(IDLE_TIMEOUT_ENV, 120.0)


def test_openai_sdk_sees_the_timeout_as_a_server_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rig in make_rig(tmp_path, monkeypatch, model="openai/gpt-5", retry=QUICK):
        rig.up.stall_next(times=2)
        with pytest.raises(openai.InternalServerError, match="upstream timed out"):
            openai_client(rig.gw, max_retries=0).responses.create(model="gpt-5", input="hi")
        assert rig.events("model_call")[0]["outcome"] == "timeout"


def test_a_bad_idle_timeout_stops_benchctl_run_before_anything_starts(tmp_path: Path) -> None:
    import os

    from tests.rigs.run import cli

    out = tmp_path / "res"
    r = cli(
        "run",
        "configs/demo",
        "--model",
        "scripted/configs/demo/investigator.json",
        "--out",
        str(out),
        env={**os.environ, IDLE_TIMEOUT_ENV: "soon"},
        timeout=120,
    )
    assert r.returncode == 2 and f"{IDLE_TIMEOUT_ENV}='soon' must be a positive number of seconds" in r.stderr
    assert not out.exists()
