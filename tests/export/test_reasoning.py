"""Reasoning in both exports, from each answer's own `model_call` record (no Docker): every
assistant turn of an Inspect sample carries its reasoning as `ContentReasoning` (visible, summary,
withheld; signatures as recorded), the final answer's too and whatever the client sent back; ATIF
agent steps carry `reasoning_content` and the blocks. Read back with inspect-ai's and atif's own
readers. Honesty: an answer with no recorded reasoning has none, agent-written reasoning comes back
exactly, a key in it stays scrubbed."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
from atif import Trajectory
from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessageAssistant, ContentReasoning

from benchctl.export import export
from tests.rigs.export import LONG_THOUGHT, REASONING_WIRES, SECRET, reasoning_run, thinking_answers

Seen = tuple[str, str | None, str | None, bool]


def scrubbed(text: str) -> str:
    return text.replace(SECRET, "[REDACTED]")


def expected_inspect(block: dict[str, Any]) -> Seen:
    """(reasoning, summary, signature, redacted) as Inspect's own providers fill them."""
    text = scrubbed(block["text"])
    return ("" if block["summary"] else text, text if block["summary"] else None, block["signature"], block["redacted"])


def reasoning_of(message: ChatMessageAssistant | None) -> list[Seen]:
    assert message is not None
    content = message.content if isinstance(message.content, list) else []
    return [(c.reasoning, c.summary, c.signature, c.redacted) for c in content if isinstance(c, ContentReasoning)]


@pytest.fixture()
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # in the environment at export time: scrubbed
    for wire_api in REASONING_WIRES:
        reasoning_run(tmp_path / "results", wire_api)
    return tmp_path / "results"


@pytest.mark.parametrize("wire_api", REASONING_WIRES)
def test_every_assistant_turn_of_an_inspect_sample_has_its_answers_reasoning(
    results: Path, tmp_path: Path, wire_api: str
) -> None:
    written = export(results, "inspect", tmp_path / "out").written
    (path,) = [p for p in written if wire_api in p.name]
    raw = b"".join(zipfile.ZipFile(path).read(n) for n in zipfile.ZipFile(path).namelist())
    assert SECRET.encode() not in raw and b"[REDACTED]" in raw
    (s,) = read_eval_log(str(path), resolve_attachments=True).samples  # as the viewer shows it
    expected = [[expected_inspect(b) for b in a["reasoning"]] for a in thinking_answers(wire_api)]

    # each model call's output: its own answer's reasoning, the final answer's included; the side
    # call, which did not think, has none (unknown stays empty)
    models = [e for e in s.events if e.event == "model"]
    outputs = [reasoning_of(e.output.message) for e in models]
    assert outputs == [expected[0], [], expected[1], expected[2]]
    # the conversation: every assistant turn has it, whatever its client sent back (chat clients send
    # none), and the last request's copy of earlier answers is what the next call's input shows
    turns = [reasoning_of(m) for m in s.messages if isinstance(m, ChatMessageAssistant)]
    assert turns == expected
    assert reasoning_of(s.output.message) == expected[2]
    last_input = [reasoning_of(m) for m in models[-1].input if isinstance(m, ChatMessageAssistant)]
    assert last_input == expected[:2]
    # agent-written reasoning comes back exactly (a forged attachment reference stays text)
    long = next(r for r in turns[1] if LONG_THOUGHT[:40] in (r[0] or r[1] or ""))
    assert scrubbed(LONG_THOUGHT) in (long[0], long[1])


@pytest.mark.parametrize("wire_api", REASONING_WIRES)
def test_atif_agent_steps_carry_reasoning_content_and_the_blocks(results: Path, tmp_path: Path, wire_api: str) -> None:
    written = export(results, "atif", tmp_path / "out").written
    (path,) = [p for p in written if wire_api in p.name]
    raw = path.read_bytes()
    assert SECRET.encode() not in raw and b"[REDACTED]" in raw
    t = Trajectory.model_validate_json(raw)  # the atif models validate the whole document
    agent = [st for st in t.steps if st.source == "agent" and st.llm_call_count == 1]
    answers = thinking_answers(wire_api)
    main = [st for st in agent if st.extra["benchctl"]["call_id"] != "call-2"]  # call-2: the side call
    assert [st.reasoning_content for st in main] == [
        "\n\n".join(scrubbed(b["text"]) for b in a["reasoning"] if b["text"]) for a in answers
    ]
    assert [st.extra["benchctl_reasoning"] for st in main] == [
        [{**b, "text": scrubbed(b["text"])} for b in a["reasoning"]] for a in answers
    ]
    side = next(st for st in agent if st.extra["benchctl"]["call_id"] == "call-2")
    assert side.reasoning_content is None and "benchctl_reasoning" not in side.extra  # none recorded: none


def test_withheld_reasoning_alone_leaves_reasoning_content_empty(tmp_path: Path) -> None:
    """An answer whose only reasoning is redacted: no visible reasoning (not an empty string), the
    block with its opaque string in extra, and Inspect's redacted flag."""
    from tests.rigs.export import body, model_calls, user, withheld, write_run

    answer = {"text": "Done.", "tool_calls": [], "reasoning": [withheld("EmwKAhgB+/only==")]}
    write_run(tmp_path / "r", model_calls([(body([user("Go.")]), answer)]))
    (traj,) = export(tmp_path / "r", "atif", tmp_path / "atif").written
    (step,) = [st for st in Trajectory.model_validate_json(traj.read_bytes()).steps if st.source == "agent"]
    assert step.reasoning_content is None and step.extra["benchctl_reasoning"] == answer["reasoning"]
    (log,) = export(tmp_path / "r", "inspect", tmp_path / "inspect").written
    (s,) = read_eval_log(str(log)).samples
    assert reasoning_of(s.output.message) == [("", None, "EmwKAhgB+/only==", True)]
