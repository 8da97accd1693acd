"""Script loading and validation, turn selection (order, match rules, after_end), ScriptRequest
extraction from each wire API, Python-callable scripts, and ScriptedUpstream.send pacing."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import orjson
import pytest

from benchctl.gateway.scripted import ScriptedUpstream, ScriptError, ScriptRequest, load_script, script_request
from benchctl.gateway.upstream import ModelId, UpstreamCall


def _call(wire_api: str, body: dict, stream: bool = False, query: str = "") -> UpstreamCall:
    return UpstreamCall(wire_api, "POST", "/x", ModelId("scripted", "s.json"), body, stream, query)  # type: ignore[arg-type]


def _user(text: str) -> UpstreamCall:
    return _call("anthropic_messages", {"model": "m", "messages": [{"role": "user", "content": text}]})


def _text(up: ScriptedUpstream, call: UpstreamCall) -> str:
    r = up.render(call)
    assert r.status == 200, r.pieces
    content = orjson.loads(b"".join(r.pieces))["content"]
    return content[0]["text"] if content else ""


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "script,needle",
    [
        ({"turns": []}, "field 'turns': must be a non-empty list"),
        ({"turn": [{"text": "x"}]}, "field 'turn': unknown top-level field"),
        ({"turns": [{"text": "x"}], "after_end": "loop"}, "field 'after_end': must be one of"),
        ({"turns": [{"text": "a"}, {"txt": "x"}]}, "turn 1, field 'txt': unknown field"),
        ({"turns": [{"text": 3}]}, "turn 0, field 'text': must be a string"),
        ({"turns": [{}]}, "turn 0: a turn needs at least one of"),
        (
            {"turns": [{"tool_calls": [{"input": {}}]}]},
            "turn 0, field 'tool_calls[0]': needs a non-empty string 'name'",
        ),
        (
            {"turns": [{"tool_calls": [{"name": "b", "input": [1]}]}]},
            "field 'tool_calls[0].input': must be a JSON object",
        ),
        ({"turns": [{"tool_calls": [{"name": "b", "args": {}}]}]}, "field 'tool_calls[0].args': unknown field"),
        ({"turns": [{"error": {"status": 200}}]}, "field 'error.status': must be an HTTP error status"),
        ({"turns": [{"error": {"status": 429, "retry_after": "soon"}}]}, "field 'error.retry_after'"),
        ({"turns": [{"text": "x", "match": "("}]}, "field 'match': bad regular expression"),
        ({"turns": [{"text": "x", "match_in": "all"}]}, "field 'match_in'"),
        ({"turns": [{"text": "x", "usage": {"input": 3}}]}, "field 'usage.input': unknown usage key"),
        (
            {"turns": [{"text": "x", "usage": {"input_tokens": -1}}]},
            "field 'usage.input_tokens': must be a non-negative",
        ),
        ({"turns": [{"text": "x", "chunks": 0}]}, "field 'chunks': must be >= 1"),
        ({"turns": [{"text": "x", "delay": -1}]}, "field 'delay': must be >= 0"),
        ({"turns": [{"text": "x", "refusal": "yes"}]}, "field 'refusal': must be true or false"),
        ({"turns": [{"text": "x", "stop_reason": "done"}]}, "field 'stop_reason': 'done' is not one of"),
        ({"turns": [{"text": "x", "reasoning": "hmm"}]}, "field 'reasoning': must be a list of reasoning blocks"),
        ({"turns": [{"text": "x", "reasoning": [{"txt": "a"}]}]}, "field 'reasoning[0].txt': unknown field"),
        ({"turns": [{"text": "x", "reasoning": [{}]}]}, "field 'reasoning[0]': needs text, or redacted: true"),
        (
            {"turns": [{"text": "x", "reasoning": [{"redacted": True, "text": "a"}]}]},
            "field 'reasoning[0].text': a redacted block has no visible text",
        ),
        (
            {"turns": [{"text": "x", "reasoning": [{"text": "a", "signature": 5}]}]},
            "field 'reasoning[0].signature': must be a string",
        ),
        ({"turns": [{"text": "x", "thinking": "a", "reasoning": []}]}, "field 'thinking': give reasoning or thinking"),
        (
            {"turns": [{"tool_calls": [{"name": "b", "signature": 1}]}]},
            "field 'tool_calls[0].signature': must be a string",
        ),
        (
            {"turns": [{"text": "x", "usage": {"cache_read_tokens": 1, "cached_input_tokens": 1}}]},
            "field 'usage.cache_read_tokens': give cached_input_tokens only",
        ),
    ],
)
def test_validation_errors_name_file_turn_and_field(tmp_path: Path, script: dict, needle: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(script))
    with pytest.raises(ScriptError) as err:
        load_script(p)
    assert needle in str(err.value) and str(p) in str(err.value)


def test_cached_input_tokens_and_its_old_name_cache_read_tokens() -> None:
    """Scripts say cached_input_tokens, the transcript's name; cache_read_tokens (files already on
    disk) is read as the same count."""
    for key in ("cached_input_tokens", "cache_read_tokens"):
        up = ScriptedUpstream({"turns": [{"text": "x", "usage": {"input_tokens": 5, key: 40}}]})
        (turn,) = up.script.turns if up.script else []
        assert turn.usage == {"input_tokens": 5, "cached_input_tokens": 40}


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="file not found.*relative to the current directory"):
        ScriptedUpstream("scripted/nope.json")
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ScriptError, match="broken.json: not valid JSON"):
        load_script(tmp_path / "broken.json")
    (tmp_path / "broken.toml").write_text("turns = [")
    with pytest.raises(ScriptError, match="not valid TOML"):
        load_script(tmp_path / "broken.toml")
    with pytest.raises(ScriptError, match="py:package.module:function"):
        ScriptedUpstream("py:onlymodule")
    with pytest.raises(ScriptError, match="has no callable 'nothing_here'"):
        ScriptedUpstream("py:json:nothing_here")


def test_toml_script(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(
        'after_end = "stop"\n[[turns]]\ntext = "hi"\n[[turns.tool_calls]]\nname = "bash"\ninput = { command = "ls" }\n'
    )
    up = ScriptedUpstream(ModelId("scripted", str(tmp_path / "s.toml")))
    body = orjson.loads(b"".join(up.render(_user("x")).pieces))
    assert body["content"][1]["input"] == {"command": "ls"}
    assert _text(up, _user("x")) == "[script finished]"


# ---------------------------------------------------------------- selection


def test_in_order_then_after_end_modes() -> None:
    turns = [{"text": "one"}, {"text": "two"}]
    up = ScriptedUpstream({"turns": turns})  # repeat_last by default
    assert [_text(up, _user("q")) for _ in range(4)] == ["one", "two", "two", "two"]
    up = ScriptedUpstream({"turns": turns, "after_end": "error"})
    _text(up, _user("q")), _text(up, _user("q"))
    r = up.render(_user("q"))
    assert r.status == 400 and b"script exhausted" in r.pieces[0]


def test_match_rules_win_and_are_not_consumed() -> None:
    up = ScriptedUpstream(
        {
            "turns": [
                {"text": "one"},
                {"match": r"finding ids: .*F3", "text": "rule F3"},
                {"match": r"SECRET", "match_in": "request", "text": "rule in system"},
                {"text": "two"},
            ]
        }
    )
    assert _text(up, _user("finding ids: F1, F3")) == "rule F3"
    assert _text(up, _user("nothing")) == "one"
    assert _text(up, _user("finding ids: F3")) == "rule F3"
    assert _text(up, _user("nothing")) == "two"
    sys_call = _call("anthropic_messages", {"system": "SECRET rubric", "messages": [{"role": "user", "content": "x"}]})
    assert _text(up, sys_call) == "rule in system"
    # match_in last_user ignores earlier messages
    hist = _call(
        "anthropic_messages",
        {
            "messages": [
                {"role": "user", "content": "finding ids: F3"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "next"},
            ]
        },
    )
    assert _text(up, hist) == "two"


def test_order_is_thread_safe() -> None:
    n = 200
    up = ScriptedUpstream({"turns": [{"text": str(i)} for i in range(n)], "after_end": "error"})
    out: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(n // 8):
            t = _text(up, _user("q"))
            with lock:
                out.append(t)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out, key=int) == [str(i) for i in range(n)]  # each turn exactly once


def test_python_callable_sees_the_request() -> None:
    seen: list[ScriptRequest] = []

    def judge(req: ScriptRequest) -> dict:
        seen.append(req)
        return {"text": f"tools={','.join(req.tool_names)}"}

    up = ScriptedUpstream(judge)
    call = _call(
        "anthropic_messages",
        {
            "model": "claude-x",
            "system": [{"type": "text", "text": "SYS"}],
            "tools": [{"name": "bash", "input_schema": {}}],
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert _text(up, call) == "tools=bash"
    assert seen[0].system == "SYS" and seen[0].model == "claude-x" and seen[0].wire_api == "anthropic_messages"

    bad = ScriptedUpstream(lambda req: {"txt": "oops"})
    with pytest.raises(ScriptError, match="turn 0, field 'txt'"):
        bad.render(call)


# ---------------------------------------------------------------- request views per wire API


def test_last_user_text_includes_tool_results_and_notices() -> None:
    anth = _call(
        "anthropic_messages",
        {
            "messages": [
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"c": 1}}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "file-a"}]},
                        {"type": "text", "text": "Time remaining: 5 min"},
                    ],
                },
            ]
        },
    )
    r = script_request(anth)
    assert "file-a" in r.last_user_text and "Time remaining" in r.last_user_text and "task" not in r.last_user_text

    resp = _call(
        "openai_responses",
        {
            "instructions": "INS",
            "tools": [{"type": "function", "name": "shell"}],
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "task"}]},
                {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "out-1"},
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "hook says hi"}]},
            ],
        },
    )
    r = script_request(resp)
    assert r.system == "INS" and r.tool_names == ["shell"]
    assert "out-1" in r.last_user_text and "hook says hi" in r.last_user_text

    chat = _call(
        "openai_chat",
        {
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "messages": [
                {"role": "system", "content": "S"},
                {"role": "user", "content": "u1"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "c", "content": "tool-out"},
            ],
        },
    )
    r = script_request(chat)
    assert r.system == "S" and r.tool_names == ["f"] and r.last_user_text == "tool-out"

    gem = _call(
        "gemini",
        {
            "systemInstruction": {"parts": [{"text": "GS"}]},
            "tools": [{"functionDeclarations": [{"name": "g"}]}],
            "contents": [
                {"role": "user", "parts": [{"text": "u"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "g", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "g", "response": {"output": "g-out"}}}]},
            ],
        },
    )
    r = script_request(gem)
    assert r.system == "GS" and r.tool_names == ["g"] and r.last_user_text == "g-out"


# ---------------------------------------------------------------- send(): pacing, usage, count_tokens


def test_send_paces_stream_and_reports_usage() -> None:
    up = ScriptedUpstream(
        {"turns": [{"text": "abcdefghij", "chunks": 5, "chunk_delay": 0.02, "delay": 0.05, "model": "served-x"}]}
    )

    async def go():
        t0 = time.perf_counter()
        resp = await up.send(
            _call(
                "anthropic_messages", {"model": "m", "messages": [{"role": "user", "content": "x" * 400}]}, stream=True
            )
        )
        t_headers = time.perf_counter() - t0
        pieces = [p async for p in resp.body]
        return resp, t_headers, time.perf_counter() - t0, pieces

    resp, t_headers, t_total, pieces = asyncio.run(go())
    assert resp.status == 200 and resp.headers["content-type"] == "text/event-stream"
    assert resp.served_model == "served-x"
    assert t_headers >= 0.05 and t_total >= 0.05 + 0.02 * (len(pieces) - 1)
    deltas = [p for p in pieces if b"text_delta" in p]
    assert len(deltas) == 5
    start = json.loads(pieces[0].split(b"data: ", 1)[1])
    assert start["message"]["usage"]["input_tokens"] >= 100  # estimated from the request text


def test_count_tokens_does_not_consume_a_turn() -> None:
    up = ScriptedUpstream({"turns": [{"text": "only"}], "after_end": "error"})
    r = up.render(_call("anthropic_count_tokens", {"messages": [{"role": "user", "content": "y" * 80}]}))
    assert orjson.loads(r.pieces[0]) == {"input_tokens": 20}
    assert _text(up, _user("q")) == "only"


def test_free_form_tool_input() -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
    up = ScriptedUpstream({"turns": [{"tool_calls": [{"name": "apply_patch", "input": patch}]}]})
    resp = orjson.loads(b"".join(up.render(_call("openai_responses", {"input": "x"})).pieces))
    assert resp["output"][0]["type"] == "custom_tool_call" and resp["output"][0]["input"] == patch
    anth = orjson.loads(b"".join(up.render(_user("x")).pieces))
    assert anth["content"][0]["input"] == {"input": patch}
    events = up.render(_call("openai_responses", {"input": "x"}, stream=True)).pieces
    deltas = [json.loads(e.split(b"data: ", 1)[1])["delta"] for e in events if b"custom_tool_call_input.delta" in e]
    assert "".join(deltas) == patch


# ---------------------------------------------------------------- Responses: namespaced and deferred tools

# What Codex 0.147 sends (CLI_FACTS.md): MCP tools as a `namespace` tool for model names it has no
# metadata for; behind a client-side `tool_search` tool for the ones it knows, loaded by a
# `tool_search_output` item that it sends back in `input`.
NAMESPACE = {
    "type": "namespace",
    "name": "mcp__target",
    "description": "Tools for probing PRISM-4.",
    "tools": [{"type": "function", "name": "chat", "parameters": {}}],
}
TOOL_SEARCH = {
    "type": "tool_search",
    "execution": "client",
    "description": "Searches deferred tools.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
}
EXEC = {"type": "function", "name": "exec_command", "parameters": {}}


def _responses(up: ScriptedUpstream, tools: list, items: list | None = None, stream: bool = False) -> list[dict]:
    """The output items of one Responses answer (from the completed event when streaming)."""
    body = {"model": "gpt-5.5", "tools": tools, "input": items or [{"role": "user", "content": "go"}], "stream": stream}
    pieces = up.render(_call("openai_responses", body, stream=stream)).pieces
    if not stream:
        return orjson.loads(b"".join(pieces))["output"]
    events = [json.loads(p.split(b"data: ", 1)[1]) for p in pieces]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done == next(e for e in events if e["type"] == "response.completed")["response"]["output"]
    return done


@pytest.mark.parametrize("stream", [False, True])
def test_a_namespace_member_is_called_with_its_namespace(stream: bool) -> None:
    """A call named flat (as Claude Code names MCP tools) or with `namespace` reaches a namespace tool's
    member the way the Responses API calls it; other APIs get the flat name."""
    up = ScriptedUpstream(
        {
            "turns": [
                {"tool_calls": [{"name": "mcp__target__chat", "input": {"message": "hi"}}]},
                {"tool_calls": [{"name": "chat", "namespace": "mcp__target", "input": {"message": "again"}}]},
                {"tool_calls": [{"name": "chat", "namespace": "mcp__target", "input": {"message": "anthropic"}}]},
            ]
        }
    )
    for message in ("hi", "again"):
        (item,) = _responses(up, [EXEC, NAMESPACE], stream=stream)
        assert (item["type"], item["namespace"], item["name"]) == ("function_call", "mcp__target", "chat")
        assert json.loads(item["arguments"]) == {"message": message}
    anth = orjson.loads(b"".join(up.render(_user("x")).pieces))
    assert anth["content"][0]["name"] == "mcp__target__chat"
    r = script_request(_call("openai_responses", {"tools": [EXEC, NAMESPACE, TOOL_SEARCH], "input": "x"}))
    assert r.tool_names == ["exec_command", "mcp__target__chat", "tool_search"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_deferred_tool_is_searched_for_first_and_the_turn_kept(stream: bool) -> None:
    up = ScriptedUpstream(
        {"turns": [{"text": "Probe.", "tool_calls": [{"name": "mcp__target__chat", "input": {}}]}, {"text": "Done."}]}
    )
    (search,) = _responses(up, [EXEC, TOOL_SEARCH], stream=stream)
    assert search["type"] == "tool_search_call" and search["execution"] == "client"
    assert search["arguments"] == {"query": "mcp target chat"}
    # Codex runs the search and sends the loaded tools back as a tool_search_output item
    loaded = [
        {"role": "user", "content": "go"},
        search,
        {"type": "tool_search_output", "call_id": search["call_id"], "execution": "client", "tools": [NAMESPACE]},
    ]
    r = script_request(_call("openai_responses", {"tools": [EXEC, TOOL_SEARCH], "input": loaded}))
    assert "mcp__target__chat" in r.tool_names
    items = _responses(up, [EXEC, TOOL_SEARCH], loaded, stream=stream)  # the same turn, now answered
    assert [i["type"] for i in items] == ["message", "function_call"]
    assert (items[1]["namespace"], items[1]["name"]) == ("mcp__target", "chat")
    assert _responses(up, [EXEC, TOOL_SEARCH], loaded)[0]["content"][0]["text"] == "Done."


def test_a_tool_that_no_search_finds_is_called_anyway_once_searched() -> None:
    """One search per tool: then the call goes out as written and the CLI rejects it (no endless searching)."""
    up = ScriptedUpstream({"turns": [{"tool_calls": [{"name": "nosuch", "input": {}}]}]})
    (search,) = _responses(up, [EXEC, TOOL_SEARCH])
    searched = [
        {"role": "user", "content": "go"},
        search,
        {"type": "tool_search_output", "call_id": search["call_id"], "execution": "client", "tools": []},
    ]
    (call,) = _responses(up, [EXEC, TOOL_SEARCH], searched)
    assert (call["type"], call["name"]) == ("function_call", "nosuch") and "namespace" not in call
    # without a tool search, an unknown tool is called as written at once
    (plain,) = _responses(ScriptedUpstream({"turns": [{"tool_calls": [{"name": "nosuch", "input": {}}]}]}), [EXEC])
    assert plain["name"] == "nosuch"


def test_an_explicit_tool_search_call() -> None:
    up = ScriptedUpstream(lambda req: {"tool_calls": [{"name": "tool_search", "input": {"query": "target chat"}}]})
    (item,) = _responses(up, [EXEC, TOOL_SEARCH])
    assert item["type"] == "tool_search_call" and item["arguments"] == {"query": "target chat"}


def test_namespace_must_be_a_string() -> None:
    with pytest.raises(ScriptError, match=r"turn 0, field 'tool_calls\[0\].namespace': must be a string"):
        ScriptedUpstream({"turns": [{"tool_calls": [{"name": "chat", "namespace": 3}]}]})


@pytest.mark.parametrize("stream", [False, True])
def test_the_gateway_records_namespaced_calls_and_tool_searches(stream: bool) -> None:
    from benchctl.gateway.wire import summarize

    up = ScriptedUpstream(
        {
            "turns": [
                {
                    "tool_calls": [
                        {"name": "mcp__target__chat", "input": {"m": 1}},
                        {"name": "tool_search", "input": {"query": "q"}},
                    ]
                }
            ]
        }
    )
    body = {"tools": [NAMESPACE, TOOL_SEARCH], "input": "x"}
    r = up.render(_call("openai_responses", body, stream=stream))
    calls = summarize("openai_responses", stream, b"".join(r.pieces)).tool_calls
    assert [(c["name"], c.get("namespace"), c["input"]) for c in calls] == [
        ("chat", "mcp__target", {"m": 1}),
        ("tool_search", None, {"query": "q"}),
    ]
