"""Exports of real ReAct runs over the Gemini and chat-completions wires (real Docker sandbox, the
real gateway, the scripted model answering in the caller's format), each read back by inspect-ai's
and atif's own readers: the conversation a researcher reads (roles in order, each tool call with
the name and arguments the model issued, each tool result with the output the model received,
paired with its call by id), usage and cost against meta.json (an unknown price stays unknown,
never 0), and the ATIF steps' calls and observations paired by id. The request each sample shows is
also checked against inspect-ai's own converters for that wire (`messages_from_google`,
`messages_from_openai`) applied to the request the gateway reconstructs."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from atif import Trajectory
from inspect_ai.log import EvalSample, read_eval_log
from inspect_ai.model import ChatMessage, messages_from_google, messages_from_openai

from benchctl.gateway.recording import reconstruct
from benchctl.jsonio import read_json, read_jsonl
from tests.rigs.run import cli, make_scripted_task

pytestmark = pytest.mark.docker

# harness option wire -> the gateway's wire_api. Over Gemini, ReAct answers a call whose id starts
# `call_` (the scripted model's ids do) by the function's name only, as for the id-less calls of the
# Gemini API: that run's results pair with their calls by function and order.
WIRES = {"gemini": "gemini", "chat": "openai_chat"}
REPORT = 'Errors: 1 ("disk full")\n'
# two calls of the same tool in one turn (Gemini pairs results with calls by name and order when
# they carry no id), arguments of every JSON kind (an int, a list, a string with quotes and newlines)
TURNS: list[dict[str, Any]] = [
    {
        "text": "Counting errors.",
        "tool_calls": [
            {"name": "bash", "input": {"command": "grep -c ERROR /data/app.log", "timeout": 10}},
            {"name": "bash", "input": {"command": "wc -l < /data/app.log"}},
        ],
    },
    {"text": "", "tool_calls": [{"name": "view", "input": {"path": "/data/app.log", "view_range": [1, 2]}}]},
    {"text": "", "tool_calls": [{"name": "create", "input": {"path": "report.md", "file_text": REPORT}}]},
    {"text": "Done."},
]
CONVERSATION = ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "tool", "assistant"]


@pytest.fixture(scope="module")
def wire_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One real run per wire. The chat run's model has a price (a cost > 0); the Gemini run's has
    an input price only, so its calls (which have output tokens) cost an unknown amount: None."""
    base = tmp_path_factory.mktemp("export-wires")
    out: dict[str, Path] = {}
    for wire in WIRES:
        task, model = make_scripted_task(
            base, TURNS, f'[early_exit]\nenabled = false\n[harness_options]\nwire = "{wire}"\n', name=wire
        )
        price = (
            "input = 3.0\ncached_input = 0.3\ncache_write = 3.75\noutput = 15.0" if wire == "chat" else "input = 3.0"
        )
        prices = base / f"{wire}-prices.toml"
        prices.write_text(f'["{model}"]\n{price}\n')
        r = cli(
            "run",
            str(task),
            "--model",
            model,
            "--budget",
            "1m",
            "--out",
            str(base / wire),
            "--progress",
            "json",
            env={**os.environ, "BENCHCTL_PRICES": str(prices)},
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        out[wire] = base / wire
    return out


def the_run(results: Path) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    (run,) = (results / "runs").iterdir()
    return run, read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl")


def outputs(events: list[dict[str, Any]]) -> dict[str, str]:
    """What each tool returned to the model, by tool call id, as the harness recorded it."""
    return {e["id"]: e["output"] for e in events if e["type"] == "tool_result"}


def scripted_calls() -> list[list[tuple[str, dict[str, Any]]]]:
    return [[(c["name"], c["input"]) for c in t.get("tool_calls", [])] for t in TURNS]


async def official_messages(wire_api: str, body: dict[str, Any]) -> list[ChatMessage]:
    """The request as inspect-ai's own converter for its wire API reads it."""
    if wire_api == "gemini":
        system = " ".join(p["text"] for p in body["systemInstruction"]["parts"])
        return await messages_from_google(body["contents"], system)
    return await messages_from_openai(body["messages"])


def check_conversation(s: EvalSample, events: list[dict[str, Any]]) -> None:
    """The sample's messages: the system prompt, then user / assistant (the calls as issued) / tool
    (the output the model received, paired by id with the call that asked) / ... / assistant."""
    assert [m.role for m in s.messages] == ["system", *CONVERSATION]
    assert s.messages[1].text == "Investigate /data and write /work/report.md."
    assistants = [m for m in s.messages if m.role == "assistant"]
    assert [[(c.function, c.arguments) for c in m.tool_calls or []] for m in assistants] == scripted_calls()
    assert [m.text for m in assistants] == [t["text"] for t in TURNS]
    results = outputs(events)
    calls = [c for m in assistants for c in m.tool_calls or []]
    assert [c.id for c in calls] == [e["id"] for e in events if e["type"] == "tool_call"]  # the ids the harness ran
    assert all(c.type == "function" and isinstance(c.arguments, dict) for c in calls)
    tools = [m for m in s.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.function) for m in tools] == [(c.id, c.function) for c in calls]
    assert [m.text for m in tools] == [results[c.id] for c in calls]
    assert results[calls[0].id].startswith("1\n")  # the command really ran in the sandbox
    # every tool the harness ran is a ToolEvent with the id of the model's call
    assert [(e.id, e.function, e.arguments, e.result) for e in s.events if e.event == "tool"] == [
        (c.id, c.function, c.arguments, results[c.id]) for c in calls
    ]


