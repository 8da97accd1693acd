"""Statements of the docs (docs/*.md) checked against the code: the examples and lists a page gives
must be what the code does (an example that does not work, or a field list that drifted, fails here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _code_block(page: str, starting_with: str) -> str:
    """The fenced code block of a docs page whose first line starts with `starting_with`."""
    for m in re.finditer(r"```[a-z]*\n(.*?)```", _page(page), re.DOTALL):
        if m.group(1).startswith(starting_with):
            return m.group(1)
    raise AssertionError(f"no code block starting with {starting_with!r} in docs/{page}")


def _backticked_after(page: str, lead: str, until: str = ".") -> list[str]:
    """The `names` of the sentence of a docs page that starts with `lead`."""
    prose = " ".join(_page(page).split())  # line breaks in prose are spaces
    start = prose.index(lead) + len(lead)
    text = prose[start : prose.index(until, start)]
    return re.findall(r"`([^`]+)`", text)


def test_scripted_match_rule_example_answers_the_builtin_coverage_prompt(tmp_path: Path) -> None:
    """The scripted-models page's example script, used as a judge as it is: its match rule answers the built-in
    coverage prompt for a batch F1, F2 at once (no re-ask, no other turn used)."""
    from typer.testing import CliRunner

    from benchctl.cli import app
    from benchctl.jsonio import read_json, write_json_atomic

    script = tmp_path / "judge.json"
    script.write_text(_code_block("scripted-models.md", '{"description": "optional"'))
    task = tmp_path / "task"
    (task / "grading").mkdir(parents=True)
    (task / "grading" / "findings.jsonl").write_text(
        '{"id": "F1", "text": "The attacker came from 203.0.113.77."}\n'
        '{"id": "F2", "text": "Audit entries were deleted."}\n'
    )
    (task / "grading" / "reference.md").write_text("# Reference\n\nTLDR: a brute-force login.\n")
    (task / "task.toml").write_text(
        'name = "t"\n[grading]\ngraders = ["coverage"]\n'
        'findings = "grading/findings.jsonl"\nreference = "grading/reference.md"\n'
    )
    results = tmp_path / "results"
    run = results / "runs" / "t__react__m__2m__s0"
    (run / "artifacts").mkdir(parents=True)
    (run / "artifacts" / "report.md").write_text("# Report\n\nSomeone logged in from 203.0.113.77.\n")
    write_json_atomic(
        run / "meta.json", {"schema": 1, "run_id": run.name, "status": "completed", "spec": {"task_dir": str(task)}}
    )
    r = CliRunner().invoke(app, ["grade", str(results), "--judge", f"scripted/{script}", "--grader", "coverage"])
    assert r.exit_code == 0, r.output
    rec = read_json(results / "grades" / "coverage" / f"{run.name}.json")
    assert {it["id"]: it["score"] for it in rec["items"]} == {"F1": 0.7, "F2": 0.0}
    assert rec["status"] == "scored" and rec["judge_calls"] == 1


def test_target_call_source_is_the_one_the_code_writes(tmp_path: Path) -> None:
    """One name for the target tools' transcript source, in the code and in the transcript format."""
    from benchctl.transcript import TranscriptWriter
    from tests.rigs.targets import events, tools_for

    tr = TranscriptWriter(tmp_path / "t.jsonl")
    tt = tools_for("default", tr)
    try:
        tt.call("chat", {"message": "hi"})
    finally:
        tt.close()
    (source,) = {e["source"] for e in events(tmp_path / "t.jsonl")}
    transcript_page = _page("formats/transcript.md")
    row = re.search(r"^\| `target_call` \| (\w+) \|", transcript_page, re.M)
    assert row is not None and row.group(1) == source
    assert re.search(r'"source":\s*(?:[a-z_]+\|)*' + source + r"[|,]", transcript_page)


