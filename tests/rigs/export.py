"""Runs in the on-disk shapes `benchctl run` writes (meta.json + transcript.jsonl through the real
TranscriptWriter) for the export tests and scripts/bench_export.py: a long run, and a hand-made
run with everything an export has to get right.

A long run's turn is what a ReAct run records: a `model_call` whose request is a gateway request delta
(benchctl.gateway.recording's format: the previous answer as {"$response": id} plus the new tool
result), then `assistant`, `tool_call`, `tool_result` and a time `notice` — 6 events per turn."""

from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

import orjson

from benchctl.layout import make_run_id
from benchctl.transcript import Redactor, TranscriptWriter

LONG_SYSTEM = "You are an investigator in a sandbox. " * 20
LONG_TOOLS = [
    {
        "name": "bash",
        "description": "Run a bash command in the sandbox. " * 10,
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    }
]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()
EVENTS_PER_TURN = 6


def write_long_run(
    results: Path,
    n_events: int,
    *,
    output_chars: int = 1500,
    seed: int = 0,
    task: str = "long",
    model: str = "scripted/long.json",
) -> Path:
    """A completed run with about `n_events` transcript events; returns its run directory."""
    rng = random.Random(seed)
    run_id = make_run_id(task, "react", model, "2h", 0)
    run = results / "runs" / run_id
    run.mkdir(parents=True)
    t0 = time.time()
    usage_total = {
        "input_tokens": 0,
        "cached_input_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": 0,
        "reasoning_tokens": 0,
    }
    turns = max(1, (n_events - 2) // EVENTS_PER_TURN)
    with TranscriptWriter(run / "transcript.jsonl", Redactor([])) as tr:
        tr.emit("run_start", "runner", run_id=run_id, spec={"task": task, "model": model}, budget_s=7200.0)
        prev_output = ""
        for i in range(1, turns + 1):
            call, tool_id = f"call-{i}", f"toolu_{i:08d}"
            if i == 1:
                request: dict[str, Any] = {
                    "conv": "call-1",
                    "base": None,
                    "keep": 0,
                    "set": {"model": model, "system": LONG_SYSTEM, "tools": LONG_TOOLS, "max_tokens": 8192},
                    "append": [{"role": "user", "content": "Investigate /data and write /work/report.md."}],
                }
            else:
                result = {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{i - 1:08d}",
                    "content": prev_output + "\n\n[benchctl] Time remaining: 1h 00m of 2h 00m.",
                }
                request = {
                    "conv": "call-1",
                    "base": f"call-{i - 1}",
                    "keep": 1 + 2 * (i - 2),
                    "append": [{"$response": f"call-{i - 1}"}, {"role": "user", "content": [result]}],
                }
            command = " ".join(rng.choice(WORDS) for _ in range(8))
            usage = {
                "input_tokens": 200 + 40 * i,
                "cached_input_tokens": 0,
                "cache_write_tokens": 0,
                "output_tokens": 30,
                "reasoning_tokens": 0,
            }
            for k, v in usage.items():
                usage_total[k] += v
            tr.emit(
                "model_call",
                "gateway",
                call_id=call,
                wire_api="anthropic_messages",
                path="/v1/messages",
                requested_model=model,
                served_model=model,
                stream=False,
                status=200,
                latency_ms=1.0,
                ttfb_ms=1.0,
                usage=usage,
                cost_usd=0.0,
                stop_reason="tool_use",
                refusal=False,
                request=request,
                response={
                    "text": f"Step {i}.",
                    "tool_calls": [{"id": tool_id, "name": "bash", "input": {"command": command}}],
                },
            )
            tr.emit("assistant", "harness", turn=i, text=f"Step {i}.", stop_reason="tool_use", tool_calls=1)
            tr.emit("tool_call", "harness", id=tool_id, name="bash", input={"command": command})
            prev_output = " ".join(rng.choice(WORDS) for _ in range(output_chars // 6))[:output_chars]
            tr.emit(
                "tool_result",
                "harness",
                id=tool_id,
                name="bash",
                output=prev_output,
                exit_code=0,
                is_error=False,
                truncated=False,
                timed_out=False,
            )
            tr.emit(
                "notice", "policy", kind="time", text="[benchctl] Time remaining: 1h 00m of 2h 00m.", tool_id=tool_id
            )
        tr.emit("run_end", "runner", status="completed", error=None, usage=usage_total, cost_usd=0.0, turns=turns)
    (run / "artifacts").mkdir()
    (run / "artifacts" / "report.md").write_text("# Report\n\nNothing found.\n")
    meta = {
        "schema": 1,
        "run_id": run_id,
        "status": "completed",
        "task": task,
        "harness": "react",
        "model": model,
        "budget": "2h",
        "budget_s": 7200.0,
        "seed": 0,
        "variant": None,
        "spec": {"task": task, "seed": 0},
        "started_at": t0,
        "ended_at": time.time(),
        "elapsed_s": time.time() - t0,
        "usage": usage_total,
        "cost_usd": 0.0,
        "served_models": {model: turns},
        "fallbacks": [],
        "turns": turns,
        "artifacts": ["report.md"],
        "benchctl_version": "0.1.0",
    }
    (run / "meta.json").write_bytes(orjson.dumps(meta))
    return run


# ------------------------------------------------------------------------------- hand-made runs


def write_run(
    results: Path,
    events: list[tuple[str, str, dict[str, Any]]],
    *,
    run_id: str | None = None,
    artifacts: dict[str, str | bytes] | None = None,
    **meta: Any,
) -> Path:
    """A run directory whose transcript holds `events` ((type, source, fields), written by the real
    TranscriptWriter with no secrets to scrub) and whose meta.json holds `meta` over defaults."""
    base = {
        "schema": 1,
        "status": "completed",
        "task": "t",
        "harness": "react",
        "model": "scripted/m.json",
        "budget": "1m",
        "budget_s": 60.0,
        "seed": 0,
        "variant": None,
        "started_at": 1_800_000_000.0,
        "ended_at": 1_800_000_060.0,
        "elapsed_s": 60.0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "cost_usd": 0.0,
        "served_models": {},
        "fallbacks": [],
        "benchctl_version": "0.1.0",
    }
    base.update(meta)
    run_id = run_id or make_run_id(
        base["task"],
        base["harness"],
        base["model"],
        base["budget"],
        base["seed"],
        base.get("variant"),
        base.get("tools"),
    )
    base["run_id"] = run_id
    run = results / "runs" / run_id
    (run / "artifacts").mkdir(parents=True)
    with TranscriptWriter(run / "transcript.jsonl", Redactor([])) as tr:
        for kind, source, fields in events:
            tr.emit(kind, source, **fields)
    for name, content in (artifacts or {}).items():
        p = run / "artifacts" / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
    base.setdefault("artifacts", sorted(artifacts or {}))
    (run / "meta.json").write_bytes(orjson.dumps(base))
    return run


def model_calls(
    requests: list[tuple[Any, ...]], wire_api: str = "anthropic_messages", model: str = "scripted/m.json"
) -> list[tuple[str, str, dict[str, Any]]]:
    """`model_call` events for full (request body, response[, wire API]) tuples, their request
    deltas made by the gateway's own RequestRecorder."""
    from benchctl.gateway.recording import RequestRecorder

    rec = RequestRecorder()
    out = []
    for i, (body, response, *wire) in enumerate(requests, 1):
        api = wire[0] if wire else wire_api
        call_id = f"call-{i}"
        delta = rec.delta(call_id, api, body)
        rec.note_response(call_id, api, response)
        out.append(
            (
                "model_call",
                "gateway",
                {
                    "call_id": call_id,
                    "wire_api": api,
                    "requested_model": body.get("model", model),
                    "served_model": model,
                    "stream": False,
                    "status": 200,
                    "latency_ms": 500.0,
                    "ttfb_ms": 100.0,
                    "usage": {
                        "input_tokens": 100 * i,
                        "cached_input_tokens": 10,
                        "cache_write_tokens": 5,
                        "output_tokens": 20,
                        "reasoning_tokens": 0,
                    },
                    "cost_usd": 0.001 * i,
                    "stop_reason": "tool_use" if response.get("tool_calls") else "end_turn",
                    "refusal": False,
                    "request": delta,
                    "response": response,
                },
            )
        )
    return out


# ------------------------------------------------------------------------------- a rich hand-made run

SYSTEM = "You are an investigator."
# the agent's first words: markdown and HTML a viewer must show as text, not render
MARKDOWN = "Looking. **bold** [click](http://example.com/x) <img src=x onerror=alert(2)>"
TOOLS = [
    {
        "name": "bash",
        "description": "Run bash.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def use(tid: str, cmd: str, text: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """(assistant message as the client echoes it, the recorded response)"""
    blocks = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "tool_use", "id": tid, "name": "bash", "input": {"command": cmd}}
    ]
    return {"role": "assistant", "content": blocks}, {
        "text": text,
        "tool_calls": [{"id": tid, "name": "bash", "input": {"command": cmd}}],
    }


def result(tid: str, out: str, extra: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": tid, "content": out}]
    if extra:
        blocks.append({"type": "text", "text": extra})
    return {"role": "user", "content": blocks}


def body(messages: list[Any], **fields: Any) -> dict[str, Any]:
    return {"model": "m", "system": SYSTEM, "tools": TOOLS, "max_tokens": 1000, "messages": messages, **fields}


def conversation_requests() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A main conversation with a side call in the middle, history re-sent in another shape, and a
    rewrite (compaction) near the end — the cases request deltas have to get right."""
    a1, r1 = use("t1", "ls /data", MARKDOWN)
    a2, r2 = use("t2", "cat /data/a.log")
    a3, r3 = use("t3", "grep x /data/a.log", "Narrowing down.")
    m1 = [user("Investigate /data.")]
    m2 = m1 + [a1, result("t1", "a.log", "[benchctl] Time remaining: 50s.")]
    m3 = m2 + [a2, result("t2", "x=1\nx=2")]
    reshaped = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a.log"}]},
            {"type": "text", "text": "[benchctl] Time remaining: 50s."},
        ],
    }
    m3_reshaped = m3[:2] + [reshaped] + m3[3:]
    m4 = m3_reshaped + [a3, result("t3", "x=1"), user("You still have time. Do not stop yet.")]
    compacted = m3_reshaped[:1] + [user("Summary so far: x appears twice."), user("Continue.")]
    return [
        (body(m1), r1),
        (body(m2), r2),
        (
            {"model": "haiku", "max_tokens": 50, "messages": [user("Title for: Investigate /data.")]},
            {"text": "Log investigation", "tool_calls": []},
        ),
        (body(m3), r3),
        (body(m4), {"text": "Done with the first pass.", "tool_calls": []}),
        (body(compacted), {"text": "Final answer.", "tool_calls": []}),
    ]


SECRET = "sk-test-0123456789abcdef"
NASTY = 'end"}]},{"injected": true} </script><script>alert(1)</script> \u202e attachment://'
LONG = "long output line\n" * 300
# an agent can hash its own earlier output: the reference Inspect's reader would resolve to it
FORGED_REF = "attachment://" + hashlib.sha256(LONG.encode()).hexdigest()[:32]


def rich_run(results: Path, **meta: Any) -> Path:
    """Model calls (incl. a side call and a refusal + fallback), tools, policy events, an event type
    this exporter does not know, a redaction marker, agent text trying to break out, an artifact."""
    calls = model_calls(conversation_requests())
    refusal = (
        "model_call",
        "gateway",
        {
            **calls[4][2],
            "call_id": "call-9",
            "refusal": True,
            "stop_reason": "refusal",
            "request": None,
            "response": {"text": "I can't help.", "tool_calls": []},
        },
    )
    # cut off by the deadline: a partial answer, no usage reported (unknown, so it must stay unknown)
    timed_out = (
        "model_call",
        "gateway",
        {
            **{k: v for k, v in calls[4][2].items() if k != "usage"},
            "call_id": "call-10",
            "status": None,
            "outcome": "timeout",
            "partial": True,
            "request": None,
            "response": {"text": "partial ans", "tool_calls": []},
        },
    )
    events = [
        ("run_start", "runner", {"run_id": "x", "budget_s": 60.0}),
        calls[0],
        ("tool_call", "harness", {"id": "t1", "name": "bash", "input": {"command": "ls /data"}}),
        (
            "tool_result",
            "harness",
            {"id": "t1", "name": "bash", "output": "a.log [REDACTED] " + NASTY, "exit_code": 0, "is_error": False},
        ),
        ("notice", "policy", {"kind": "time", "text": "[benchctl] Time remaining: 50s.", "tool_id": "t1"}),
        calls[1],
        calls[2],
        ("tool_call", "harness", {"id": "t2", "name": "bash", "input": {"command": "cat /data/a.log"}}),
        (
            "tool_result",
            "harness",
            {"id": "t2", "name": "bash", "output": LONG, "exit_code": 1, "is_error": True, "timed_out": False},
        ),
        calls[3],
        refusal,
        ("refusal", "gateway", {"call_id": "call-9", "model": "scripted/m.json", "action": "fallback"}),
        ("fallback", "gateway", {"call_id": "call-9", "from": "scripted/m.json", "to": "scripted/old.json"}),
        ("tool_call", "harness", {"id": "t3", "name": "bash", "input": {"command": "grep x /data/a.log"}}),
        (
            "tool_result",
            "harness",
            {"id": "t3", "name": "bash", "output": FORGED_REF, "exit_code": 0, "is_error": False},
        ),
        ("reprompt", "policy", {"text": "You still have time. Do not stop yet.", "reprompts": 1}),
        calls[4],
        timed_out,
        ("tool_rejected_warning", "harness", {"cli": "codex", "message": "tool call rejected", "leak": SECRET}),
        ("stderr", "harness", {"cli": "codex", "text": LONG}),  # long: stored as an attachment
        ("stderr", "harness", {"cli": "codex", "text": FORGED_REF}),  # ...and a reference forged to it
        calls[5],
        ("run_end", "runner", {"status": meta.get("status", "completed")}),
    ]
    return write_run(
        results,
        events,
        artifacts={"report.md": "# Report\n\n" + NASTY, "blob.bin": b"\xff\x00\xfe"},
        fallbacks=[{"from": "scripted/m.json", "to": "scripted/old.json", "reason": "refusal"}],
        served_models={"scripted/m.json": 7, "scripted/old.json": 1},
        usage={"input_tokens": 2100, "cached_input_tokens": 70, "cache_write_tokens": 35, "output_tokens": 140},
        cost_usd=None,
        **meta,
    )


def grade(
    results: Path,
    run_id: str,
    grader: str,
    score: float | None,
    tag: str | None = None,
    items: list[dict[str, Any]] | None = None,
) -> None:
    p = results / "grades" / grader / (run_id + (f"~{tag}" if tag else "") + ".json")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(
        json.dumps(
            {
                "schema": 1,
                "grader": grader,
                "run_id": run_id,
                "artifact": "report.md",
                "artifact_tag": tag,
                "judge": "scripted/judge",
                "status": "unscored" if score is None else "scored",
                "score": score,
                "items": items or [],
                "n_items": len(items or []),
            }
        )
    )


# ------------------------------------------------------------------------------- a run with follow-ups

FOLLOWUPS = ["Check your report once more.", "Now list what you are least sure of."]


def followup_run(results: Path, **meta: Any) -> Path:
    """A run with two follow-ups, recorded as benchctl.executors.run_body records them: the main
    phase (a tool call, then the answer), its artifacts collected, then per follow-up a `followup`
    event, the same conversation continued with the follow-up prompt, and its artifacts collected."""
    a1, r1 = use("t1", "ls /data")
    m1 = [user("Investigate /data.")]
    m2 = m1 + [a1, result("t1", "a.log")]
    m3 = m2 + [{"role": "assistant", "content": "Done."}, user(FOLLOWUPS[0])]
    m4 = m3 + [{"role": "assistant", "content": "Revised."}, user(FOLLOWUPS[1])]
    calls = model_calls(
        [
            (body(m1), r1),
            (body(m2), {"text": "Done.", "tool_calls": []}),
            (body(m3), {"text": "Revised.", "tool_calls": []}),
            (body(m4), {"text": "The timestamps.", "tool_calls": []}),
        ]
    )
    collect = ("harness_event", "runner", {"kind": "collect", "copied": ["report.md"], "skipped": [], "missing": []})
    events = [
        ("run_start", "runner", {"run_id": "x", "budget_s": 60.0}),
        calls[0],
        ("tool_call", "harness", {"id": "t1", "name": "bash", "input": {"command": "ls /data"}}),
        ("tool_result", "harness", {"id": "t1", "name": "bash", "output": "a.log", "exit_code": 0, "is_error": False}),
        calls[1],
        collect,
        ("followup", "runner", {"index": 1, "prompt": FOLLOWUPS[0], "budget_s": 60.0}),
        calls[2],
        collect,
        ("followup", "runner", {"index": 2, "prompt": FOLLOWUPS[1], "budget_s": 60.0}),
        calls[3],
        collect,
        ("run_end", "runner", {"status": "completed"}),
    ]
    events = [(k, src, {**f, "t": 1_800_000_000.0 + 5 * i}) for i, (k, src, f) in enumerate(events)]  # in order
    followups = [
        {
            "index": i,
            "prompt": p,
            "status": "completed",
            "error": None,
            "turns": 1,
            "artifacts": [f"report.followup-{i}.md"],
        }
        for i, p in enumerate(FOLLOWUPS, 1)
    ]
    return write_run(
        results,
        events,
        artifacts={
            "report.md": "# Report\n",
            "report.followup-1.md": "# Revised\n",
            "report.followup-2.md": "# Unsure\n",
        },
        followups=followups,
        **{"task": "fu", **meta},
    )


# ------------------------------------------------------------------------------- a run that thinks

REASONING_WIRES = ("anthropic_messages", "openai_responses", "openai_chat")
# reasoning the agent wrote: long (an attachment), trying to break out, holding a key the export scrubs
LONG_THOUGHT = "The timestamps disagree; check the rotation first. " * 60 + NASTY + " " + FORGED_REF + " " + SECRET


def thought(text: str, signature: str | None = None) -> dict[str, Any]:
    return {"type": "reasoning", "text": text, "summary": False, "redacted": False, "signature": signature}


def withheld(signature: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": "", "summary": False, "redacted": True, "signature": signature}


def summarised(text: str, signature: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": text, "summary": True, "redacted": False, "signature": signature}


def thinking_answers(wire_api: str) -> list[dict[str, Any]]:
    """Three answers that each think (the final one too) in the recorded shape (README "Transcript"),
    with what each wire API can carry: Anthropic thinking with signatures and a redacted block,
    Responses summaries and encrypted-only items, chat completions' plain reasoning_content."""
    if wire_api == "anthropic_messages":
        first = [thought("Start with a listing.", "EqQBCkYIBxgCKkD+/sig1=="), withheld("EmwKAhgBEgy+/redacted1==")]
        second, third = [thought(LONG_THOUGHT, "EqQBCkYIBxgC/sig2==")], [thought("Enough evidence.", "Eq+/sig3")]
    elif wire_api == "openai_responses":
        first = [summarised("Start with a listing.", "gAAAAAB+/enc1a=="), withheld("gAAAAAB+/enc1b==")]
        second, third = [summarised(LONG_THOUGHT, "gAAAAAB+/enc2==")], [summarised("Enough evidence.", "gAAAAA/enc3")]
    else:
        first, second, third = (
            [thought("Start with a listing.")],
            [thought(LONG_THOUGHT)],
            [thought("Enough evidence.")],
        )
    return [
        {
            "text": "Looking.",
            "tool_calls": [{"id": "t1", "name": "bash", "input": {"command": "ls /data"}}],
            "reasoning": first,
        },
        {
            "text": "",
            "tool_calls": [{"id": "t2", "name": "bash", "input": {"command": "cat a.log"}}],
            "reasoning": second,
        },
        {"text": "Final answer.", "tool_calls": [], "reasoning": third},
    ]


def _echo(wire_api: str, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer as the agent's client sends it back in its next request (its own wire shape:
    Claude Code and Codex send reasoning back with its opaque strings; chat completions clients,
    ReAct's included, send none)."""
    calls = answer["tool_calls"]
    if wire_api == "anthropic_messages":
        blocks: list[dict[str, Any]] = [
            {"type": "redacted_thinking", "data": r["signature"]}
            if r["redacted"]
            else {"type": "thinking", "thinking": r["text"], "signature": r["signature"]}
            for r in answer["reasoning"]
        ]
        blocks += [{"type": "text", "text": answer["text"]}] if answer["text"] else []
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["input"]} for c in calls]
        return [{"role": "assistant", "content": blocks}]
    if wire_api == "openai_responses":
        items: list[dict[str, Any]] = [
            {
                "type": "reasoning",
                "id": f"rs_{i}",
                "summary": [{"type": "summary_text", "text": r["text"]}] if r["text"] else [],
                "content": None,
                "encrypted_content": r["signature"],
            }
            for i, r in enumerate(answer["reasoning"])
        ]
        if answer["text"]:
            items.append(
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer["text"]}]}
            )
        items += [
            {"type": "function_call", "call_id": c["id"], "name": c["name"], "arguments": json.dumps(c["input"])}
            for c in calls
        ]
        return items
    return [
        {
            "role": "assistant",
            "content": answer["text"] or None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c["input"])},
                }
                for c in calls
            ]
            or None,
        }
    ]


