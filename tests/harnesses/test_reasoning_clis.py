"""Reasoning through the real Claude Code and Codex CLIs, end to end: a scripted model thinks on
every answer (the final one too; a visible block with a signature and a redacted block on the
first), a real run in a Docker sandbox through the real gateway, then both exports. The reasoning
is in each answer's `model_call` record, in the CLI's assistant events, in the Inspect and ATIF
exports (read back with their own readers), and the CLI's next request carries the opaque parts
byte for byte (the CLIs send reasoning back themselves; the gateway's record of that request is
what is checked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from atif import Trajectory
from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessageAssistant, ContentReasoning

from benchctl.export import export
from benchctl.gateway.recording import reconstruct
from benchctl.jsonio import read_json, read_jsonl
from tests.rigs.run import make_scripted_task, run_inprocess, runs

pytestmark = [pytest.mark.docker, pytest.mark.cli_binaries]

HARNESSES = ("claude-code", "codex")
# Opaque strings with the characters a careless copy changes (base64's + / =, a backslash, unicode)
FIRST_SIG = "EqQBCkYIBxgCKkB+/sig1==\\u00e9é"
WITHHELD = "EmwKAhgBEgy+/redacted-data=="
SECOND_SIG = "EqQBCkYIBxgC+/sig2=="
FINAL_SIG = "EqQBCkYIBxgC+/sig3=="
THOUGHTS = ["Plan: list /data first.", "The log names the disk; write it up.", "The report is written; done."]


def script(harness: str) -> list[dict[str, Any]]:
    """Three answers that think; the first also withholds a block. Codex's visible reasoning is a
    summary (as OpenAI's models give it, and all that Codex shows of an item)."""
    summary = {"summary": True} if harness == "codex" else {}
    if harness == "claude-code":
        listing = {"name": "Bash", "input": {"command": "ls /data", "description": "list"}}
        write = {"name": "Bash", "input": {"command": "echo '# disk full' > /work/report.md", "description": "write"}}
    else:
        listing = {"name": "exec_command", "input": {"cmd": "ls /data"}}
        write = {"name": "exec_command", "input": {"cmd": "echo '# disk full' > /work/report.md"}}
    return [
        {
            "reasoning": [
                {"text": THOUGHTS[0], "signature": FIRST_SIG, **summary},
                {"redacted": True, "signature": WITHHELD},
            ],
            "text": "Looking.",
            "tool_calls": [listing],
        },
        {"reasoning": [{"text": THOUGHTS[1], "signature": SECOND_SIG, **summary}], "tool_calls": [write]},
        {"reasoning": [{"text": THOUGHTS[2], "signature": FINAL_SIG, **summary}], "text": "Finished."},
    ]


def recorded(harness: str) -> list[list[dict[str, Any]]]:
    """Each answer's reasoning as the gateway records it (README "Transcript": reasoning blocks)."""
    summary = harness == "codex"

    def visible(text: str, sig: str) -> dict[str, Any]:
        return {"type": "reasoning", "text": text, "summary": summary, "redacted": False, "signature": sig}

    withheld = {"type": "reasoning", "text": "", "summary": False, "redacted": True, "signature": WITHHELD}
    return [
        [visible(THOUGHTS[0], FIRST_SIG), withheld],
        [visible(THOUGHTS[1], SECOND_SIG)],
        [visible(THOUGHTS[2], FINAL_SIG)],
    ]


def without_ids(blocks: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "id"} for b in blocks or []]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One results directory with a run of each CLI against the thinking script."""
    base = tmp_path_factory.mktemp("reasoning-clis")
    out = base / "results"
    for harness in HARNESSES:
        task, model = make_scripted_task(base / harness, script(harness), extra="[early_exit]\nenabled = false\n")
        assert run_inprocess(task, model, out, harnesses=[harness]) == 0
    return out


def the_run(results: Path, harness: str) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    (run,) = [r for r in runs(results) if f"__{harness}__" in r.name]
    meta = read_json(run / "meta.json")
    assert meta["status"] == "completed", meta.get("error")
    return run, meta, read_jsonl(run / "transcript.jsonl")


def generations(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "model_call" and e.get("wire_api") != "anthropic_count_tokens"]


@pytest.mark.parametrize("harness", HARNESSES)
def test_each_answers_reasoning_is_in_its_model_call_and_the_clis_assistant_events(results: Path, harness: str) -> None:
    _, _, events = the_run(results, harness)
    calls = generations(events)
    assert [without_ids(c["response"].get("reasoning")) for c in calls] == recorded(harness)
    said = [(e["text"], e.get("reasoning")) for e in events if e["type"] == "assistant"]
    if harness == "claude-code":  # a message's thinking blocks go with its text, or stand before its call
        assert said == [
            ("Looking.", recorded(harness)[0]),
            ("", recorded(harness)[1]),
            ("Finished.", recorded(harness)[2]),
        ]
    else:  # Codex shows each reasoning item's summary (not the withheld one) in stream order
        shown = [{**b, "signature": None} for blocks in recorded(harness) for b in blocks if not b["redacted"]]
        assert said == [
            ("", [shown[0]]),
            ("Looking.", None),
            ("", [shown[1]]),
            ("", [shown[2]]),
            ("Finished.", None),
        ]


@pytest.mark.parametrize("harness", HARNESSES)
def test_the_cli_sends_the_opaque_parts_back_byte_for_byte(results: Path, harness: str) -> None:
    _, _, events = the_run(results, harness)
    calls = generations(events)
    bodies = reconstruct(events)
    sent_back = []
    for call in calls[1:]:
        body = bodies[call["call_id"]]
        if harness == "claude-code":
            sent_back += [
                (b["type"], b.get("thinking"), b.get("signature") or b.get("data"))
                for m in body["messages"]
                if m["role"] == "assistant" and isinstance(m["content"], list)
                for b in m["content"]
                if b.get("type") in ("thinking", "redacted_thinking")
            ]
        else:
            sent_back += [
                ("reasoning", None, item.get("encrypted_content"))
                for item in body["input"]
                if item.get("type") == "reasoning"
            ]
    if harness == "claude-code":  # the whole history each time: turn 1's twice, turn 2's once
        first = [("thinking", THOUGHTS[0], FIRST_SIG), ("redacted_thinking", None, WITHHELD)]
        assert sent_back == first + first + [("thinking", THOUGHTS[1], SECOND_SIG)]
    else:
        first = [("reasoning", None, FIRST_SIG), ("reasoning", None, WITHHELD)]
        assert sent_back == first + first + [("reasoning", None, SECOND_SIG)]


def inspect_reasoning(message: ChatMessageAssistant | None) -> list[tuple[str, str | None, str | None, bool]]:
    assert message is not None
    content = message.content if isinstance(message.content, list) else []
    return [(c.reasoning, c.summary, c.signature, c.redacted) for c in content if isinstance(c, ContentReasoning)]


@pytest.mark.parametrize("harness", HARNESSES)
def test_both_exports_carry_every_answers_reasoning(results: Path, tmp_path: Path, harness: str) -> None:
    run, _, events = the_run(results, harness)
    expected = recorded(harness)
    logs = export(results, "inspect", tmp_path / "inspect").written
    (log,) = [p for p in logs if harness in p.name]
    (s,) = read_eval_log(str(log), resolve_attachments=True).samples
    as_inspect = [
        [
            ("" if b["summary"] else b["text"], b["text"] if b["summary"] else None, b["signature"], b["redacted"])
            for b in a
        ]
        for a in expected
    ]
    models = [e for e in s.events if e.event == "model"]
    assert [inspect_reasoning(e.output.message) for e in models] == as_inspect
    assert [inspect_reasoning(m) for m in s.messages if isinstance(m, ChatMessageAssistant)] == as_inspect
    assert inspect_reasoning(s.output.message) == as_inspect[2]  # the final answer's

    (traj,) = [p for p in export(results, "atif", tmp_path / "atif").written if p.stem == run.name]
    t = Trajectory.model_validate_json(traj.read_bytes())
    agent = [st for st in t.steps if st.source == "agent" and st.llm_call_count == 1]
    assert [st.reasoning_content for st in agent] == THOUGHTS
    assert [without_ids(st.extra["benchctl_reasoning"]) for st in agent] == expected
    assert len(agent) == len(generations(events))