def test_documented_notice_kinds_include_the_token_budget_ones(tmp_path: Path) -> None:
    """Drive the token budget through notice, final instruction and stop, and check that every
    notice kind it writes is in the transcript format's `notice` row."""
    from types import SimpleNamespace

    from benchctl.jsonio import read_jsonl
    from benchctl.targets.token_budget import TokenBudget, TokenBudgetHook
    from benchctl.transcript import TranscriptWriter

    used = {"output_tokens": 0}
    gateway = SimpleNamespace(summary=lambda: {"usage": dict(used)})  # the one thing the hook reads
    with TranscriptWriter(tmp_path / "t.jsonl") as tr:
        ctx = SimpleNamespace(gateway=gateway, transcript=tr, token_budget=TokenBudget(limit=100, grace=10))
        hook = TokenBudgetHook()
        for tokens in (50, 100, 120):
            used["output_tokens"] = tokens
            hook.check(ctx, "call-1")
    kinds = [e["kind"] for e in read_jsonl(tmp_path / "t.jsonl") if e["type"] == "notice"]
    assert kinds == ["tokens", "token_final", "token_deadline"]
    row = next(line for line in _page("formats/transcript.md").splitlines() if line.startswith("| `notice` |"))
    assert all(f"`{k}`" in row for k in kinds + ["time", "words", "deadline"])


def test_report_json_keys_are_the_documented_ones(tmp_path: Path) -> None:
    """The leaderboard, unscored and tournament row keys the report page lists are exactly the columns
    `report --format json` has (with every optional configuration column present)."""
    from benchctl.report.build import build_report
    from benchctl.report.render_text import to_json_obj
    from tests.rigs.report import add_grade, add_run, write_ratings

    for task, harness, variant, tools in (("a", "react", None, None), ("b", "codex", "v1", "chat")):
        rid = add_run(tmp_path, model="p/m", task=task, harness=harness, variant=variant, tools=tools)
        add_grade(tmp_path, "combined", rid, 0.5)
    add_run(tmp_path, model="p/m", task="a", seed=1, status="error", error="boom")
    write_ratings(
        tmp_path,
        {
            "leaderboard": [
                {
                    "rank": 1,
                    "auditor": "p/m",
                    "elo": 1000.0,
                    "lo": 990.0,
                    "hi": 1010.0,
                    "matches": 3,
                    "environments": 1,
                    "runs": 1,
                    "mean_share": 0.5,
                    "cost_usd": 1.0,
                }
            ],
            "flags": {},
        },
    )
    tables = to_json_obj(build_report(tmp_path))["tables"]
    assert _backticked_after("report.md", "Leaderboard row keys: ", "Unscored rows") == tables["leaderboard"]["columns"]
    assert _backticked_after("report.md", "Unscored rows: ", " (") == tables["unscored"]["columns"]
    assert _backticked_after("report.md", "Tournament rows: ", ".") == tables["tournament"]["columns"]


def test_validate_json_keys_are_the_documented_ones(tmp_path: Path) -> None:
    from benchctl.grading.validate import validate

    example = json.loads(_code_block("grading.md", '{"groups": ['))
    documented = example["groups"][0]
    rows = [
        {"grader": "tldr", "run_id": r, "artifact_tag": None, "item": "holistic", "score": s, "rater": "ann"}
        for r, s in (("a", 0.9), ("b", 0.1))
    ]
    (g,) = validate(rows, {("tldr", "a", None, "holistic"): 0.8, ("tldr", "b", None, "holistic"): 0.2})["groups"]
    assert set(g) == set(documented)
    assert documented["pairs"] == documented["pairs_same"] + documented["pairs_tied"] + documented["pairs_reversed"]


