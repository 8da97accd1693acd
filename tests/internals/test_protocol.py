"""The internals protocol end to end: InternalsClient against the reference server (tiny model,
real uvicorn on 127.0.0.1) and against the fake server with fault injection; the OpenAI-compatible
subset the black-box tools use; limits and the cost-cap stop; where the URL comes from."""

from __future__ import annotations

import asyncio
import time

import httpx2
import pytest

from benchctl.gateway.retry import RetryPolicy
from benchctl.internals import protocol as p
from benchctl.internals.client import InternalsCallError, InternalsClient, InternalsConfigError, resolve_url
from benchctl.testing.fake_internals import FakeInternalsServer
from tests.rigs.internals import chat_input, runner, served, tiny  # noqa: F401

FAST = RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.05, jitter=0.0)


def run(coro):
    return asyncio.run(coro)


async def _with(url, fn, **kw):
    c = InternalsClient(url, retry=FAST, **kw)
    try:
        return await fn(c)
    finally:
        await c.aclose()


# ---------------------------------------------------------------- the reference server


def test_reference_server_answers_every_operation(served):
    inp = chat_input()

    async def go(c):
        info = await c.info()
        assert info["protocol"] == p.VERSION and info["layers"] == 4 and info["sae"]["layer"] == 2 and info["oracle"]
        pairs = [(p.Input(prompt="Honest answers"), p.Input(prompt="deceptive answers"))]
        built = await c.build_vector("v-test", 1, pairs)
        assert built.data["dim"] == 32 and built.compute_s is not None and built.latency_s >= built.compute_s
        plain, zero, strong = await asyncio.gather(
            c.generate(inp, max_tokens=8, seed=4),
            c.generate(inp, max_tokens=8, seed=4, steering=p.Steering("v-test", 1, 0.0)),
            c.generate(inp, max_tokens=8, seed=4, steering=p.Steering("v-test", 1, 30.0)),
        )
        assert plain.data["text"] == zero.data["text"] != strong.data["text"]
        assert plain.usage["output_tokens"] == 8 and plain.usage["input_tokens"] > 0
        lens = await c.logit_lens(inp, layers=[1, 3], top_k=3, positions="after_system")
        end = lens.data["system_end"]
        assert [row["layer"] for row in lens.data["layers"]] == [1, 3] and end > 0
        assert lens.data["layers"][1]["positions"][0]["kl"] == 0.0
        sae = await c.sae_features(inp, layer=2, top_k=4, positions=[end])
        assert [x["position"] for x in sae.data["positions"]] == [end]
        orc = await c.oracle(inp, question="What is this?", layer=1, positions=[end], samples=2, max_tokens=3)
        assert len(orc.data["positions"][0]["answers"]) == 2
        return info

    run(_with(served.url, go))
    assert served.url.startswith("http://127.0.0.1:")


def test_reference_server_batches_concurrent_generations(served):
    inp = chat_input()

    async def go(c):
        alone = await c.generate(inp, max_tokens=5, temperature=0.0)
        # occupy the worker so the next ones queue up together
        slow = asyncio.create_task(c.generate(inp, max_tokens=60, temperature=0.0))
        await asyncio.sleep(0.05)
        many = await asyncio.gather(*(c.generate(inp, max_tokens=5, temperature=0.0) for _ in range(4)))
        await slow
        return alone, many

    alone, many = run(_with(served.url, go))
    assert max(r.batch_size or 0 for r in many) > 1
    assert {r.data["text"] for r in many} == {alone.data["text"]}  # batched like alone (greedy)


def test_reference_server_errors_name_the_problem(served):
    inp = chat_input()

    async def go(c):
        with pytest.raises(InternalsCallError, match="no steering vector named 'nope'") as e:
            await c.generate(inp, max_tokens=2, steering=p.Steering("nope", 1, 1.0))
        assert e.value.kind == "unknown_vector" and e.value.status == 404
        with pytest.raises(InternalsCallError, match="reads layer 2, not 3") as e:
            await c.sae_features(inp, layer=3, top_k=2)
        assert e.value.kind == "no_sae"
        with pytest.raises(InternalsCallError, match="out of range: the model has layers 0..3"):
            await c.logit_lens(inp, layers=[9], top_k=2)
        with pytest.raises(InternalsCallError, match="give exactly one of `prompt`"):
            await c.call("logit_lens", {"top_k": 2})

    run(_with(served.url, go))
    r = httpx2.post(served.url + p.PATHS["generate"], content=b"{nope")
    assert r.status_code == 400 and r.json()["error"]["type"] == "bad_request"


