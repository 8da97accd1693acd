"""benchctl.gateway.complete.complete / acomplete: scripted judges and real providers against a fake upstream."""

from __future__ import annotations

import asyncio
import json
import random
import sys
import textwrap
from pathlib import Path

import pytest

from benchctl.gateway.complete import ModelCallError, acomplete, complete, reset_upstreams
from benchctl.testing import FakeUpstreamServer
from benchctl.transcript import TranscriptWriter

USER = [{"role": "user", "content": "Grade this report."}]


def _script(tmp_path: Path, data: dict, name: str = "judge.json") -> str:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return f"scripted/{p}"


@pytest.fixture(autouse=True)
def _fresh_upstreams():
    reset_upstreams()
    yield
    reset_upstreams()


def test_scripted_turns_consumed_in_order_across_calls(tmp_path: Path) -> None:
    model = _script(
        tmp_path,
        {
            "turns": [
                {"text": "first", "usage": {"input_tokens": 100, "output_tokens": 7}},
                {"refusal": True, "text": "no"},
            ],
            "after_end": "stop",
        },
    )
    c = complete(model, USER, system="You grade.", temperature=0)
    assert c.text == "first" and c.stop_reason == "end_turn" and not c.refusal
    assert c.usage["input_tokens"] == 100 and c.usage["output_tokens"] == 7
    assert c.cost_usd == 0.0  # scripted models are priced at 0 in the built-in table, not unknown
    assert c.latency_s >= 0
    c = complete(model, USER)
    assert c.refusal and c.stop_reason == "refusal" and c.text == "no"
    assert complete(model, USER).text == "[script finished]"


def test_relative_script_path_resolves_against_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s.toml").write_text('[[turns]]\ntext = "from toml"\n')
    monkeypatch.chdir(tmp_path)
    assert complete("scripted/s.toml", USER).text == "from toml"


def test_match_rules_answer_concurrent_calls_correctly(tmp_path: Path) -> None:
    rules = [
        {"match": rf"finding ids: .*\bF{i}\b", "text": json.dumps({"id": f"F{i}", "score": i / 10})} for i in range(8)
    ]
    model = _script(tmp_path, {"turns": rules, "after_end": "error"})
    asks = [random.Random(i).randrange(8) for i in range(64)]

    async def run():
        return await asyncio.gather(
            *[acomplete(model, [{"role": "user", "content": f"Score these. finding ids: F{i}"}]) for i in asks]
        )

    results = asyncio.run(run())
    assert [json.loads(r.text)["id"] for r in results] == [f"F{i}" for i in asks]