def _tool_output(wire_api: str, tid: str, out: str) -> dict[str, Any]:
    if wire_api == "anthropic_messages":
        return result(tid, out)
    if wire_api == "openai_responses":
        return {"type": "function_call_output", "call_id": tid, "output": out}
    return {"role": "tool", "tool_call_id": tid, "content": out}


def _request(wire_api: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if wire_api == "anthropic_messages":
        return body(messages)
    if wire_api == "openai_responses":
        return {"model": "m", "instructions": SYSTEM, "input": messages}
    return {"model": "m", "messages": [{"role": "system", "content": SYSTEM}] + messages}


def reasoning_run(results: Path, wire_api: str, **meta: Any) -> Path:
    """A run over `wire_api` whose model thinks on every answer (thinking_answers) and whose client
    sends each answer back in its next request, plus a side call that does not think."""
    answers = thinking_answers(wire_api)
    task = (
        {"role": "user", "content": [{"type": "input_text", "text": "Investigate /data."}]}
        if wire_api == "openai_responses"
        else user("Investigate /data.")
    )
    history = [task]
    requests: list[tuple[Any, ...]] = []
    for i, answer in enumerate(answers):
        requests.append((_request(wire_api, list(history)), answer, wire_api))
        if answer["tool_calls"]:
            tid = answer["tool_calls"][0]["id"]
            history += _echo(wire_api, answer) + [_tool_output(wire_api, tid, f"output {i + 1}")]
    side = ({"model": "haiku", "messages": [user("Title for: Investigate /data.")]}, {"text": "Logs", "tool_calls": []})
    requests.insert(1, (*side, "anthropic_messages"))
    return write_run(
        results, [("run_start", "runner", {})] + model_calls(requests), task="think", tools=wire_api, **meta
    )
