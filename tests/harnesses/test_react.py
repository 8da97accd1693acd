"""The ReAct harness end to end: real Docker sandbox, real gateway, scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rigs.run import bash, make_scripted_task, only_run, run_inprocess, tool

pytestmark = pytest.mark.docker

LONG = " ".join(["word"] * 80)


def types_after(events: list[dict], idx: int, n: int = 3) -> list[str]:
    return [e["type"] for e in events[idx + 1 : idx + 1 + n]]


def test_policies_in_the_transcript(tmp_path: Path) -> None:
    turns = [
        bash("ls /data && grep -n ERROR /data/app.log"),
        tool("create", path="report.md", file_text="# Report\nshort draft\n"),
        {"text": "I am done."},  # early stop -> reprompt
        tool("edit", path="report.md", old_str="short draft", new_str=LONG),
        bash(
            "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\" ; "
            "getent hosts example.com || echo dns-failed"
        ),
        tool("submit", summary="done"),  # over the limit -> revision request
        tool("edit", path="report.md", old_str=LONG, new_str="disk full on db-1, fixed"),
        tool("submit"),
    ]
    extra = '[early_exit]\nfraction = 0.9\nmax_reprompts = 1\n[length]\nfile = "report.md"\nmax_words = 50\n'
    task, model = make_scripted_task(tmp_path, turns, extra)
    assert run_inprocess(task, model, tmp_path / "out", budget="2m") == 0
    meta, ev, run = only_run(tmp_path / "out")
    assert meta["status"] == "completed", meta.get("error")
    assert meta["reprompts"] == 1 and meta["revision_requests"] == 1
    assert meta["turns"] == len(turns)
    types = [e["type"] for e in ev]

    # a time notice with every tool result (after the word-count notice, if any): recorded as a
    # notice event, and at the end of the tool_result's output, which is what the model got
    results = [i for i, t in enumerate(types) if t == "tool_result"]
    assert len(results) == 7
    for i in results:
        before = [e for e in ev[i - 2 : i] if e["type"] == "notice" and e["tool_id"] == ev[i]["id"]]
        assert before and before[-1]["kind"] == "time" and "Time remaining" in before[-1]["text"], ev[i]
        assert ev[i]["output"].endswith("\n\n" + before[-1]["text"])

    # a word-count notice after each of the three report edits
    words = [e for e in ev if e["type"] == "notice" and e["kind"] == "words"]
    assert len(words) == 3
    assert "over the limit of 50" in words[1]["text"]

    rp = [e for e in ev if e["type"] == "reprompt"]
    assert len(rp) == 1 and "Do not stop yet" in rp[0]["text"]
    assert types.index("reprompt") > types.index("assistant")
    rr = [e for e in ev if e["type"] == "revision_request"]
    assert len(rr) == 1 and "over the limit of 50" in rr[0]["text"]

    # the agent's egress attempt failed inside the sandbox and the failure is in the transcript
    egress = [e for e in ev if e["type"] == "tool_result" and ("socket" in e["output"] or "dns-failed" in e["output"])]
    assert egress and "dns-failed" in egress[0]["output"]
    assert any(w in egress[0]["output"] for w in ("Network is unreachable", "OSError", "Errno"))

    assert (run / "artifacts" / "report.md").read_text() == "# Report\ndisk full on db-1, fixed\n"
    assert meta["served_models"] and meta["usage"]["input_tokens"] > 0
    assert types[0] == "run_start" and types[-1] == "run_end"


def test_a_shell_edit_of_the_report_gets_a_word_count_too(tmp_path: Path) -> None:
    """As under the CLIs' hooks, whichever tool changed the file: here bash, not create/edit."""
    turns = [bash("printf 'one two three\\n' > report.md"), bash("cat report.md"), tool("submit")]
    extra = '[early_exit]\nenabled = false\n[length]\nfile = "report.md"\nmax_words = 50\n'
    task, model = make_scripted_task(tmp_path, turns, extra)
    assert run_inprocess(task, model, tmp_path / "out", budget="1m") == 0
    meta, ev, _ = only_run(tmp_path / "out")
    calls = [e["id"] for e in ev if e["type"] == "tool_call"]
    words = [e for e in ev if e["type"] == "notice" and e["kind"] == "words"]
    assert [(w["tool_id"], w["text"]) for w in words] == [
        (calls[0], "[benchctl] report.md: 3 words; within the window 0-50 (47 words left).")
    ]  # not after `cat`