def test_sync_complete_from_many_threads(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    model = _script(tmp_path, {"turns": [{"match": r"item (\d+)", "text": "seen"}], "after_end": "error"})
    with ThreadPoolExecutor(16) as pool:
        out = list(pool.map(lambda i: complete(model, [{"role": "user", "content": f"item {i}"}]).text, range(64)))
    assert out == ["seen"] * 64


def test_python_callable_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_judge.py").write_text(
        textwrap.dedent("""
        def judge(req):
            return {"text": f"{req.wire_api}|{req.system}|{req.last_user_text.upper()}|{len(req.messages)}",
                    "usage": {"input_tokens": 5, "output_tokens": 2}}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    c = complete("scripted/py:my_judge:judge", USER, system="SYS")
    assert c.text == "anthropic_messages|SYS|GRADE THIS REPORT.|1"
    sys.modules.pop("my_judge", None)


def test_error_turn_retried_then_succeeds(tmp_path: Path) -> None:
    model = _script(
        tmp_path,
        {"turns": [{"error": {"status": 529, "message": "overloaded", "retry_after": 0}}, {"text": "ok after retry"}]},
    )
    assert complete(model, USER).text == "ok after retry"


def test_persistent_error_raises_after_retries(tmp_path: Path) -> None:
    model = _script(tmp_path, {"turns": [{"error": {"status": 500, "message": "boom", "retry_after": 0}}]})
    with pytest.raises(ModelCallError, match=r"boom.*after 5 attempts"):
        complete(model, USER)


def test_client_error_is_not_retried(tmp_path: Path) -> None:
    model = _script(tmp_path, {"turns": [{"error": {"status": 400, "message": "bad prompt"}}, {"text": "unused"}]})
    with pytest.raises(ModelCallError, match="bad prompt") as err:
        complete(model, USER)
    assert "attempts" not in str(err.value)


def test_transcript_gets_the_call(tmp_path: Path) -> None:
    model = _script(tmp_path, {"turns": [{"text": "graded", "usage": {"input_tokens": 10, "output_tokens": 3}}]})
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as tw:
        complete(model, USER, system="S", transcript=tw)
    ev = json.loads(path.read_text().splitlines()[0])
    assert ev["type"] == "model_call" and ev["requested_model"] == model and ev["text"] == "graded"
    assert ev["usage"]["output_tokens"] == 3 and ev["messages"] == USER


@pytest.mark.parametrize(
    "model,error",
    [
        ("nope/x", "unknown provider"),
        ("claude", "provider/name"),
        ("scripted/does/not/exist.json", "file not found"),
        ("scripted/py:no_such_module_xyz:f", "cannot import"),
    ],
)
def test_bad_model_ids_are_clear_errors(model: str, error: str) -> None:
    with pytest.raises(ModelCallError, match=error):
        complete(model, USER)


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ModelCallError, match="set OPENAI_API_KEY"):
        complete("openai/gpt-5", USER)


def test_bad_messages_are_clear_errors(tmp_path: Path) -> None:
    model = _script(tmp_path, {"turns": [{"text": "x"}]})
    with pytest.raises(ModelCallError, match="system="):
        complete(model, [{"role": "system", "content": "s"}])


# ---------------------------------------------------------------- real providers, fake upstream

JUDGE_SCRIPT = {"turns": [{"text": '{"score": 0.7}', "usage": {"input_tokens": 1000, "output_tokens": 10}}]}


@pytest.mark.parametrize(
    "provider,env,suffix,path",
    [
        (
            "anthropic/claude-haiku-4-5",
            {"ANTHROPIC_BASE_URL": "", "ANTHROPIC_API_KEY": "sk-ant-fake-123456"},
            "",
            "/v1/messages",
        ),
        ("openai/gpt-5", {"OPENAI_BASE_URL": "/v1", "OPENAI_API_KEY": "sk-fake-123456"}, "", "/v1/responses"),
        ("openai-compatible/llama", {"BENCHCTL_OPENAI_COMPATIBLE_LLAMA_BASE_URL": "/v1"}, "", "/v1/chat/completions"),
        (
            "google/gemini-2.5-pro",
            {"GOOGLE_GEMINI_BASE_URL": "", "GEMINI_API_KEY": "g-fake-123456"},
            "",
            "/v1beta/models/gemini-2.5-pro:generateContent",
        ),
    ],
)
def test_each_provider_native_wire(
    provider: str, env: dict, suffix: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeUpstreamServer(JUDGE_SCRIPT) as up:
        for k, v in env.items():
            monkeypatch.setenv(k, up.url + v if k.endswith("BASE_URL") else v)
        c = complete(provider, USER, system="You are a grader.", max_tokens=321, temperature=0)
        assert c.text == '{"score": 0.7}' and c.stop_reason is not None and not c.refusal
        assert c.usage["output_tokens"] == 10 and c.usage["input_tokens"] == 1000
        if not provider.startswith("openai-compatible"):
            assert c.cost_usd is not None and c.cost_usd > 0
        req = up.requests[0]
        assert req.path == path
        body = json.dumps(req.body)
        assert "You are a grader." in body and "Grade this report." in body and "321" in body


def test_sync_complete_inside_a_running_event_loop(tmp_path: Path) -> None:
    model = _script(tmp_path, {"turns": [{"text": "fine"}]})

    async def caller() -> str:
        return complete(model, USER).text  # blocking call from async code must not deadlock

    assert asyncio.run(caller()) == "fine"


def test_temperature_rejected_by_model_is_dropped_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "reasoning_model.py").write_text(
        textwrap.dedent("""
        def answer(req):
            if "temperature" in req.body:
                return {"error": {"status": 400, "message": "Unsupported parameter: 'temperature' is not supported"}}
            return {"text": "graded without temperature"}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as tw:
        c = complete("scripted/py:reasoning_model:answer", USER, temperature=0, transcript=tw)
    assert c.text == "graded without temperature"
    assert json.loads(path.read_text())["dropped_params"] == ["temperature"]
    # a 400 about anything else is an error, not a silent resend
    other = _script(tmp_path, {"turns": [{"error": {"status": 400, "message": "Unsupported parameter: x"}}]})
    with pytest.raises(ModelCallError, match="Unsupported parameter: x"):
        complete(other, USER, temperature=0)
    sys.modules.pop("reasoning_model", None)


def test_error_messages_never_carry_a_host_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upstream error body that quotes the key is scrubbed before the message reaches grade files."""
    key = "sk-real-judge-key-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    model = _script(tmp_path, {"turns": [{"error": {"status": 401, "message": f"invalid api key {key}"}}]})
    with pytest.raises(ModelCallError) as err:
        complete(model, USER)
    assert "invalid api key [REDACTED]" in str(err.value) and key not in str(err.value)


def test_judge_attempt_lost_after_a_2xx_head_makes_the_cost_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge's answer cut short after its 2xx head is retried; the vendor bills that attempt too and its
    usage never came, so the judge call's cost is unknown (null), not the retry's price alone. A retried
    error status generated nothing: that call is priced."""
    with FakeUpstreamServer(JUDGE_SCRIPT) as up:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", up.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-123456")
        up.reset_next(after_pieces=1)  # the non-streaming body, cut midway
        c = complete("anthropic/claude-haiku-4-5", USER)
        assert c.text == '{"score": 0.7}' and c.usage["output_tokens"] == 10 and c.cost_usd is None
        up.fail_next(429, retry_after=0)
        assert complete("anthropic/claude-haiku-4-5", USER).cost_usd == round((1000 * 1.0 + 10 * 5.0) / 1e6, 8)
