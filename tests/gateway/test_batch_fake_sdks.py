"""The fake upstream's batch APIs driven by the vendors' own SDKs: create, poll, results, cancel,
per-request failures and expiry read through the SDKs' typed models (a shape they reject fails here).
"""

from __future__ import annotations

import io

import anthropic
import openai
import orjson
import pytest
from google import genai
from google.genai import types

from benchctl.testing import FakeUpstreamServer

KEY = "sk-test-batch-0123456789"
SCRIPT = {
    "turns": [{"text": "one", "usage": {"input_tokens": 11, "output_tokens": 3}}, {"text": "two"}, {"text": "three"}]
}


def _params(text: str) -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": text}]}


@pytest.fixture
def up():
    with FakeUpstreamServer(SCRIPT) as server:
        yield server


def test_anthropic_sdk_create_poll_results_with_a_failed_request(up: FakeUpstreamServer) -> None:
    up.batches.per_poll = 1
    up.batches.fail("r1", status=400, message="prompt is too long")
    client = anthropic.Anthropic(base_url=up.url, api_key=KEY, max_retries=0)
    batch = client.messages.batches.create(
        requests=[{"custom_id": f"r{i}", "params": _params(f"q{i}")} for i in range(3)]
    )
    assert batch.processing_status == "in_progress" and batch.id.startswith("msgbatch_")
    assert batch.request_counts.processing == 3 and batch.results_url is None

    polled = client.messages.batches.retrieve(batch.id)  # one processed: in progress, all still "processing"
    assert polled.processing_status == "in_progress" and polled.request_counts.processing == 3
    with pytest.raises(anthropic.AnthropicError, match="results_url"):  # (its own poll processes the 2nd)
        client.messages.batches.results(batch.id)

    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.ended_at is not None
    assert (ended.request_counts.succeeded, ended.request_counts.errored, ended.request_counts.processing) == (2, 1, 0)
    assert ended.results_url == f"{up.url}/v1/messages/batches/{batch.id}/results"

    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert set(results) == {"r0", "r1", "r2"}
    assert results["r1"].type == "errored" and results["r1"].error.error.message == "prompt is too long"
    ok = results["r0"]
    assert ok.type == "succeeded" and ok.message.content[0].text == "one" and ok.message.usage.input_tokens == 11
    assert results["r2"].type == "succeeded" and results["r2"].message.content[0].text == "two"
    assert (up.batches.created, up.batches.requests, up.batches.polls) == (1, 3, 4)
    # the key on every call, results download included (this SDK version sends it as a bearer token)
    assert all(KEY in (r.headers.get("x-api-key", "") + r.headers.get("authorization", "")) for r in up.requests)


def test_anthropic_sdk_cancel_and_expiry(up: FakeUpstreamServer) -> None:
    client = anthropic.Anthropic(base_url=up.url, api_key=KEY, max_retries=0)
    up.batches.per_poll = 1
    batch = client.messages.batches.create(requests=[{"custom_id": f"c{i}", "params": _params("x")} for i in range(3)])
    client.messages.batches.retrieve(batch.id)  # c0 answered
    cancelling = client.messages.batches.cancel(batch.id)
    assert cancelling.processing_status == "canceling" and cancelling.cancel_initiated_at is not None
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended"
    assert (ended.request_counts.succeeded, ended.request_counts.canceled) == (1, 2)
    kinds = {r.custom_id: r.result.type for r in client.messages.batches.results(batch.id)}
    assert kinds == {"c0": "succeeded", "c1": "canceled", "c2": "canceled"}

    up.batches.expire_after = 1
    batch = client.messages.batches.create(requests=[{"custom_id": f"e{i}", "params": _params("x")} for i in range(3)])
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.request_counts.expired == 2
    kinds = {r.custom_id: r.result.type for r in client.messages.batches.results(batch.id)}
    assert sorted(kinds.values()) == ["expired", "expired", "succeeded"]