def test_timeout_when_the_script_outlasts_the_budget(tmp_path: Path) -> None:
    turns = [tool("create", path="report.md", file_text="partial findings\n"), bash("sleep 60")]
    task, model = make_scripted_task(tmp_path, turns, after_end="repeat_last")
    assert run_inprocess(task, model, tmp_path / "out", budget="4s") == 0
    meta, ev, run = only_run(tmp_path / "out")
    assert meta["status"] == "timeout", meta.get("error")
    assert meta["elapsed_s"] < 30
    assert (run / "artifacts" / "report.md").read_text() == "partial findings\n"  # still collected
    assert any(e["type"] == "notice" and e.get("kind") == "deadline" for e in ev)


def test_rejected_tool_calls_are_flagged_not_hidden(tmp_path: Path) -> None:
    """A call to a tool ReAct does not have, or without its arguments, is refused (the model sees why) and
    flagged: a `rejected` tool_result, a `warning` event, and meta.json `warnings` — the run still completes."""
    turns = [tool("frobnicate", x=1), tool("create", path="report.md"), tool("submit")]
    task, model = make_scripted_task(tmp_path, turns, "[early_exit]\nenabled = false\n")
    assert run_inprocess(task, model, tmp_path / "out", budget="1m") == 0
    meta, ev, _ = only_run(tmp_path / "out")
    assert meta["status"] == "completed", meta.get("error")
    assert meta["warnings"] == [
        {"kind": "tool_rejected", "message": "react rejected a call to frobnicate: it has no such tool", "count": 1},
        {
            "kind": "tool_rejected",
            "message": "react rejected a call to create: it could not use the call's input",
            "count": 1,
        },
    ]
    results = [e for e in ev if e["type"] == "tool_result"]
    assert [r.get("rejected") for r in results] == ["unknown_tool", "invalid_input", None]
    assert results[0]["output"].startswith("Unknown tool 'frobnicate'")


def test_refusal_without_fallback_is_refused(tmp_path: Path) -> None:
    task, model = make_scripted_task(tmp_path, [{"refusal": True, "text": "I can't help with that."}])
    assert run_inprocess(task, model, tmp_path / "out", budget="1m") == 0
    meta, ev, _ = only_run(tmp_path / "out")
    assert meta["status"] == "refused"
    assert meta["refusals"] >= 1


def test_refusal_with_fallback_continues_on_the_fallback_model(tmp_path: Path) -> None:
    task, model = make_scripted_task(tmp_path, [{"refusal": True, "text": "No."}], name="t")
    _, fb = make_scripted_task(
        tmp_path, [tool("create", path="report.md", file_text="fallback wrote this\n"), tool("submit")], name="fb"
    )
    task.joinpath("task.toml").write_text(task.joinpath("task.toml").read_text() + "[early_exit]\nenabled = false\n")
    assert run_inprocess(task, model, tmp_path / "out", budget="1m", fallback=fb) == 0
    meta, ev, run = only_run(tmp_path / "out")
    assert meta["status"] == "completed", meta.get("error")
    assert meta["fallbacks"], meta
    assert fb in meta["served_models"]
    assert (run / "artifacts" / "report.md").read_text() == "fallback wrote this\n"


def test_followup_artifacts_are_kept_separately(tmp_path: Path) -> None:
    turns = [
        tool("create", path="report.md", file_text="first\n"),
        tool("submit"),
        tool("create", path="report.md", file_text="expanded\n"),
        tool("submit"),
    ]
    extra = '[early_exit]\nenabled = false\n[[followups]]\nprompt = "Now expand the report."\n'
    task, model = make_scripted_task(tmp_path, turns, extra)
    assert run_inprocess(task, model, tmp_path / "out", budget="1m") == 0
    meta, ev, run = only_run(tmp_path / "out")
    assert meta["status"] == "completed"
    assert (run / "artifacts" / "report.md").read_text() == "first\n"
    assert (run / "artifacts" / "report.followup-1.md").read_text() == "expanded\n"
    assert meta["followups"][0]["status"] == "completed"
    assert any(e["type"] == "followup" and e["prompt"] == "Now expand the report." for e in ev)
    # turns are counted per phase, as the CLI harnesses count them: 2 in the run, 2 in the follow-up
    # (ReAct used to report the running total, 4, for the follow-up)
    assert meta["turns"] == 2 and meta["followups"][0]["turns"] == 2


def test_timeout_during_a_slow_model_call(tmp_path: Path) -> None:
    task, model = make_scripted_task(
        tmp_path, [tool("create", path="report.md", file_text="early\n"), {"text": "thinking...", "delay": 30}]
    )
    assert run_inprocess(task, model, tmp_path / "out", budget="3s") == 0
    meta, ev, run = only_run(tmp_path / "out")
    assert meta["status"] == "timeout", meta.get("error")
    assert meta["elapsed_s"] < 15
    assert (run / "artifacts" / "report.md").read_text() == "early\n"