@pytest.mark.docker
def test_hard_links_and_background_processes_behave_as_documented(tmp_path: Path) -> None:
    """The sandbox page: a hard-linked file inside a collected directory is copied once, the other
    names listed as `hard link -> <first name>`; an artifact named on its own is copied; a
    background process outlives the tool call that started it, until the call times out."""
    import uuid

    from benchctl.sandbox.base import SandboxSpec
    from benchctl.sandbox.docker_sandbox import DockerSandbox
    from benchctl.sandbox.images import DEFAULT_TAG

    with DockerSandbox(SandboxSpec(image=DEFAULT_TAG, run_id=f"docs-{uuid.uuid4().hex[:8]}")) as box:
        box.exec(
            "mkdir /work/out && echo hi > /work/out/a.txt && ln /work/out/a.txt /work/out/b.txt "
            "&& ln /work/out/a.txt /work/report.md",
            timeout=30,
        )
        rep = box.collect(["/work/out"], tmp_path / "dir")
        assert [p.name for p in (tmp_path / "dir").rglob("*.txt")] == ["a.txt"]
        assert rep.skipped == [{"path": "/work/out/b.txt", "reason": "hard link -> out/a.txt (not followed)"}]
        rep = box.collect(["/work/report.md"], tmp_path / "named")
        assert (tmp_path / "named" / "report.md").read_text() == "hi\n" and rep.skipped == []

        r = box.exec("sleep 300 & echo started", timeout=60)
        assert r.stdout == "started\n" and not r.timed_out and r.duration_s < 60
        assert "sleep 300" in box.exec("pgrep -a sleep", timeout=30).stdout  # still running
        r = box.exec("setsid sleep 301 & sleep 100", timeout=3)
        assert r.timed_out
        procs = box.exec("pgrep -a sleep", timeout=30).stdout
        assert "sleep 301" not in procs and "sleep 300" in procs  # only the timed-out call's go


SEEN: list[str] = []


def flaky_then_fake(request):
    """A scripted judge whose every first attempt at a question fails with a retryable 529 (retried
    at once by benchctl.gateway.complete); the retry gets the fake judge's answer."""
    from benchctl.grading.fake_judge import judge

    SEEN.append(request.last_user_text)
    if SEEN.count(request.last_user_text) == 1:
        return {"error": {"status": 529, "message": "overloaded", "retry_after": 0}}
    return judge(request)


def test_judge_calls_count_logical_calls_not_http_attempts(tmp_path: Path) -> None:
    """`judge calls: N` (and each record's judge_calls) counts questions asked, not the HTTP retries."""
    from typer.testing import CliRunner

    from benchctl.cli import app
    from benchctl.jsonio import read_json
    from tests.rigs.grading import GOOD_REPORT, make_rubric_task, make_run

    task = make_rubric_task(tmp_path, graders='["coverage"]')
    results = tmp_path / "results"
    run = make_run(results, "demo__react__m__2m__s0", task, {"report.md": GOOD_REPORT})
    SEEN.clear()
    r = CliRunner().invoke(
        app, ["grade", str(results), "--judge", "scripted/py:tests.gates.test_docs_claims:flaky_then_fake"]
    )
    assert r.exit_code == 0, r.output
    rec = read_json(results / "grades" / "coverage" / f"{run.name}.json")
    asked = len(set(SEEN))
    assert rec["judge_calls"] == asked and len(SEEN) == 2 * asked  # every question took two HTTP attempts
    assert f"judge calls: {asked}" in r.output


def test_the_transcript_schema_lists_the_event_types_and_sources_the_writer_takes() -> None:
    """The transcript format's table and source list are the code's one list (`EventType`, `Source`):
    an event type or source added on one side only fails here."""
    from typing import get_args

    from benchctl.transcript import EventType, Source

    page = _page("formats/transcript.md")
    start = page.index("## Events")
    section = page[start : page.index("\n## ", start)]  # up to the next section
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| `")]
    types = {t for row in rows for t in re.findall(r"`([a-z_]+)`", row[1])}
    assert types == set(get_args(EventType))
    listed = re.search(r'"source": ([a-z_|]+),', " ".join(section.split()))
    assert listed is not None and listed.group(1).split("|") == list(get_args(Source))
    in_table = {s for row in rows for s in re.findall(r"[a-z_]+", row[2]) if s != "any"}
    assert in_table <= set(get_args(Source))
