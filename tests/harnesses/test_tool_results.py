"""Every harness's tool_result holds exactly what the model received: the real ReAct loop, Claude Code
and Codex binaries in real containers, scripted models behind FakeUpstreamServer, and each tool
output compared with the next request — as the gateway recorded it (`recording.reconstruct`) and
as the upstream received it. Output that arrives in bursts is the case Codex's own stream gets
wrong (its `aggregated_output` keeps only the last burst)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from benchctl.gateway.recording import reconstruct
from benchctl.testing.fake_upstream import AT_END
from harnesses.claude_code import ClaudeCodeHarness
from harnesses.codex import CodexHarness
from harnesses.react import ReactHarness
from tests.rigs.cli_harness import NO_POLICIES, cli_rig

pytestmark = pytest.mark.docker

BURSTS = "echo A-FIRST; sleep 0.2; echo B-LAST"
LINES = "for i in $(seq 1 38); do echo line-$i; sleep 0.01; done"
CASES = {  # harness -> (model id, the shell tool as that harness's model calls it, time notice inside the result?)
    # ReAct appends the policy notices to the tool result itself
    "react": ("anthropic/claude-x", lambda cmd: {"name": "bash", "input": {"command": cmd}}, True),
    # a model name Claude Code knows: it appends hook context inside the tool result (CLI_FACTS.md)
    "claude-code": (
        "anthropic/claude-opus-4-5",
        lambda cmd: {"name": "Bash", "input": {"command": cmd, "description": "run"}},
        True,
    ),
    # Codex sends hook context as a developer message of its own, next to the output
    "codex": ("openai/gpt-5.5", lambda cmd: {"name": "exec_command", "input": {"cmd": cmd}}, False),
}


def _text(value: Any) -> str:
    """A tool output as the transcript states it: a string, or the text parts of a content list joined by newlines."""
    if isinstance(value, str):
        return value
    return "\n".join(p["text"] if p.get("type") in ("text", "input_text") else f"[{p.get('type')}]" for p in value)


def _outputs(body: dict[str, Any]) -> dict[str, str]:
    """call id -> the tool output a request carries (Anthropic tool_result blocks, Responses *_output items)."""
    out = {}
    for m in body.get("messages") or []:
        for b in m["content"] if isinstance(m.get("content"), list) else []:
            if b.get("type") == "tool_result":
                out[b["tool_use_id"]] = _text(b.get("content"))
    for it in body.get("input") or []:
        if isinstance(it, dict) and it.get("type") in ("function_call_output", "custom_tool_call_output"):
            out[it["call_id"]] = _text(it["output"])
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_tool_result_is_what_the_model_received(name: str, sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, shell, notice_inside = CASES[name]
    harness = {"react": ReactHarness, "claude-code": ClaudeCodeHarness, "codex": CodexHarness}[name]()
    script = {
        "turns": [
            {"text": "Two bursts.", "tool_calls": [shell(BURSTS)]},
            {"text": "Many lines.", "tool_calls": [shell(LINES)]},
            {"text": "Done."},
        ]
    }
    with cli_rig(
        harness, monkeypatch, sandbox_image, model=model, by_model={model.split("/")[1]: script}, policies=NO_POLICIES
    ) as rig:
        result = harness.run(rig.ctx)
        assert result.status == "completed", result.error
        events = rig.events()
        recorded: dict[str, str] = {}  # what the gateway recorded of each request
        for body in reconstruct(events).values():
            recorded.update(_outputs(body))
        upstream: dict[str, str] = {}  # what the model's server received
        for body in rig.bodies():
            upstream.update(_outputs(body))

    results = [e for e in events if e["type"] == "tool_result"]
    assert len(results) == 2 and len(recorded) == 2
    for res in results:
        call_id = res.get("call_id", res["id"])
        assert res["output"] == recorded[call_id] == upstream[call_id], res
        assert res["truncated"] is False and res["is_error"] is False
        assert res.get("received", True) is True
        assert ("[benchctl] Time remaining:" in res["output"]) is notice_inside
    bursts, lines = (r["output"] for r in results)
    assert "A-FIRST\nB-LAST" in bursts  # Codex's own stream said "B-LAST\n" only
    assert all(f"line-{i}\n" in lines + "\n" for i in range(1, 39))


@pytest.mark.cli_binaries
def test_the_last_tool_result_waits_for_the_gateways_record_of_the_last_call(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex exits as soon as it reads its last `response.completed`; the gateway records that call
    when the upstream's body ends or when the client's close reaches it. Here the upstream holds its
    end of body back HOLD_S after the last event and the close arrives late (a relay holds it), so the
    phase's last request, which carries the last tool's output, is recorded after Codex exited. The
    harness waits for it (Gateway.settle) before the phase ends: that tool_result is what the model
    received. Without the wait it was Codex's own report (`aggregated_output`: the last burst only,
    `received: false`)."""
    HOLD_S = 1.0
    model, shell, _ = CASES["codex"]
    harness = CodexHarness()
    script = {"turns": [{"text": "Two bursts.", "tool_calls": [shell(BURSTS)]}, {"text": "Done."}]}
    first, last = threading.Event(), threading.Event()
    first.set()  # the first answer goes at once (a fault is taken per answer, in order)
    with cli_rig(
        harness,
        monkeypatch,
        sandbox_image,
        model=model,
        by_model={model.split("/")[1]: script},
        policies=NO_POLICIES,
        hold_client_close=True,
    ) as rig:
        rig.up.pause_next(first, after_pieces=AT_END)
        rig.up.pause_next(last, after_pieces=AT_END)

        def release_when_asked() -> None:  # HOLD_S after the last request arrived
            try:
                rig.up.wait_for_requests(2, timeout=60)
            finally:
                threading.Timer(HOLD_S, last.set).start()

        threading.Thread(target=release_when_asked, daemon=True).start()
        result = harness.run(rig.ctx)
        assert result.status == "completed", result.error
        events = rig.events()
        sent = _outputs(rig.bodies()[-1])  # what the model's server received last

    (res,) = [e for e in events if e["type"] == "tool_result"]
    assert res.get("received") is True, res
    calls = [e for e in events if e["type"] == "model_call"]
    assert len(calls) == 2 and calls[-1]["latency_ms"] >= HOLD_S * 1000  # recorded at the held end of body
    recorded = _outputs(reconstruct(events)[calls[-1]["call_id"]])
    assert res["output"] == recorded[res["call_id"]] == sent[res["call_id"]]
    assert "A-FIRST\nB-LAST" in res["output"]
    assert [e for e in events if e["type"] == "warning"] == []
    assert events.index(res) > events.index(calls[-1])  # written when the call was recorded