def test_reference_server_speaks_the_openai_subset_the_black_box_tools_send(served):
    body = {
        "model": "prism-4",
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "My secret"},
        ],
        "continue_final_message": True,
        "add_generation_prompt": False,
        "max_tokens": 4,
        "temperature": 0.0,
    }
    r = httpx2.post(served.url + "/v1/chat/completions", json=body, timeout=60).json()
    assert r["object"] == "chat.completion" and r["usage"]["completion_tokens"] == 4
    assert isinstance(r["choices"][0]["message"]["content"], str)
    # the same continuation through the protocol: the OpenAI route renders the chat the same way
    gen = httpx2.post(
        served.url + p.PATHS["generate"],
        json={"messages": body["messages"], "max_tokens": 4, "temperature": 0.0},
        timeout=60,
    ).json()
    assert gen["text"] == r["choices"][0]["message"]["content"]
    c = httpx2.post(
        served.url + "/v1/completions", json={"model": "x", "prompt": "Dear", "max_tokens": 3}, timeout=60
    ).json()
    assert c["object"] == "text_completion" and c["usage"]["completion_tokens"] == 3
    s = httpx2.post(served.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60)
    assert s.status_code == 400 and "stream" in s.json()["error"]["message"]
    assert httpx2.get(served.url + "/v1/models").json()["data"][0]["id"] == "tiny-model"


# ---------------------------------------------------------------- faults (the fake server)


def test_overloaded_and_reset_are_retried_then_answered():
    with FakeInternalsServer() as srv:
        srv.fail_next(503, retry_after=0.01)
        srv.reset_next()
        r = run(_with(srv.url, lambda c: c.logit_lens(chat_input(), layers=[3], top_k=2)))
        assert r.attempts == 3 and r.data["layers"][0]["layer"] == 3
        assert len(srv.requests) == 3


def test_bad_requests_are_not_retried_and_exhausted_retries_say_why():
    with FakeInternalsServer() as srv:
        srv.fail_next(400)
        with pytest.raises(InternalsCallError, match=r"HTTP 400 \(bad_request\): injected 400"):
            run(_with(srv.url, lambda c: c.sae_features(chat_input(), layer=None, top_k=2)))
        assert len(srv.requests) == 1
        srv.fail_next(502, times=3)
        with pytest.raises(InternalsCallError, match="HTTP 502"):
            run(_with(srv.url, lambda c: c.sae_features(chat_input(), layer=None, top_k=2)))
        assert len(srv.requests) == 4  # one, then three attempts


def test_a_malformed_answer_and_a_stalled_server_fail_clearly():
    with FakeInternalsServer() as srv:
        srv.malformed_next()
        with pytest.raises(InternalsCallError, match="the answer is not JSON") as e:
            run(_with(srv.url, lambda c: c.generate(chat_input(), max_tokens=3)))
        assert e.value.kind == "bad_answer"
        srv.stall_next(3.0)  # one silent answer: given up at the timeout, retried, answered
        r = run(_with(srv.url, lambda c: c.generate(chat_input(), max_tokens=3), timeout=0.3))
        assert r.attempts == 2 and r.data["text"]
        srv.stall_next(3.0, times=3)
        t0 = time.monotonic()
        with pytest.raises(
            InternalsCallError, match="no answer from the internals server .* after 3 attempt.*ReadTimeout"
        ):
            run(_with(srv.url, lambda c: c.generate(chat_input(), max_tokens=3), timeout=0.3))
        assert time.monotonic() - t0 < 2.9  # gave up at its timeouts, not at the stall's end


def test_an_unreachable_server_is_named():
    with FakeInternalsServer() as srv:
        url = srv.url
    with pytest.raises(
        InternalsCallError, match=f"no answer from the internals server {url} after 3 attempt.*ConnectError"
    ) as e:
        run(_with(url, lambda c: c.generate(chat_input(), max_tokens=3)))
    assert e.value.kind == "unreachable"


def _limits(max_connections=None):
    from benchctl.limits.config import LimitsConfig
    from benchctl.limits.local import LocalLimiter
    from benchctl.limits.run import LimitsPlan, RunLimits
    from benchctl.transcript import TranscriptWriter

    cfg = LimitsConfig(max_connections=max_connections)
    return RunLimits(LimitsPlan(LocalLimiter(cfg), cfg), TranscriptWriter(None))


def test_calls_go_through_the_runs_limits_under_the_target_models_key():
    limits = _limits(max_connections=1)
    with FakeInternalsServer(latency=0.4) as srv:

        async def two(c):
            t0 = time.monotonic()
            await asyncio.gather(*(c.generate(chat_input(), max_tokens=2) for _ in range(2)))
            return time.monotonic() - t0

        took = run(_with(srv.url, two, limits=limits, limit_model="openai-compatible/prism-4"))
        assert took >= 0.8  # one connection for the target's server: the two calls went one after the other
        limits.stop.request("the run's cost cap of $1.00 is reached")
        before = len(srv.requests)
        with pytest.raises(InternalsCallError, match="not sent: benchctl: the run's cost cap") as e:
            run(
                _with(
                    srv.url,
                    lambda c: c.generate(chat_input(), max_tokens=2),
                    limits=limits,
                    limit_model="openai-compatible/prism-4",
                )
            )
        assert e.value.kind == "refused" and len(srv.requests) == before


def test_the_url_is_given_or_named_in_the_environment(monkeypatch):
    assert resolve_url("http://127.0.0.1:8100/") == "http://127.0.0.1:8100"
    monkeypatch.setenv("BENCHCTL_INTERNALS_PRISM_4_URL", "http://127.0.0.1:9")
    assert resolve_url("prism-4") == "http://127.0.0.1:9"
    with pytest.raises(InternalsConfigError, match="set BENCHCTL_INTERNALS_OTHER_URL to its base URL"):
        resolve_url("other")
