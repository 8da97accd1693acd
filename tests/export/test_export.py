"""`benchctl export` on hand-made runs (no Docker): the shared iterator against the gateway's own
request reconstruction, the wire formats, and both formats read back by their own libraries —
every sample, message, score and token; honesty (unknown stays empty, unscored is not 0, secrets
stay redacted, agent text cannot break out); idempotence; the CLI."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from atif import Trajectory
from inspect_ai.event import EventTreeSpan, event_tree
from inspect_ai.log import read_eval_log, read_eval_log_sample_summaries

from benchctl.export import events as ev
from benchctl.export import wire
from benchctl.gateway.recording import reconstruct
from benchctl.jsonio import read_jsonl
from tests.rigs.export import (
    FOLLOWUPS,
    FORGED_REF,
    LONG,
    MARKDOWN,
    NASTY,
    SECRET,
    SYSTEM,
    conversation_requests,
    followup_run,
    grade,
    model_calls,
    rich_run,
    write_run,
)
from tests.rigs.run import cli


def texts(messages: list[wire.Message]) -> list[tuple[str, str, list[str], str | None]]:
    return [(m.role, m.text, [c.id for c in m.tool_calls], m.tool_call_id) for m in messages]


# ------------------------------------------------------------------------------- the shared iterator


def test_iterator_rebuilds_every_request_exactly_as_the_gateway_reconstructs_it(tmp_path: Path) -> None:
    reqs = conversation_requests()
    run = write_run(tmp_path, [("run_start", "runner", {})] + model_calls(reqs))
    bodies = reconstruct(read_jsonl(run / "transcript.jsonl"))
    convs: dict[str, list[wire.Message]] = {}
    turns = [it for it in ev.items(ev.find_runs(tmp_path)[0][0]) if isinstance(it, ev.ModelTurn)]
    assert len(turns) == len(reqs) == len(bodies)
    for turn in turns:
        assert turn.conversation is not None
        msgs = (convs.get(turn.conversation, [])[: turn.keep] if turn.base else []) + turn.new
        convs[turn.conversation] = msgs
        expected = [m for ms in wire.messages("anthropic_messages", bodies[turn.call_id]["messages"]) for m in ms]
        assert texts(msgs) == texts(expected), turn.call_id
        assert (turn.system.text if turn.system else None) == (SYSTEM if "system" in bodies[turn.call_id] else None)
    side, rewrite = turns[2], turns[5]
    assert side.conversation != turns[0].conversation and side.tools == []
    assert (
        rewrite.base == "call-5"
        and rewrite.keep == 1
        and [m.text for m in rewrite.new] == ["Summary so far: x appears twice.", "Continue."]
    )
    # history re-sent in another shape (a string as a block list) is the same messages, not new ones
    assert turns[4].repeated == [True, True, True, True, False, False, False]
    # tool results are named after the call that asked for them
    assert [m.tool_name for m in turns[1].new if m.role == "tool"] == ["bash"]


def test_wire_formats_map_to_neutral_messages() -> None:
    responses = wire.messages(
        "openai_responses",
        [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]},
            {"type": "reasoning", "summary": [], "encrypted_content": "opaque"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "thinking aloud"}]},
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.log"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done"},
        ],
    )
    assert [len(x) for x in responses] == [1, 1, 1, 0, 0, 0, 1, 1]  # one assistant turn held by its first item
    turn = responses[2][0]
    assert turn.role == "assistant" and turn.text == "thinking aloud"
    # encrypted reasoning only: a redacted reasoning block whose signature is the opaque content, kept
    assert turn.reasoning[0].record() == {
        "type": "reasoning",
        "text": "",
        "summary": False,
        "redacted": True,
        "signature": "opaque",
    }
    assert [(c.id, c.arguments, c.raw) for c in turn.tool_calls] == [
        ("c1", {"cmd": "ls"}, None),
        ("c2", {"input": "*** Begin Patch"}, "*** Begin Patch"),
    ]
    assert [m.role for ms in responses for m in ms] == ["system", "user", "assistant", "tool", "tool"]

    anth = wire.messages(
        "anthropic_messages",
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "redacted_thinking", "data": "EqQBCkYIBx"},
                    {"type": "text", "text": "Ok."},
                    {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "is_error": True,
                        "content": [{"type": "text", "text": "boom"}],
                    },
                    {"type": "image", "source": {"type": "base64", "data": "AAA"}},
                    {"type": "text", "text": "<system-reminder>hook</system-reminder>"},
                ],
            },
        ],
    )
    a, rest = anth[0][0], anth[1]
    assert [p.type for p in a.parts] == ["reasoning", "reasoning", "text"] and a.tool_calls[0].name == "Bash"
    assert [(p.text, p.redacted, p.signature) for p in a.reasoning] == [("hmm", False, "s"), ("", True, "EqQBCkYIBx")]
    assert [(m.role, m.is_error) for m in rest] == [("tool", True), ("user", False)]
    assert rest[1].parts[0].type == "data" and rest[1].text == "<system-reminder>hook</system-reminder>"

    chat = wire.messages(
        "openai_chat",
        [
            {"role": "system", "content": "sys"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "not json"}}],
            },
            {"role": "tool", "tool_call_id": "x", "content": "out"},
        ],
    )
    assert chat[1][0].tool_calls[0].arguments == {"input": "not json"}
    assert [m.role for ms in chat for m in ms] == ["system", "assistant", "tool"]

    gem = wire.messages(
        "gemini",
        [
            {
                "role": "model",
                "parts": [
                    {"text": "plan", "thought": True, "thoughtSignature": "c2lnMQ=="},
                    {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "c2lnMg=="},
                ],
            },
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"ok": True}}}]},
        ],
    )
    assert gem[0][0].parts[0].type == "reasoning" and gem[0][0].tool_calls[0].arguments == {"a": 1}
    assert gem[0][0].reasoning[0].signature == "c2lnMQ==" and gem[0][0].tool_calls[0].signature == "c2lnMg=="
    assert gem[1][0].role == "tool" and json.loads(gem[1][0].text) == {"ok": True}

    assert wire.system_prompt("openai_responses", {"instructions": "be brief"}).text == "be brief"
    assert [
        wire.tool_choice(v)
        for v in (
            None,
            "auto",
            {"type": "any"},
            "required",
            {"type": "none"},
            {"type": "tool", "name": "bash"},
            {"type": "function", "function": {"name": "f"}},
        )
    ] == [("auto", None), ("auto", None), ("any", None), ("any", None), ("none", None), ("tool", "bash"), ("tool", "f")]
    assert wire.system_prompt("gemini", {"systemInstruction": {"parts": [{"text": "g"}]}}).text == "g"
    assert [
        t.name
        for api, tool in (
            ("openai_chat", {"type": "function", "function": {"name": "a", "parameters": {}}}),
            ("gemini", {"functionDeclarations": [{"name": "b"}]}),
        )
        for t in wire.tool_defs(api, {"tools": [tool]})
    ] == ["a", "b"]


def test_gemini_calls_and_answers_without_ids_pair_by_function_and_order(tmp_path: Path) -> None:
    """Gemini gives a function call an id only sometimes (the Gemini API mostly does not), and the
    google-genai SDK answers with the function's name: each answer is the preceding model turn's
    first unanswered call of its name. The export names id-less calls by their place in the
    conversation (so a call keeps its id from the response into the next request's history) and
    pairs each answer with its call; the answer's text is what the model was given."""
    system = {"parts": [{"text": "sys"}]}

    def call(name: str, **args: Any) -> dict[str, Any]:
        return {"functionCall": {"name": name, "args": args}}

    def answer(name: str, **resp: Any) -> dict[str, Any]:
        return {"functionResponse": {"name": name, "response": resp}}

    c1 = [{"role": "user", "parts": [{"text": "go"}]}]
    r1 = {
        "text": "",
        "tool_calls": [
            {"id": None, "name": "bash", "input": {"command": "a"}},
            {"id": None, "name": "bash", "input": {"command": "b"}},
        ],
    }
    c2 = c1 + [
        {"role": "model", "parts": [call("bash", command="a"), call("bash", command="b")]},
        {"role": "user", "parts": [answer("bash", output="A"), answer("bash", output="B")]},
    ]
    r2 = {"text": "", "tool_calls": [{"id": None, "name": "view", "input": {"path": "x"}}]}
    c3 = c2 + [
        {"role": "model", "parts": [{**call("view", path="x"), "thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [answer("view", error="no such file")]},
    ]
    r3 = {"text": "done", "tool_calls": []}
    reqs = [({"contents": c, "systemInstruction": system}, r, "gemini") for c, r in ((c1, r1), (c2, r2), (c3, r3))]
    write_run(tmp_path, [("run_start", "runner", {})] + model_calls(reqs))
    turns = [it for it in ev.items(ev.find_runs(tmp_path)[0][0]) if isinstance(it, ev.ModelTurn)]
    out1, out2 = ([c.id for c in t.output.tool_calls] for t in turns[:2])
    assert len(set(out1 + out2)) == 3 and all(out1 + out2)
    # the echo of each answer carries its calls' ids; each answer pairs with its call, in order
    assert [(m.role, [c.id for c in m.tool_calls], m.tool_call_id, m.text) for m in turns[1].new] == [
        ("assistant", out1, None, ""),
        ("tool", [], out1[0], "A"),
        ("tool", [], out1[1], "B"),
    ]
    assert [(m.role, [c.id for c in m.tool_calls], m.tool_call_id, m.text, m.is_error) for m in turns[2].new] == [
        ("assistant", out2, None, "", False),
        ("tool", [], out2[0], "no such file", True),
    ]

    (log,) = wire_export(tmp_path, "inspect")
    s = read_eval_log(str(log)).samples[0]
    calls = {c.id: c for m in s.messages if m.role == "assistant" for c in m.tool_calls or []}
    assert [(m.tool_call_id, m.function, m.text) for m in s.messages if m.role == "tool"] == [
        (out1[0], "bash", "A"),
        (out1[1], "bash", "B"),
        (out2[0], "view", "no such file"),
    ]
    assert [calls[i].arguments for i in out1 + out2] == [{"command": "a"}, {"command": "b"}, {"path": "x"}]
    (traj,) = wire_export(tmp_path, "atif")
    t = Trajectory.model_validate_json(traj.read_bytes())
    agent = [st for st in t.steps if st.source == "agent" and st.llm_call_count == 1]
    assert [
        [(r.source_call_id, r.content) for r in st.observation.results] if st.observation else [] for st in agent
    ] == [[(out1[0], "A"), (out1[1], "B")], [(out2[0], "no such file")], []]
    assert [[c.tool_call_id for c in st.tool_calls or []] for st in agent] == [out1, out2, []]


def wire_export(results: Path, to: str) -> list[Path]:
    from benchctl.export import export

    return export(results, to, results / f"out-{to}").written


def test_a_token_count_moves_the_conversation_on_but_is_not_a_generation(tmp_path: Path) -> None:
    """Claude Code may count tokens (forwarded upstream) with the new tool result before the next
    real call; that call then sends nothing new. The count is an event, the next call's input and
    the observation are still complete."""
    from tests.rigs.export import body, result, use, user

    a1, r1 = use("t1", "ls /data")
    m1 = [user("Investigate /data.")]
    m2 = m1 + [a1, result("t1", "a.log")]
    write_run(
        tmp_path / "results",
        model_calls(
            [
                (body(m1), r1),
                (body(m2), {"text": "", "tool_calls": []}, "anthropic_count_tokens"),
                (body(m2), {"text": "Done.", "tool_calls": []}),
            ]
        ),
    )
    assert cli("export", str(tmp_path / "results"), "--to", "inspect", "-o", str(tmp_path / "o")).returncode == 0
    assert cli("export", str(tmp_path / "results"), "--to", "atif", "-o", str(tmp_path / "o")).returncode == 0
    sample = read_eval_log(str(next((tmp_path / "o").glob("*.eval")))).samples[0]
    models = [e for e in sample.events if e.event == "model"]
    assert [e.metadata["benchctl"]["call_id"] for e in models] == ["call-1", "call-3"]
    assert [m.role for m in models[1].input] == ["system", "user", "assistant", "tool"]
    assert any(e.event == "info" and e.source == "benchctl model_call count_tokens" for e in sample.events)
    t = Trajectory.model_validate_json(next((tmp_path / "o").glob("*.json")).read_bytes())
    agent = [s for s in t.steps if s.source == "agent"]
    assert [s.message for s in agent] == ["", "Done."] and agent[0].observation.results[0].content == "a.log"


# ------------------------------------------------------------------------------- a rich hand-made run


@pytest.fixture()
def rich(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # a key present in the environment at export time is scrubbed even if a transcript still held it
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    results = tmp_path / "results"
    a = rich_run(results)
    b = rich_run(results, seed=1, status="error", error="harness crashed")
    rich_run(results, seed=2, status="timeout")
    grade(
        results,
        a.name,
        "coverage",
        0.5,
        items=[
            {
                "id": "F1",
                "score": 0.75,
                "strict": 0.5,
                "reason": "found it",
                "text": "Disk full on db-1 at 03:12",
                "quote": NASTY,
            },
            {"id": "F2", "score": None, "error": "judge"},
        ],
    )
    grade(results, a.name, "coverage", 0.25, tag="followup-1")
    grade(results, a.name, "tldr", None)  # the judge failed: unscored, never 0
    grade(results, b.name, "coverage", 0.0)
    (results / "runs" / "t__react__x__1m__s9").mkdir()  # no meta.json: not finished
    return results


def test_inspect_log_reads_back_with_every_sample_message_score_and_token(rich: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = cli("export", str(rich), "--to", "inspect", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "skipped t__react__x__1m__s9: no meta.json" in r.stderr
    (path,) = out.glob("*.eval")
    log = read_eval_log(str(path), resolve_attachments=True)  # as the viewer shows it
    # one run ended in error: the eval did too (Inspect's fail_on_error with continue_on_fail), with no
    # eval-level error (none halted it; the error is the sample's)
    assert log.status == "error" and log.error is None and log.eval.task == "t" and log.eval.config.epochs == 3
    assert (log.results.total_samples, log.results.completed_samples) == (3, 2)
    assert log.eval.viewer is not None and log.eval.viewer.trust_content is False  # shown as text, never rendered
    assert [(s.id, s.epoch, s.metadata["seed"]) for s in log.samples] == [("t", 1, 0), ("t", 2, 1), ("t", 3, 2)]
    s0, s1, s2 = log.samples

    # the conversation as the model last saw it (main conversation, i.e. not the side call) + answer
    bodies = reconstruct(read_jsonl(rich / "runs" / s0.metadata["run_id"] / "transcript.jsonl"))
    last = bodies["call-6"]["messages"]
    assert len(s0.messages) == 1 + len(last) + 1
    assert s0.messages[0].role == "system" and s0.messages[-1].text == "Final answer."
    assert [m.text for m in s0.messages[1:-1]] == [
        m.text for ms in wire.messages("anthropic_messages", last) for m in ms
    ]
    assert s0.input == "Investigate /data."

    # every model call is a ModelEvent whose input is exactly its request; the side call has its own
    models = [e for e in s0.events if e.event == "model"]
    assert [e.metadata["benchctl"]["call_id"] for e in models] == [f"call-{i}" for i in (1, 2, 3, 4, 9, 5, 10, 6)]
    for e in models:
        cid = e.metadata["benchctl"]["call_id"]
        if cid in bodies:
            b = bodies[cid]
            expected = ([SYSTEM] if "system" in b else []) + [
                m.text for ms in wire.messages("anthropic_messages", b["messages"]) for m in ms
            ]
            assert [m.text for m in e.input] == expected, cid
        else:  # request not recorded: the input stays empty
            assert e.input == [] and e.metadata["benchctl"]["request_recorded"] is False
    side = next(e for e in models if e.metadata["benchctl"]["call_id"] == "call-3")
    assert [m.text for m in side.input] == ["Title for: Investigate /data."] and side.tools == []
    first = models[0]
    assert first.model == "scripted/m.json" and first.requested_model == "m" and first.tools[0].name == "bash"
    assert first.config.max_tokens == 1000 and first.working_time == pytest.approx(0.5)
    assert (
        first.output.usage.input_tokens,
        first.output.usage.input_tokens_cache_read,
        first.output.usage.input_tokens_cache_write,
        first.output.usage.output_tokens,
        first.output.usage.total_tokens,
    ) == (100, 10, 5, 20, 135)
    assert first.output.choices[0].message.tool_calls[0].function == "bash"
    timed_out = next(e for e in models if e.metadata["benchctl"]["call_id"] == "call-10")
    assert timed_out.error == "timeout" and timed_out.output.completion == "partial ans"
    assert timed_out.output.usage is None  # not reported: not zero
    assert s0.model_fallbacks[0].fallback_model == "scripted/old.json" and s0.model_fallbacks[0].count == 1

    tools = [e for e in s0.events if e.event == "tool"]
    assert [(t.id, t.function, t.error.type if t.error else None) for t in tools] == [
        ("t1", "bash", None),
        ("t2", "bash", "unknown"),
        ("t3", "bash", None),
    ]
    infos = [(e.source, e.data) for e in s0.events if e.event == "info"]
    sources = [s for s, _ in infos]
    for label in (
        "benchctl notice time",
        "benchctl reprompt",
        "benchctl refusal",
        "benchctl fallback",
        "benchctl tool_rejected_warning",
        "benchctl artifact report.md",
        "benchctl artifact blob.bin",
    ):
        assert label in sources, label
    assert dict(infos)["benchctl notice time"] == "[benchctl] Time remaining: 50s."
    assert dict(infos)["benchctl artifact report.md"] == "# Report\n\n" + NASTY  # exact, not resolved or escaped
    assert dict(infos)["benchctl artifact blob.bin"]["binary"] is True

    # agent text comes back exactly; the redaction marker stays; the secret never appears
    assert tools[0].result == "a.log [REDACTED] " + NASTY
    assert tools[1].result == LONG and tools[2].result == FORGED_REF
    assert [d["text"] for s_, d in infos if s_ == "benchctl stderr"] == [
        LONG,
        FORGED_REF,
    ]  # a forged reference stays text
    raw = b"".join(zipfile.ZipFile(path).read(n) for n in zipfile.ZipFile(path).namelist())
    assert SECRET.encode() not in raw and b"[REDACTED]" in raw

    # grades: scores with explanations; unscored is left out (not 0); follow-up graded apart
    assert {k: v.value for k, v in s0.scores.items()} == {"coverage": 0.5, "coverage[followup-1]": 0.25}
    assert "F1 (score 0.75, strict 0.5)" in s0.scores["coverage"].explanation
    assert "text: Disk full on db-1 at 03:12" in s0.scores["coverage"].explanation  # what the finding is
    assert "F2 (unscored)" in s0.scores["coverage"].explanation
    assert {g["grader"]: g["status"] for g in s0.metadata["grades"]}["tldr"] == "unscored"
    means = {sc.name: (sc.metrics["mean"].value, sc.scored_samples, sc.unscored_samples) for sc in log.results.scores}
    assert means == {"coverage": (0.25, 2, 1), "coverage[followup-1]": (0.25, 1, 2)}

    # usage and cost: per call into the sample and the eval; an unknown price stays None
    assert s0.model_usage["scripted/m.json"].input_tokens == sum(100 * i for i in (1, 2, 3, 4, 5, 5, 6))
    assert s0.model_usage["scripted/m.json"].total_cost == pytest.approx(0.001 * (1 + 2 + 3 + 4 + 5 + 5 + 6))
    assert s0.metadata["cost_usd"] is None
    assert log.stats.model_usage["scripted/m.json"].output_tokens == 3 * 7 * 20

    # outcomes
    assert s1.error is not None and s1.error.message == "harness crashed"
    assert s2.limit is not None and (s2.limit.type, s2.limit.limit) == ("time", 60.0)
    summaries = read_eval_log_sample_summaries(str(path))
    assert [x.message_count for x in summaries] == [len(s.messages) for s in log.samples]


def test_atif_trajectories_validate_with_steps_metrics_observations_and_the_report(rich: Path, tmp_path: Path) -> None:
    out = tmp_path / "atif"
    r = cli("export", str(rich), "--to", "atif", "-o", str(out))
    assert r.returncode == 0, r.stderr
    files = sorted(out.glob("*.json"))
    assert len(files) == 3
    raw = files[0].read_bytes()
    assert SECRET.encode() not in raw and b"[REDACTED]" in raw
    t = Trajectory.model_validate_json(raw)  # the atif models validate the whole document
    assert t.schema_version == "ATIF-v1.8" and t.agent.name == "react" and t.agent.model_name == "scripted/m.json"
    agent = [s for s in t.steps if s.source == "agent" and s.llm_call_count == 1]
    assert len(agent) == 8  # one per model call
    first = agent[0]
    assert first.message == MARKDOWN and first.tool_calls[0].arguments == {"command": "ls /data"}
    assert (first.metrics.prompt_tokens, first.metrics.cached_tokens, first.metrics.completion_tokens) == (115, 10, 20)
    assert first.observation.results[0].source_call_id == "t1"
    assert first.observation.results[0].content == "a.log"
    assert t.steps[t.steps.index(first) + 1].message == "[benchctl] Time remaining: 50s."  # next to the result
    kinds = [e["type"] for e in first.extra["benchctl_events"]]
    assert "notice" in kinds and "tool_result" in kinds
    assert t.steps[0].source == "system" and t.steps[0].message == SYSTEM
    assert t.steps[1].source == "user" and t.steps[1].message == "Investigate /data."
    users = [s.message for s in t.steps if s.source == "user"]
    assert users.count("[benchctl] Time remaining: 50s.") == 1  # history re-sent in another shape: no new step
    assert "You still have time. Do not stop yet." in users
    refusal = next(s for s in agent if s.extra["benchctl"]["call_id"] == "call-9")
    assert {e["type"] for e in refusal.extra["benchctl_events"]} >= {"refusal", "fallback"}
    blob, report = t.steps[-2], t.steps[-1]  # meta.json's order
    assert report.llm_call_count == 0 and report.message == "# Report\n\n" + NASTY
    assert report.extra["benchctl_artifact"]["name"] == "report.md"
    assert blob.message == "" and blob.extra["benchctl_artifact"]["binary"] is True
    fm = t.final_metrics
    assert fm.total_steps == len(t.steps) and fm.total_cost_usd is None  # unknown price stays unknown
    assert fm.total_prompt_tokens == sum(s.metrics.prompt_tokens for s in agent if s.metrics)
    cut = next(s for s in agent if s.extra["benchctl"]["call_id"] == "call-10")
    assert cut.metrics is None and cut.message == "partial ans"  # usage unknown: no metrics, not zeros
    assert [g["grader"] for g in t.extra["benchctl"]["grades"]] == ["coverage", "coverage", "tldr"]
    assert any(
        e["type"] == "run_end"
        for e in t.extra["benchctl"]["trailing_events"]
        + [x for s in t.steps for x in (s.extra or {}).get("benchctl_events", [])]
    )


# ------------------------------------------------------------------------------- outcomes and phases


def unfinished_run(results: Path, task: str, seed: int, transcript: bool = True) -> str:
    """A run directory as a killed run leaves it: no meta.json; with `transcript`, the run_start
    event the runner writes when the sandbox is up (it carries the run's spec)."""
    from benchctl.layout import make_run_id
    from benchctl.transcript import Redactor, TranscriptWriter

    run_id = make_run_id(task, "react", "scripted/m.json", "1m", seed)
    run = results / "runs" / run_id
    run.mkdir(parents=True)
    if transcript:
        spec = {
            "task": task,
            "harness": "react",
            "model": "scripted/m.json",
            "budget": "1m",
            "budget_s": 60.0,
            "seed": seed,
            "variant": None,
        }
        with TranscriptWriter(run / "transcript.jsonl", Redactor([])) as tr:
            tr.emit("run_start", "runner", run_id=run_id, spec=spec)
    return run_id


def test_eval_status_results_and_limits_say_what_happened_to_the_runs(tmp_path: Path) -> None:
    """One configuration (task) per outcome. Inspect's semantics: a limit is not an error; a sample
    error fails the eval (fail_on_error, with continue_on_fail: every run ran); an interrupted eval
    is cancelled; an eval not finished is started. Nothing is invented: no eval-level error (none
    halted the eval), no sample for a run that did not finish."""
    results = tmp_path / "results"
    cap = {"cap": "sweep", "max_cost_usd": 1.0, "spent_usd": 1.02}
    write_run(results, [], task="ok", seed=0)
    write_run(results, [], task="ok", seed=1, status="timeout", error="time budget spent")
    write_run(results, [], task="ok", seed=2, status="budget_exhausted", error="sweep cost cap reached", cost_cap=cap)
    write_run(results, [], task="err", seed=0)
    write_run(results, [], task="err", seed=1, status="error", error="harness crashed")
    write_run(results, [], task="cancel", seed=0, status="error", error="cancelled")  # Ctrl-C / SIGTERM
    write_run(results, [], task="cancel", seed=1, status="error", error="harness crashed")
    write_run(results, [], task="open", seed=1)
    killed = [unfinished_run(results, "open", 0), unfinished_run(results, "open", 2, transcript=False)]
    running = write_run(results, [], task="open", seed=3, status="running").name
    stray = unfinished_run(results, "other", 0, transcript=False)  # of no exported configuration
    out = tmp_path / "out"
    r = cli("export", str(results), "--to", "inspect", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert f"skipped {killed[0]}: no meta.json" in r.stderr and f"skipped {running}: still running" in r.stderr
    logs = {log.eval.task: log for log in (read_eval_log(str(p)) for p in out.glob("*.eval"))}
    assert sorted(logs) == ["cancel", "err", "ok", "open"]  # none for the stray run
    assert {t: log.status for t, log in logs.items()} == {
        "ok": "success",
        "err": "error",
        "cancel": "cancelled",
        "open": "started",
    }
    assert all(log.error is None for log in logs.values())
    assert all(log.eval.config.fail_on_error is True and log.eval.config.continue_on_fail for log in logs.values())

    ok = logs["ok"]
    assert [(s.limit.type, s.limit.limit, s.limit.reason) if s.limit else None for s in ok.samples] == [
        None,
        ("time", 60.0, "time budget spent"),
        ("cost", 1.0, "sweep cost cap reached"),
    ]
    assert all(s.error is None for s in ok.samples)
    assert (ok.results.total_samples, ok.results.completed_samples) == (3, 3)
    err = logs["err"]
    assert [s.error.message if s.error else None for s in err.samples] == [None, "harness crashed"]
    assert (err.results.total_samples, err.results.completed_samples) == (2, 1)
    assert [s.error.message for s in logs["cancel"].samples] == ["cancelled", "harness crashed"]

    # the unfinished runs are planned samples (epochs rank every seed), never samples themselves
    opened = logs["open"]
    assert opened.eval.config.epochs == 4 and [s.epoch for s in opened.samples] == [2]
    assert (opened.results.total_samples, opened.results.completed_samples) == (4, 1)
    info = opened.eval.metadata["benchctl"]
    assert info["unfinished_runs"] == sorted(killed + [running]) and stray not in info["unfinished_runs"]
    assert info["outcomes"] == {"completed": 1, "running": 1, "unfinished": 2}

    # inspect_ai.analysis reads the logs into its dataframes (pandas and pyarrow: the dev extra)
    from inspect_ai.analysis import evals_df, samples_df

    evals = evals_df(str(out), quiet=True)
    assert dict(zip(evals["task_name"], evals["status"])) == {
        "ok": "success",
        "err": "error",
        "cancel": "cancelled",
        "open": "started",
    }
    assert dict(zip(evals["task_name"], evals["total_samples"])) == {"ok": 3, "err": 2, "cancel": 2, "open": 4}
    samples = samples_df(str(out), quiet=True)
    assert len(samples) == 8
    errors = samples.set_index("eval_id").loc[err.eval.eval_id, "error"]
    assert sorted(str(e) for e in errors if isinstance(e, str) and e) == ["harness crashed"]


def test_follow_up_phases_are_spans_in_inspect_and_step_phases_in_atif(tmp_path: Path) -> None:
    results = tmp_path / "results"
    followup_run(results)
    out = tmp_path / "out"
    assert cli("export", str(results), "--to", "inspect", "-o", str(out)).returncode == 0
    assert cli("export", str(results), "--to", "atif", "-o", str(out)).returncode == 0
    sample = read_eval_log(str(next(out.glob("*.eval")))).samples[0]
    tree = event_tree(sample.events)  # inspect-ai's own span tree
    spans = [n for n in tree if isinstance(n, EventTreeSpan)]
    assert [(s.name, s.type, s.end is not None) for s in spans] == [
        ("main", "solver", True),
        ("followup-1", "solver", True),
        ("followup-2", "solver", True),
    ]

    def of(span: EventTreeSpan, kind: str) -> list[object]:
        return [e for e in span.children if getattr(e, "event", None) == kind]

    assert [[e.metadata["benchctl"]["call_id"] for e in of(s, "model")] for s in spans] == [
        ["call-1", "call-2"],
        ["call-3"],
        ["call-4"],
    ]
    assert [e.function for e in of(spans[0], "tool")] == ["bash"] and not of(spans[1], "tool")
    assert [(e.source, e.data) for e in of(spans[1], "info")][0] == ("benchctl followup", FOLLOWUPS[0])
    assert [(e.source, e.data) for e in of(spans[2], "info")][0] == ("benchctl followup", FOLLOWUPS[1])
    assert of(spans[2], "info")[-1].source == "benchctl run_end"
    # the files the run left are outside the phases (their names say the phase)
    assert [e.source for e in tree if not isinstance(e, EventTreeSpan)] == [
        "benchctl artifact report.followup-1.md",
        "benchctl artifact report.followup-2.md",
        "benchctl artifact report.md",
    ]
    # the conversation runs on through the phases
    assert [m.text for m in sample.messages if m.role == "user"] == ["Investigate /data.", *FOLLOWUPS]
    assert sample.messages[-1].text == "The timestamps."

    t = Trajectory.model_validate_json(next(out.glob("*.json")).read_bytes())
    phase = [(s.source, s.message, (s.extra or {}).get("benchctl_phase")) for s in t.steps]
    assert [(m, p) for s, m, p in phase if s == "user"] == [
        ("Investigate /data.", "main"),
        (FOLLOWUPS[0], "followup-1"),
        (FOLLOWUPS[1], "followup-2"),
    ]
    assert [(m, p) for s, m, p in phase if s == "agent" and p] == [
        ("", "main"),
        ("Done.", "main"),
        ("Revised.", "followup-1"),
        ("The timestamps.", "followup-2"),
    ]
    assert [p for s, m, p in phase if s == "agent" and m.startswith("# ")] == [None, None, None]  # artifacts
    prompt = next(s for s in t.steps if s.message == FOLLOWUPS[0])
    assert [e["type"] for e in prompt.extra["benchctl_events"]] == ["harness_event", "followup"]


def test_reexport_replaces_and_a_glob_selects(rich: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli("export", str(rich), "--to", "inspect", "-o", str(out)).returncode == 0
    assert cli("export", str(rich), "--to", "atif", "-o", str(out)).returncode == 0
    before = sorted(p.name for p in out.iterdir())
    run_id = next(p.name for p in (rich / "runs").iterdir() if p.name.endswith("__s0"))
    grade(rich, run_id, "coverage", 0.9)  # a regrade, then export again
    assert cli("export", str(rich), "--to", "inspect", "-o", str(out)).returncode == 0
    assert cli("export", str(rich), "--to", "atif", "-o", str(out)).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == before  # replaced, not duplicated
    log = read_eval_log(str(next(out.glob("*.eval"))))
    assert log.samples[0].scores["coverage"].value == 0.9
    only = tmp_path / "only"
    r = cli("export", str(rich), "--to", "atif", "-o", str(only), "--run", "*__s1")
    assert r.returncode == 0 and [p.name for p in only.iterdir()] == [run_id[:-1] + "1.json"]


def flat(text: str) -> str:
    """CLI error text without the box typer draws around it."""
    return " ".join(text.replace("│", " ").split())


def test_a_missing_extra_is_named_with_the_command_that_installs_it(tmp_path: Path) -> None:
    import os

    from tests.rigs.run import REPO

    shadow = tmp_path / "site" / "inspect_ai"  # what Python finds when inspect-ai is not installed
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'inspect_ai'\")\n")
    write_run(tmp_path / "results", [("run_start", "runner", {})])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), str(REPO)])}
    r = cli("export", str(tmp_path / "results"), "--to", "inspect", "-o", str(tmp_path / "o"), env=env)
    assert r.returncode == 2 and "pip install 'benchctl[inspect]'" in flat(r.stderr)
    assert not (tmp_path / "o").exists()
    assert cli("export", str(tmp_path / "results"), "--to", "atif", "-o", str(tmp_path / "o"), env=env).returncode == 0


def test_cli_errors_name_the_problem(tmp_path: Path) -> None:
    r = cli("export", str(tmp_path / "nope"), "--to", "inspect", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "is not a directory" in flat(r.stderr)
    r = cli("export", str(tmp_path), "--to", "inspect", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "has no runs/ directory" in r.stderr
    (tmp_path / "runs").mkdir()
    r = cli("export", str(tmp_path), "--to", "atif", "-o", str(tmp_path / "o"), "--run", "x*")
    assert r.returncode == 2 and "no finished run matching --run 'x*'" in r.stderr
    assert not (tmp_path / "o").exists()
    r = cli("export", str(tmp_path), "--to", "parquet", "-o", str(tmp_path / "o"))
    assert r.returncode == 2 and "'parquet' is not one of" in flat(r.stderr)


# ------------------------------------------------------------------------------- streaming

TRACED_EXPORT = """
import sys, tracemalloc
from pathlib import Path
import benchctl.export.atif, benchctl.export.inspect                     # imports are not the export
from benchctl.export import export
tracemalloc.start(1)
export(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))
print(tracemalloc.get_traced_memory()[1])
"""


def test_a_long_transcript_is_streamed_not_loaded(tmp_path: Path) -> None:
    """Exporting a four times longer transcript costs almost no more Python memory: the peak grows by a
    small fraction of what the transcript grows, plus at most the 1 MiB buffer inspect-ai copies its
    finished log with (holding a transcript as Python objects takes several times its size on disk).
    Numbers for 100,000 and 300,000 events: scripts/bench_export.py."""
    import subprocess
    import sys

    from tests.rigs.export import write_long_run
    from tests.rigs.run import REPO

    peaks: dict[str, list[int]] = {"inspect": [], "atif": []}
    sizes = []
    for n in (1500, 6000):
        run = write_long_run(tmp_path / f"r{n}", n)
        sizes.append((run / "transcript.jsonl").stat().st_size)
        for to in peaks:
            r = subprocess.run(
                [sys.executable, "-c", TRACED_EXPORT, str(tmp_path / f"r{n}"), to, str(tmp_path / f"{to}{n}")],
                capture_output=True,
                text=True,
                cwd=REPO,
                timeout=600,
            )
            assert r.returncode == 0, r.stderr
            peaks[to].append(int(r.stdout.split()[-1]))
    for to, (small, large) in peaks.items():
        assert large - small < 0.1 * (sizes[1] - sizes[0]) + 2**20, (to, peaks[to], sizes)
    turns = (6000 - 2) // 6
    log = read_eval_log(str(next((tmp_path / "inspect6000").glob("*.eval"))))
    # per turn a model, a tool and an info event; the run's main phase span (begin, end) and artifact
    assert len(log.samples[0].messages) == 2 * turns + 1 and len(log.samples[0].events) == 3 * turns + 5
    steps = Trajectory.model_validate_json(next((tmp_path / "atif6000").glob("*.json")).read_bytes()).steps
    assert len(steps) == 2 + turns + 1