@pytest.mark.cli_binaries
def test_calls_the_cli_rejected_are_flagged_in_transcript_meta_and_report(tmp_path) -> None:
    """A tool call the CLI refused to run (here: a tool it does not have) leaves the run `completed` but
    flagged: a `rejected` tool_result and a `warning` event, meta.json `warnings`, and a report warning."""
    import json

    from benchctl.jsonio import read_json, read_jsonl
    from tests.rigs.cli_harness import need_binary
    from tests.rigs.run import cli, make_scripted_task

    need_binary(ClaudeCodeHarness())
    need_binary(CodexHarness())
    task, model = make_scripted_task(
        tmp_path, [{"text": "Trying.", "tool_calls": [{"name": "Frobnicate", "input": {"x": 1}}]}, {"text": "Done."}]
    )
    out = tmp_path / "out"
    r = cli(
        "run",
        str(task),
        "--harness",
        "claude-code",
        "--harness",
        "codex",
        "--model",
        model,
        "--budget",
        "1m",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    for run in sorted((out / "runs").iterdir()):
        meta = read_json(run / "meta.json")
        cli_name = meta["harness"]
        assert meta["status"] == "completed", meta.get("error")
        assert meta["warnings"] == [
            {
                "kind": "tool_rejected",
                "count": 1,
                "message": f"{cli_name} rejected a call to Frobnicate: it has no such tool",
            }
        ]
        assert meta["harness_details"]["rejected_tool_calls"] == {"unknown_tool": 1}
        ev = read_jsonl(run / "transcript.jsonl")
        (res,) = [e for e in ev if e["type"] == "tool_result"]
        assert (res["name"], res["rejected"], res["is_error"], res["received"]) == (
            "Frobnicate",
            "unknown_tool",
            True,
            True,
        )
        assert [e["tool"] for e in ev if e["type"] == "warning"] == ["Frobnicate"]
    report = cli("report", str(out))
    assert report.returncode == 0, report.stderr
    flat = " ".join(report.stdout.split())  # the terminal table wraps long lines
    for cli_name in ("claude-code", "codex"):
        assert f"{cli_name} rejected a call to Frobnicate: it has no such tool" in flat
    as_json = json.loads(cli("report", str(out), "--format", "json").stdout)
    assert sum("rejected a call to Frobnicate" in w for w in as_json["warnings"]) == 2
