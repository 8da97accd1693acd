"""benchctl/task_prompt.py: the prompt a run started from, which the viewer and `benchctl scan`
both read from the transcript's model calls."""

from __future__ import annotations

from typing import Any

from benchctl.task_prompt import PromptSearch, find_prompt, opening_prompt


def call(request: dict[str, Any], seq: int = 3, call_id: str = "c") -> dict[str, Any]:
    return {"type": "model_call", "seq": seq, "call_id": call_id, "request": request}


def opening(task: str, tools: bool, system: str = "") -> dict[str, Any]:
    """A recorded request that opens a conversation (stored whole: base null)."""
    fields: dict[str, Any] = {"model": "m"}
    if system:
        fields["system"] = system
    if tools:
        fields["tools"] = [{"name": "bash"}]
    return {"conv": task, "base": None, "keep": 0, "set": fields, "append": [{"role": "user", "content": task}]}


def test_the_prompt_is_read_in_every_wire_shape() -> None:
    shapes = {
        "openai chat": {
            "conv": "c",
            "base": None,
            "set": {"tools": [1]},
            "append": [{"role": "system", "content": "SYS"}, {"role": "user", "content": "TASK"}],
        },
        "responses": {
            "conv": "c",
            "base": None,
            "set": {"instructions": "SYS", "tools": [1]},
            "append": [
                {"role": "developer", "content": [{"type": "input_text", "text": "SYS2"}]},
                {"role": "user", "content": [{"type": "input_text", "text": "TASK"}]},
                {"type": "function_call", "name": "x"},
                {"role": "user", "content": "not the task"},
            ],
        },
        "gemini": {
            "conv": "c",
            "base": None,
            "set": {"systemInstruction": {"parts": [{"text": "SYS"}]}, "tools": [1]},
            "append": [{"role": "user", "parts": [{"text": "TASK"}]}, {"role": "model", "parts": [{"text": "a"}]}],
        },
        "stored whole": {"system": "SYS", "messages": [{"role": "user", "content": "TASK"}], "tools": [1]},
    }
    for name, req in shapes.items():
        p = find_prompt([call(req)])
        assert p is not None and p.system.startswith("SYS") and p.task == "TASK", name
        assert (p.seq, p.call_id, p.offers_tools) == (3, "c", True), name
    # a request that continues a conversation opens nothing
    assert find_prompt([call({"conv": "c", "base": "b", "append": [{"role": "user", "content": "x"}]})]) is None


def test_images_and_tool_results_are_not_task_text() -> None:
    req = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"data": "..."}},
                    {"type": "tool_result", "tool_use_id": "t", "content": "out"},
                    {"type": "text", "text": "TASK"},
                ],
            }
        ],
        "tools": [1],
    }
    p = opening_prompt(call(req))
    assert p is not None and p.task == "TASK" and p.system == ""


def test_a_side_call_without_tools_is_passed_over_for_the_agents_own() -> None:
    """Claude Code asks a small model for a title before its own first call: the call that offers
    tools is the agent's, whichever comes first."""
    events = [
        {"type": "run_start", "seq": 0},
        call(opening("Write a title for this session.", tools=False), seq=1, call_id="side"),
        call(opening("Audit the logs.", tools=True, system="You are an investigator."), seq=2, call_id="own"),
        call(opening("A later conversation.", tools=True), seq=5, call_id="later"),
    ]
    p = find_prompt(events)
    assert p is not None and (p.task, p.system, p.seq, p.call_id) == (
        "Audit the logs.",
        "You are an investigator.",
        2,
        "own",
    )


def test_without_any_call_offering_tools_the_first_opening_call_stands_in() -> None:
    events = [
        call({"conv": "x", "base": "y", "append": [{"role": "user", "content": "continues"}]}, seq=1),
        call(opening("Summarise this.", tools=False), seq=2, call_id="first"),
        call(opening("Another question.", tools=False), seq=4, call_id="second"),
    ]
    p = find_prompt(events)
    assert p is not None and (p.task, p.call_id, p.offers_tools) == ("Summarise this.", "first", False)
    assert find_prompt([{"type": "assistant", "text": "no model call"}]) is None


def test_the_search_is_done_only_once_a_call_offers_tools() -> None:
    """What scan relies on to stop parsing model calls: `done` turns true at the agent's own call,
    and nothing offered after it changes the prompt."""
    search = PromptSearch()
    search.offer(call(opening("title?", tools=False), seq=1))
    assert not search.done and search.prompt is not None and search.prompt.task == "title?"
    search.offer(call(opening("Audit the logs.", tools=True), seq=2))
    assert search.done and search.prompt is not None and search.prompt.task == "Audit the logs."
    search.offer(call(opening("Something else.", tools=True), seq=3))
    assert search.prompt.seq == 2