def check_against_official_converter(s: EvalSample, events: list[dict[str, Any]], wire_api: str) -> None:
    """inspect-ai's converter for the wire, applied to the last request the gateway reconstructs,
    reads the same conversation (its ids are its own for Gemini: it makes them up)."""
    last = [e for e in events if e["type"] == "model_call"][-1]
    assert last["wire_api"] == wire_api
    official = asyncio.run(official_messages(wire_api, reconstruct(events)[last["call_id"]]))
    mine = s.messages[:-1]  # the last is the final answer
    assert [m.role for m in mine] == [m.role for m in official]
    assert [m.text for m in mine] == [m.text for m in official]
    assert [[(c.function, c.arguments) for c in getattr(m, "tool_calls", None) or []] for m in mine] == [
        [(c.function, c.arguments) for c in getattr(m, "tool_calls", None) or []] for m in official
    ]


def check_usage(s: EvalSample, meta: dict[str, Any], raw: str) -> None:
    u, cost = meta["usage"], meta["cost_usd"]
    (model,) = s.model_usage
    mu = s.model_usage[model]
    assert (mu.input_tokens, mu.output_tokens, mu.input_tokens_cache_read) == (
        u["input_tokens"],
        u["output_tokens"],
        u["cached_input_tokens"],
    )
    # meta.json rounds the run's cost to 6 decimals; the export sums the calls' own costs
    assert mu.total_cost == (None if cost is None else pytest.approx(cost, abs=5e-7))
    usages = [e.output.usage for e in s.events if e.event == "model"]
    assert len(usages) == len(TURNS)
    assert sum(x.output_tokens for x in usages if x is not None) == u["output_tokens"]
    if cost is None:  # unknown stays unknown: no call, no total says 0
        assert [x.total_cost for x in usages if x is not None] == [None] * len(TURNS)
        assert '"total_cost":0' not in raw.replace(" ", "")


def check_atif(traj: Path, meta: dict[str, Any], events: list[dict[str, Any]]) -> None:
    t = Trajectory.model_validate_json(traj.read_bytes())  # the atif models' own check
    agent = [s for s in t.steps if s.source == "agent" and s.llm_call_count == 1]
    assert [[(c.function_name, c.arguments) for c in s.tool_calls or []] for s in agent] == scripted_calls()
    results = outputs(events)
    for step in agent:  # each step's observations answer its own calls, by id, in order
        called = [c.tool_call_id for c in step.tool_calls or []]
        observed = step.observation.results if step.observation else []
        assert [r.source_call_id for r in observed] == called
        assert [r.content for r in observed] == [results[c] for c in called]
        assert all((r.extra or {}).get("seen_by_model") for r in observed)
    assert not [s for s in t.steps if s.source == "system" and s.observation]  # no result left unpaired
    u, cost = meta["usage"], meta["cost_usd"]
    fm = t.final_metrics
    assert fm is not None and fm.total_completion_tokens == u["output_tokens"]
    assert fm.total_prompt_tokens == u["input_tokens"] + u["cached_input_tokens"] + u["cache_write_tokens"]
    assert fm.total_cost_usd == cost
    assert [s.metrics.cost_usd for s in agent if s.metrics] == [
        e.get("cost_usd") for e in events if e["type"] == "model_call"
    ]
    if cost is None:
        data = json.loads(traj.read_bytes())
        assert "total_cost_usd" not in data["final_metrics"]
        assert all("cost_usd" not in (s.get("metrics") or {}) for s in data["steps"])


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_react_run_over_the_wire_exports_and_reads_back(
    wire_results: dict[str, Path], tmp_path: Path, wire: str
) -> None:
    results = wire_results[wire]
    run, meta, events = the_run(results)
    assert meta["status"] == "completed", meta.get("error")
    assert {e["wire_api"] for e in events if e["type"] == "model_call"} == {WIRES[wire]}
    assert (meta["cost_usd"] is None) == (wire == "gemini") and meta["cost_usd"] != 0.0

    r = cli("export", str(results), "--to", "inspect", "-o", str(tmp_path / "inspect"))
    assert r.returncode == 0, r.stderr
    (log_path,) = (tmp_path / "inspect").glob("*.eval")
    log = read_eval_log(str(log_path))
    assert log.status == "success" and log.samples is not None and len(log.samples) == 1
    s = log.samples[0]
    check_conversation(s, events)
    check_against_official_converter(s, events, WIRES[wire])
    raw = json.dumps(s.model_dump(mode="json", include={"model_usage", "events"}))
    check_usage(s, meta, raw)
    cost = meta["cost_usd"]  # (rounded to 6 decimals in meta.json)
    assert log.stats.model_usage[meta["model"]].total_cost == (None if cost is None else pytest.approx(cost, abs=5e-7))
    # inspect_ai.analysis reads the same conversation into its dataframe (pandas: the dev extra)
    from inspect_ai.analysis import messages_df

    df = messages_df(str(log_path)).sort_values("order")
    assert df["role"].tolist() == [m.role for m in s.messages]
    tools = df[df["role"] == "tool"]
    assert list(zip(tools["tool_call_id"], tools["tool_call_function"])) == [
        (m.tool_call_id, m.function) for m in s.messages if m.role == "tool"
    ]

    r = cli("export", str(results), "--to", "atif", "-o", str(tmp_path / "atif"))
    assert r.returncode == 0, r.stderr
    check_atif(tmp_path / "atif" / f"{run.name}.json", meta, events)
    assert (run / "artifacts" / "report.md").read_text() == REPORT