def test_openai_sdk_file_batch_output_and_error_files(up: FakeUpstreamServer) -> None:
    client = openai.OpenAI(base_url=up.url + "/v1", api_key=KEY, max_retries=0)
    up.batches.fail("o2", status=400, message="bad input")
    lines = [
        {"custom_id": f"o{i}", "method": "POST", "url": "/v1/responses", "body": {"model": "gpt-5", "input": f"q{i}"}}
        for i in range(3)
    ]
    data = b"\n".join(orjson.dumps(line) for line in lines) + b"\n"
    upload = client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    assert upload.purpose == "batch" and upload.bytes == len(data)
    assert client.files.content(upload.id).content == data

    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h")
    assert batch.status == "validating" and batch.input_file_id == upload.id
    done = client.batches.retrieve(batch.id)
    assert done.status == "completed" and done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 2, 1)
    assert done.output_file_id and done.error_file_id

    out = [orjson.loads(x) for x in client.files.content(done.output_file_id).content.splitlines()]
    assert {x["custom_id"] for x in out} == {"o0", "o1"}
    for x in out:
        assert x["response"]["status_code"] == 200 and x["error"] is None
        assert x["response"]["body"]["object"] == "response" and x["response"]["body"]["status"] == "completed"
    errs = [orjson.loads(x) for x in client.files.content(done.error_file_id).content.splitlines()]
    assert errs[0]["custom_id"] == "o2" and errs[0]["response"]["status_code"] == 400
    assert errs[0]["response"]["body"]["error"]["message"] == "bad input"


def test_openai_sdk_cancel_and_expiry_write_error_lines(up: FakeUpstreamServer) -> None:
    client = openai.OpenAI(base_url=up.url + "/v1", api_key=KEY, max_retries=0)
    line = {"custom_id": "x0", "method": "POST", "url": "/v1/responses", "body": {"model": "gpt-5", "input": "q"}}
    data = b"\n".join(orjson.dumps({**line, "custom_id": f"x{i}"}) for i in range(2))
    upload = client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
    up.batches.per_poll = 0  # nothing is processed until cancelled
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h")
    assert client.batches.cancel(batch.id).status == "cancelling"
    done = client.batches.retrieve(batch.id)
    assert done.status == "cancelled" and done.output_file_id is None and done.error_file_id
    codes = {orjson.loads(x)["error"]["code"] for x in client.files.content(done.error_file_id).content.splitlines()}
    assert codes == {"batch_cancelled"}

    up.batches.per_poll = None
    up.batches.expire_after = 0
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h")
    done = client.batches.retrieve(batch.id)
    assert done.status == "expired" and done.expired_at is not None
    codes = {orjson.loads(x)["error"]["code"] for x in client.files.content(done.error_file_id).content.splitlines()}
    assert codes == {"batch_expired"}


def test_openai_sdk_batch_with_lines_for_another_endpoint_fails_validation(up: FakeUpstreamServer) -> None:
    client = openai.OpenAI(base_url=up.url + "/v1", api_key=KEY, max_retries=0)
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "gpt-5"}}
    upload = client.files.create(file=("in.jsonl", io.BytesIO(orjson.dumps(line))), purpose="batch")
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h")
    assert batch.status == "failed" and batch.errors is not None and batch.errors.data
    assert "url /v1/responses" in (batch.errors.data[0].message or "")


def test_gemini_sdk_inline_batch_get_and_cancel(up: FakeUpstreamServer) -> None:
    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=up.url))
    up.batches.fail("g1", status=400)
    src = [types.InlinedRequest(contents=f"q{i}", metadata={"key": f"g{i}"}) for i in range(3)]
    job = client.batches.create(model="gemini-2.5-pro", src=src)
    assert job.name and job.name.startswith("batches/") and job.state == types.JobState.JOB_STATE_PENDING
    done = client.batches.get(name=job.name)
    assert done.state == types.JobState.JOB_STATE_SUCCEEDED and done.dest is not None
    by_key = {r.metadata["key"]: r for r in done.dest.inlined_responses or [] if r.metadata}
    assert set(by_key) == {"g0", "g1", "g2"}
    assert by_key["g0"].response is not None and by_key["g0"].response.text == "one"
    assert by_key["g0"].response.usage_metadata is not None
    assert by_key["g0"].response.usage_metadata.prompt_token_count == 11
    assert by_key["g1"].response is None and by_key["g1"].error is not None and by_key["g1"].error.code == 400

    up.batches.per_poll = 0
    job = client.batches.create(model="gemini-2.5-pro", src=src[:1])
    assert client.batches.get(name=job.name).state == types.JobState.JOB_STATE_RUNNING
    client.batches.cancel(name=job.name)
    assert client.batches.get(name=job.name).state == types.JobState.JOB_STATE_CANCELLED
    assert up.requests[0].headers["x-goog-api-key"] == KEY
