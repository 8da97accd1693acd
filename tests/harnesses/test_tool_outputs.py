"""The CLI harnesses' tool_result events come from what the model received (harnesses/tool_outputs.py):
the stream parsers fed with CLI output shapes recorded from Codex 0.147 / Claude Code 2.1.332, the
gateway's side as the `model_call` events it writes. The real CLIs in real containers are in
tests/harnesses/test_tool_results.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchctl.transcript import TranscriptWriter
from harnesses.claude_code.stream import ClaudeStreamParser
from harnesses.codex.stream import CodexStreamParser
from harnesses.tool_outputs import MAX_RAW, MAX_TEXT, ClaudeRules, CodexRules, ToolOutputJoin, small_json

TWO_BURSTS = "/bin/bash -lc 'echo A-FIRST; sleep 0.2; echo B-LAST'"
RECEIVED = "Chunk ID: b1e125\nWall time: 0.0651 seconds\nProcess exited with code 0\nOriginal token count: 4\nOutput:\nA-FIRST\nB-LAST\n"


def _setup(tmp_path: Path, cli: str) -> tuple[TranscriptWriter, Any, ToolOutputJoin]:
    tr = TranscriptWriter(tmp_path / "t.jsonl")
    if cli == "codex":
        join = ToolOutputJoin(tr, "codex", CodexRules())
        parser: Any = CodexStreamParser(tr, "codex", join)
    else:
        join = ToolOutputJoin(tr, "claude-code", ClaudeRules())
        parser = ClaudeStreamParser(tr, "claude-code", join)
    tr.listeners.append(join)
    return tr, parser, join


def _events(tmp_path: Path, type: str) -> list[dict[str, Any]]:
    lines = (tmp_path / "t.jsonl").read_bytes().splitlines()
    return [e for e in map(orjson.loads, lines) if e["type"] == type]


def _item(phase: str, iid: str, itype: str, **fields: Any) -> str:
    return json.dumps({"type": f"item.{phase}", "item": {"id": iid, "type": itype, **fields}})


def _responses_call(tr: TranscriptWriter, append: list[dict[str, Any]], calls: list[dict[str, Any]] = ()) -> None:
    """The gateway's record of one Responses request (its new input items) and the model's answer."""
    tr.emit(
        "model_call",
        "gateway",
        wire_api="openai_responses",
        call_id="call-n",
        request={"conv": "c1", "base": None, "keep": 0, "append": append},
        response={"text": "", "tool_calls": list(calls)},
    )


def _exec(call_id: str, cmd: str) -> dict[str, Any]:
    return {"id": call_id, "name": "exec_command", "input": {"cmd": cmd}}


def test_codex_result_is_the_output_the_model_received_not_the_last_burst(tmp_path: Path) -> None:
    tr, parser, join = _setup(tmp_path, "codex")
    _responses_call(tr, [], [_exec("call_A", "echo A-FIRST; sleep 0.2; echo B-LAST")])
    parser.feed(_item("started", "item_3", "command_execution", command=TWO_BURSTS, status="in_progress"))
    parser.feed(
        _item(
            "completed",
            "item_3",
            "command_execution",
            command=TWO_BURSTS,
            aggregated_output="B-LAST\n",
            exit_code=0,
            status="completed",
        )
    )
    assert _events(tmp_path, "tool_result") == []  # not until the model has it
    _responses_call(tr, [{"type": "function_call_output", "call_id": "call_A", "output": RECEIVED}])
    (res,) = _events(tmp_path, "tool_result")
    assert res["output"] == RECEIVED and "A-FIRST" in res["output"]
    assert (res["id"], res["call_id"], res["exit_code"], res["received"], res["truncated"]) == (
        "item_3",
        "call_A",
        0,
        True,
        False,
    )
    assert [c["id"] for c in _events(tmp_path, "tool_call")] == ["item_3"]


def test_codex_request_seen_before_the_stream_item(tmp_path: Path) -> None:
    """The stdout reader may lag behind the gateway: the output waits for its item, and pairs by command."""
    tr, parser, join = _setup(tmp_path, "codex")
    _responses_call(tr, [], [_exec("call_L", "ls"), _exec("call_A", "echo A-FIRST; sleep 0.2; echo B-LAST")])
    _responses_call(
        tr,
        [
            {"type": "function_call_output", "call_id": "call_A", "output": RECEIVED},
            {"type": "function_call_output", "call_id": "call_L", "output": "LS-OUT"},
        ],
    )
    for iid, cmd in (("item_2", "/bin/bash -lc ls"), ("item_3", TWO_BURSTS)):
        parser.feed(_item("started", iid, "command_execution", command=cmd))
        parser.feed(_item("completed", iid, "command_execution", command=cmd, aggregated_output="x", exit_code=0))
    got = {r["id"]: (r["call_id"], r["output"]) for r in _events(tmp_path, "tool_result")}
    assert got == {"item_2": ("call_L", "LS-OUT"), "item_3": ("call_A", RECEIVED)}


def test_codex_rejected_call_gets_its_own_events_and_a_warning(tmp_path: Path) -> None:
    tr, parser, join = _setup(tmp_path, "codex")
    _responses_call(tr, [], [{"id": "call_X", "name": "chat", "namespace": "mcp__target", "input": {"m": "hi"}}])
    _responses_call(
        tr, [{"type": "function_call_output", "call_id": "call_X", "output": "unsupported call: mcp__target__chat"}]
    )
    (call,) = _events(tmp_path, "tool_call")
    (res,) = _events(tmp_path, "tool_result")
    assert (call["id"], call["name"], call["input"], call["cli_reported"]) == (
        "call_X",
        "mcp__target__chat",
        {"m": "hi"},
        False,
    )
    assert (res["rejected"], res["is_error"], res["output"]) == (
        "unknown_tool",
        True,
        "unsupported call: mcp__target__chat",
    )
    (warn,) = _events(tmp_path, "warning")
    assert warn["kind"] == "tool_rejected" and warn["tool"] == "mcp__target__chat" and warn["reason"] == "unknown_tool"
    assert join.rejected == {"unknown_tool": 1}


def test_a_tool_whose_output_never_reached_the_model_keeps_the_clis_report(tmp_path: Path) -> None:
    tr, parser, join = _setup(tmp_path, "codex")
    parser.feed(_item("started", "item_3", "command_execution", command=TWO_BURSTS))
    parser.feed(
        _item("completed", "item_3", "command_execution", command=TWO_BURSTS, aggregated_output="B-LAST\n", exit_code=0)
    )
    parser.feed(_item("started", "item_4", "command_execution", command="/bin/bash -lc 'sleep 99'"))  # killed
    join.end_phase()
    (res,) = _events(tmp_path, "tool_result")
    assert (res["id"], res["output"], res["received"]) == ("item_3", "B-LAST\n", False)


def test_claude_result_includes_what_the_cli_added_for_the_model(tmp_path: Path) -> None:
    """For model names it knows, Claude Code appends hook context inside the tool result (CLI_FACTS.md)."""
    tr, parser, join = _setup(tmp_path, "claude")
    parser.feed(
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "m1",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
                },
            }
        )
    )
    parser.feed(
        json.dumps(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": False}
                    ],
                },
                "tool_use_result": {"interrupted": False},
            }
        )
    )
    sent = [
        {"type": "text", "text": "a.txt"},
        {"type": "text", "text": "<system-reminder>\nPostToolUse:Bash hook additional context: T\n</system-reminder>"},
    ]
    tr.emit(
        "model_call",
        "gateway",
        wire_api="anthropic_messages",
        call_id="call-2",
        request={
            "conv": "c1",
            "base": "call-1",
            "keep": 2,
            "append": [
                {"$response": "call-1"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": sent}]},
            ],
        },
        response={"text": "ok", "tool_calls": []},
    )
    (res,) = _events(tmp_path, "tool_result")
    assert res["output"] == "a.txt\n<system-reminder>\nPostToolUse:Bash hook additional context: T\n</system-reminder>"
    assert (res["name"], res["received"], res["is_error"], res["interrupted"]) == ("Bash", True, False, False)


def test_claude_unknown_tool_is_rejected_and_resent_history_is_not_written_twice(tmp_path: Path) -> None:
    tr, parser, join = _setup(tmp_path, "claude")
    no_tool = "<tool_use_error>Error: No such tool available: mcp__target__chat</tool_use_error>"
    parser.feed(
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "m1",
                    "content": [{"type": "tool_use", "id": "toolu_9", "name": "mcp__target__chat", "input": {}}],
                },
            }
        )
    )
    parser.feed(
        json.dumps(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_9", "content": no_tool, "is_error": True}
                    ],
                },
            }
        )
    )
    for base in (None, None):  # e.g. a resumed session sent the whole history again
        tr.emit(
            "model_call",
            "gateway",
            wire_api="anthropic_messages",
            call_id="call-2",
            request={
                "conv": "c1",
                "base": base,
                "keep": 0,
                "append": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_9", "content": no_tool, "is_error": True}
                        ],
                    }
                ],
            },
            response={"text": "", "tool_calls": []},
        )
    (res,) = _events(tmp_path, "tool_result")
    assert res["rejected"] == "unknown_tool" and res["output"] == no_tool
    assert [w["tool"] for w in _events(tmp_path, "warning")] == ["mcp__target__chat"]


def test_only_the_transcript_copy_is_capped(tmp_path: Path) -> None:
    tr, parser, join = _setup(tmp_path, "codex")
    big = "x" * (MAX_TEXT + 10)
    _responses_call(tr, [], [_exec("call_B", "yes")])
    parser.feed(_item("started", "item_1", "command_execution", command="/bin/bash -lc yes"))
    parser.feed(_item("completed", "item_1", "command_execution", command="/bin/bash -lc yes", aggregated_output="x"))
    _responses_call(tr, [{"type": "function_call_output", "call_id": "call_B", "output": big}])
    (res,) = _events(tmp_path, "tool_result")
    assert res["truncated"] is True and res["output"] == big[:MAX_TEXT]


def test_small_json_keeps_a_small_value_and_cuts_a_big_ones_json() -> None:
    small = {"a": [1, 2], "b": "x"}
    assert small_json(small) is small
    big = {"note": "é" * MAX_RAW}  # 2 bytes a character: the cut may split one
    cut = small_json(big)
    assert isinstance(cut, str) and cut.startswith('{"note":"éé') and len(cut.encode()) <= MAX_RAW + 2


@pytest.mark.parametrize("cli", ["claude-code", "codex"])
@pytest.mark.parametrize("size", [100, MAX_RAW + 100])
def test_both_parsers_keep_a_passed_through_event_whole_up_to_max_raw(tmp_path: Path, cli: str, size: int) -> None:
    """An event neither parser maps (a new Claude `system` subtype, a new Codex item type) goes
    into a harness_event as it is, or as the first MAX_RAW bytes of its JSON when bigger."""
    tr, parser, _ = _setup(tmp_path, cli)
    note = "n" * size
    if cli == "codex":
        parser.feed(_item("completed", "item_1", "brand_new", note=note))
        kind, key = "item_brand_new", "item"
    else:
        parser.feed(json.dumps({"type": "system", "subtype": "brand_new", "note": note}))
        kind, key = "brand_new", "fields"
    (ev,) = [e for e in _events(tmp_path, "harness_event") if e["kind"] == kind]
    if size < MAX_RAW:
        assert ev[key]["note"] == note
    else:
        assert isinstance(ev[key], str) and len(ev[key]) == MAX_RAW and ev[key].endswith("nnn")
