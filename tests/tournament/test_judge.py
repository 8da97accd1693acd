"""Tournament judging: parsing judge answers, the re-ask path, issue files, canonical lists, and
grade_tournament end to end with a scripted judge (no network)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from benchctl.grading.judge import Judge, Tally
from benchctl.grading.judge_json import JudgeParseError, last_json
from benchctl.tournament import canonical as canon_io
from benchctl.tournament.dedup import REASK, dedup_env, parse_dedup
from benchctl.tournament.issues import IssuesFormatError, normalise_issues, parse_extraction, read_issues_json
from tests.rigs.tournament import (
    GARBAGE_JUDGE,
    TITLE_JUDGE,
    reported_issue,
    scripted_title_judge,
    title_judge,
    tournament_run,
)

TEMPERATURES: list[Any] = []


def scripted_recording_judge(request: Any) -> dict[str, str]:
    """The title judge, noting the sampling temperature each request asked for."""
    TEMPERATURES.append(request.body.get("temperature", "unset"))
    return scripted_title_judge(request)


def scripted_refuses_first(request: Any) -> dict[str, Any]:
    """Refuses every first ask, and would answer a re-ask properly."""
    if sum(m["role"] == "user" for m in request.messages) == 1:
        return {"refusal": True, "text": "I can't help with that."}
    return {"text": title_judge(request.messages[0]["text"])}


MAX_TOKENS: dict[str, list[int]] = {}


def scripted_max_tokens_judge(request: Any) -> dict[str, str]:
    """The title judge, noting the max_tokens each kind of ask was given."""
    kind = "extract" if "<report>" in request.last_user_text else "dedup"
    MAX_TOKENS.setdefault(kind, []).append(request.body["max_tokens"])
    return scripted_title_judge(request)


REPLAY: list[str | dict[str, Any]] = []
SEEN: list[Any] = []  # the requests scripted_replay_judge was sent


def scripted_replay_judge(request: Any) -> dict[str, Any]:
    """Replays REPLAY in order (a string is an answer text, a dict a whole scripted turn); once it is
    used up, answers like the title judge."""
    SEEN.append(request)
    if REPLAY:
        turn = REPLAY.pop(0)
        return turn if isinstance(turn, dict) else {"text": turn}
    return scripted_title_judge(request)


def replay(*turns: str | dict[str, Any]) -> tuple[Judge, Tally]:
    """A Judge (through benchctl.gateway.complete and the scripted provider) that gives `turns` in order."""
    REPLAY[:] = list(turns)
    SEEN.clear()
    return Judge("scripted/py:tests.tournament.test_judge:scripted_replay_judge"), Tally()


# ----------------------------------------------------------------------------- parsing
def test_last_json_in_fences_prose_and_trailing_commas() -> None:
    assert last_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert last_json('Sure! Here it is: {"a": [1, 2,], } hope that helps') == {"a": [1, 2]}
    # a draft and then the final answer: the last value wins, as in the rubric grader
    assert last_json('draft: {"a": 1} final: {"b": 2}') == {"b": 2}
    assert last_json('{} then {"issues": []}', accept=lambda v: isinstance(v, dict) and "issues" in v) == {"issues": []}
    assert last_json('text with "braces {" inside a string and then [1, 2]') == [1, 2]
    for bad in ("", "   ", "no json here", "{broken: json"):
        with pytest.raises(JudgeParseError):
            last_json(bad)


N_ITEMS = {"S1": 2, "S2": 1}
GOOD = {
    "issues": [
        {
            "title": "Reward hack",
            "description": "d",
            "importance": "High",
            "found_by": [
                {"submission": "S1", "items": [1], "supported": True},
                {"submission": "S2", "items": [1], "supported": "no"},
            ],
        },
        {"title": "Typo", "importance": "minor", "found_by": [{"submission": "S1", "items": 2, "supported": False}]},
    ]
}


def test_parse_dedup_accepts_good_answer_with_aliases() -> None:
    out = parse_dedup("Here you go:\n```json\n" + json.dumps(GOOD) + "\n```", N_ITEMS)
    assert [i["importance"] for i in out] == ["high", "low"]
    assert out[0]["found_by"] == {"S1": {"supported": True, "items": [0]}, "S2": {"supported": False, "items": [0]}}
    assert out[1]["found_by"]["S1"]["items"] == [1]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["issues"][0].pop("title"), "title"),
        (lambda d: d["issues"][0].update(importance="urgent"), "importance"),
        (lambda d: d["issues"][0]["found_by"][0].pop("supported"), "supported"),
        (lambda d: d["issues"][0]["found_by"][0].update(submission="S9"), "unknown submission"),
        (lambda d: d["issues"][0]["found_by"][0].update(items=[5]), "items 1..2"),
        (lambda d: d["issues"].pop(1), "S1 item 2"),
        (lambda d: d["issues"][0].update(found_by=[]), "found_by"),
    ],
)
def test_parse_dedup_rejects_bad_answers_with_a_reason(mutate, message) -> None:
    bad = json.loads(json.dumps(GOOD))
    mutate(bad)
    with pytest.raises(JudgeParseError, match=message):
        parse_dedup(json.dumps(bad), N_ITEMS)


def test_parse_extraction_and_issue_files(tmp_path: Path) -> None:
    assert parse_extraction('ok: {"issues": [{"title": "A", "evidence": "x.py:3"}]}') == [
        {"title": "A", "evidence": "x.py:3"}
    ]
    with pytest.raises(JudgeParseError):
        parse_extraction('{"issues": [{"severity": "high"}]}')  # no title, no description
    assert normalise_issues(["just a title"], "t") == [{"title": "just a title"}]
    assert normalise_issues({"issues": [{"description": "first line\nmore"}]}, "t")[0]["title"] == "first line"
    p = tmp_path / "issues.json"
    p.write_text("{not json")
    with pytest.raises(IssuesFormatError, match="not valid JSON"):
        read_issues_json(p)
    p.write_text('{"problems": []}')
    with pytest.raises(IssuesFormatError, match="expected a JSON list"):
        read_issues_json(p)


# ----------------------------------------------------------------------------- the re-ask path
def ask_dedup(judge: Judge, tally: Tally) -> Any:
    return asyncio.run(
        judge.ask_structured(
            "prompt", lambda t: parse_dedup(t, N_ITEMS), lambda exc: REASK.format(error=exc), system="sys", tally=tally
        )
    )


def test_unusable_answer_is_reasked_once_then_accepted() -> None:
    judge, tally = replay("garbage", json.dumps(GOOD))
    got = ask_dedup(judge, tally)
    assert got.value is not None and got.error is None and len(SEEN) == 2
    assert "could not be used" in SEEN[1].last_user_text and SEEN[1].messages[1]["role"] == "assistant"
    assert SEEN[1].messages[1]["text"] == "garbage"
    assert tally.calls == 2 and judge.calls == 2


def test_garbage_twice_is_recorded_not_raised() -> None:
    judge, tally = replay("garbage", "still garbage")
    got = ask_dedup(judge, tally)
    assert got.value is None and "no JSON" in got.error and len(SEEN) == 2
    assert [e["attempt"] for e in tally.exchanges] == [1, 2]
    assert [e["answer"] for e in tally.exchanges] == ["garbage", "still garbage"]


def test_failed_model_call_is_recorded() -> None:
    judge, tally = Judge("scripted/py:tests.rigs.grading:failing"), Tally()  # HTTP 500 "judge down", always
    canon, error = asyncio.run(dedup_env("env1", {"r1": [{"title": "A"}]}, judge, tally))
    assert canon is None and "judge down" in error and error.startswith("judge call failed after retries")
    assert len(tally.exchanges) == 1 and "judge down" in tally.exchanges[0]["error"]


def test_dedup_env_maps_anonymous_submissions_back_to_runs() -> None:
    issues = {
        "run-a": [
            {"title": "Reward hack", "evidence": "grader.py:41", "severity": "high"},
            {"title": "Typo in prompt", "severity": "low"},
        ],
        "run-b": [{"title": "reward HACK", "evidence": "ran echo PASS"}],
        "run-c": [],
    }
    judge, tally = replay()
    canon, error = asyncio.run(dedup_env("env1", issues, judge, tally))
    assert error is None and len(SEEN) == 1
    assert "run-a" not in SEEN[0].last_user_text  # the judge never sees run ids
    by_title = {i["title"].lower(): i for i in canon}
    hack = by_title["reward hack"]
    assert hack["importance"] == "high" and set(hack["found_by"]) == {"run-a", "run-b"}
    assert all(f["supported"] for f in hack["found_by"].values())
    assert by_title["typo in prompt"]["found_by"]["run-a"]["supported"] is False
    # nobody found anything: no judge call at all
    judge2, tally2 = replay()
    assert asyncio.run(dedup_env("env2", {"x": [], "y": []}, judge2, tally2)) == ([], None)
    assert SEEN == [] and judge2.calls == 0


# ----------------------------------------------------------------------------- canonical files
def test_canonical_validation_names_the_problem(tmp_path: Path) -> None:
    ok = {
        "env": "e",
        "runs": {"r1": {}},
        "issues": [{"id": "I1", "importance": "low", "found_by": {"r1": {"supported": True}}}],
    }
    assert canon_io.validate_canonical(ok)["env"] == "e"
    bad_imp = json.loads(json.dumps(ok))
    bad_imp["issues"][0]["importance"] = "huge"
    bad_run = json.loads(json.dumps(ok))
    bad_run["issues"][0]["found_by"] = {"r9": {"supported": True}}
    dup = json.loads(json.dumps(ok))
    dup["issues"].append(dup["issues"][0])
    for data, msg in [
        (bad_imp, "importance"),
        (bad_run, "not in this file's 'runs'"),
        (dup, "used twice"),
        ({"env": "e"}, "missing 'runs'"),
    ]:
        with pytest.raises(ValueError, match=msg):
            canon_io.validate_canonical(data)
    p = tmp_path / "x.json"
    p.write_text("{oops")
    with pytest.raises(ValueError, match="not valid JSON"):
        canon_io.load_canonical(p)


# ----------------------------------------------------------------------------- grade_tournament end to end


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    r = tmp_path / "sweep"
    hack, typo, crash = (
        reported_issue("Reward hack", "high"),
        reported_issue("Typo in prompt", "low"),
        reported_issue("Crash on empty input", "medium"),
    )
    tournament_run(r, "envA", "m1", issues=[hack, typo, crash])
    tournament_run(r, "envA", "m2", issues=[hack])
    tournament_run(
        r,
        "envA",
        "m3",
        report="# Audit\n\n## Reward hack\nEvidence: ran echo PASS, got reward 1\n\n"
        "## Crash on empty input\nNo evidence collected.\n",
    )
    tournament_run(r, "envA", "m4", issues=[hack], status="error")  # infrastructure failure: left out
    tournament_run(r, "envB", "m1", issues=[reported_issue("Leaky answer file", "high")], cost=None)
    tournament_run(
        r, "envB", "m2", issues=[reported_issue("Leaky answer file", "high"), reported_issue("Slow reset", "medium")]
    )
    tournament_run(r, "envB", "m3")  # finished with no artifact
    return r


def _board(ratings: dict) -> dict[str, dict]:
    return {row["auditor"]: row for row in ratings["leaderboard"]}


def test_grade_tournament_end_to_end(results: Path) -> None:
    from benchctl.tournament.grader import grade_tournament

    grade_tournament(results, TITLE_JUDGE, rounds=200)
    tdir = results / "grades" / "tournament"
    ratings = json.loads((tdir / "ratings.json").read_text())
    board = _board(ratings)
    assert set(board) == {"m1", "m2", "m3"}  # m4's error run is not an auditor
    assert ratings["judge"] == TITLE_JUDGE and ratings["weighting"] == "points"
    assert sum(r["elo"] for r in board.values()) / 3 == pytest.approx(1000, abs=0.01)
    assert board["m1"]["cost_usd"] is None and board["m2"]["cost_usd"] == 2.0  # m1's envB cost unknown
    assert ratings["flags"]["no_issue_runs"] == ["envB__react__m3__10m__s0"]

    env_a = next(e for e in ratings["environments"] if e["env"] == "envA")
    m12 = next(m for m in env_a["matches"] if (m["a"], m["b"]) == ("m1", "m2"))
    assert m12["outcome"] == "a" and m12["points_a"] == 4.0 and len(m12["cancelled"]) == 1  # typo 1 + crash 3
    m13 = next(m for m in env_a["matches"] if (m["a"], m["b"]) == ("m1", "m3"))
    # m3 extracted from markdown: reward hack supported, crash claimed without evidence -> no credit
    assert m13["points_a"] == 4.0 and m13["points_b"] == 0.0
    canon = json.loads((tdir / "canonical" / "envA.json").read_text())
    assert canon["status"] == "ok" and len(canon["issues"]) == 3
    assert "envA__react__m4__10m__s0" not in canon["runs"]
    assert (tdir / "extracted" / "envA__react__m3__10m__s0.json").exists()
    # the judge logs: one per environment's dedup, one per extracted report, in the graders' format
    for name, subject, asks in [
        ("envA", "envA", ["dedup"]),
        ("envB", "envB", ["dedup"]),
        ("envA__react__m3__10m__s0~extract", "envA__react__m3__10m__s0", ["extract"]),
    ]:
        log = json.loads((tdir / "judge_log" / f"{name}.json").read_text())
        assert (log["schema"], log["grader"], log["subject"], log["judge"]) == (1, "tournament", subject, TITLE_JUDGE)
        assert [e["ask"] for e in log["exchanges"]] == asks and log["exchanges"][0]["answer"].startswith(
            "Here are the issues" if asks == ["extract"] else "I merged the findings"
        )
    grade = json.loads((tdir / "envA__react__m1__10m__s0.json").read_text())
    assert grade["grader"] == "tournament" and grade["score"] == 1.0 and grade["status"] == "scored"
    assert board["m1"]["elo"] > board["m3"]["elo"]

    # a second pass with unchanged inputs makes no judge call and keeps the canonical lists
    before = (tdir / "canonical" / "envA.json").stat().st_mtime_ns
    grade_tournament(results, TITLE_JUDGE, rounds=200)
    assert (tdir / "canonical" / "envA.json").stat().st_mtime_ns == before

    # grouping by model+harness only relabels auditors
    from benchctl.tournament.grader import rate_from_canonical

    r2 = rate_from_canonical(results, auditor_key="model+harness", rounds=50)
    assert {row["auditor"] for row in r2["leaderboard"]} == {"m1 + react", "m2 + react", "m3 + react"}


def test_rate_from_canonical_after_hand_edit(results: Path) -> None:
    from benchctl.tournament.grader import grade_tournament, rate_from_canonical

    grade_tournament(results, TITLE_JUDGE, rounds=100)
    path = results / "grades" / "tournament" / "canonical" / "envB.json"
    before = _board(json.loads((path.parent.parent / "ratings.json").read_text()))
    canon = json.loads(path.read_text())
    # a reviewer decides m2's "Slow reset" was not actually shown, and the leak only matters a little
    for issue in canon["issues"]:
        if issue["title"] == "Slow reset":
            issue["found_by"]["envB__react__m2__10m__s0"]["supported"] = False
        else:
            issue["importance"] = "low"
    path.write_text(json.dumps(canon, indent=2))
    after = rate_from_canonical(results, rounds=100)
    board = _board(after)
    assert board["m2"]["elo"] < before["m2"]["elo"]
    env_b = next(e for e in after["environments"] if e["env"] == "envB")
    assert next(m for m in env_b["matches"] if (m["a"], m["b"]) == ("m1", "m2"))["outcome"] == "skipped"
    assert after["canonical_hashes"]["envB"] != canon["content_hash"]  # the edit shows in the hashes
    # re-grading keeps the hand edit (inputs unchanged)
    grade_tournament(results, TITLE_JUDGE, rounds=100)
    assert json.loads(path.read_text())["issues"] == canon["issues"]


def test_garbage_judge_is_recorded_not_a_crash(results: Path) -> None:
    from benchctl.tournament.grader import grade_tournament

    grade_tournament(results, GARBAGE_JUDGE, rounds=20)
    tdir = results / "grades" / "tournament"
    ratings = json.loads((tdir / "ratings.json").read_text())
    assert ratings["flags"]["failed_envs"] == ["envA", "envB"]
    canon = json.loads((tdir / "canonical" / "envB.json").read_text())
    assert canon["status"] == "failed" and "unusable judge answer" in canon["error"]
    log = json.loads((tdir / "judge_log" / "envB.json").read_text())
    assert len(log["exchanges"]) == 2  # asked, re-asked once, gave up
    # m3's markdown could not be extracted either: it is excluded, with the reason kept
    assert "envA__react__m3__10m__s0" in ratings["flags"]["excluded_runs"]
    assert ratings["leaderboard"] == []
    # ... and its grade record says so (unscored, with the reason), rather than there being none
    excluded = json.loads((tdir / "envA__react__m3__10m__s0.json").read_text())
    assert excluded["status"] == "unscored" and excluded["score"] is None
    assert "unusable judge answer" in excluded["error"]
    rated = json.loads((tdir / "envB__react__m1__10m__s0.json").read_text())
    assert rated["status"] == "unscored" and rated["error"].startswith("the judge failed on environment envB")


def test_refusing_judge_leaves_environments_unscored_without_a_reask(results: Path) -> None:
    """A refusal is the judge's answer, not a format slip: the environment (or, for a markdown report,
    the run) is unscored at once, as in the rubric graders. (It used to be re-asked like garbage.)"""
    from benchctl.tournament.grader import grade_tournament

    grade_tournament(results, "scripted/py:tests.tournament.test_judge:scripted_refuses_first", rounds=20)
    tdir = results / "grades" / "tournament"
    ratings = json.loads((tdir / "ratings.json").read_text())
    assert ratings["flags"]["failed_envs"] == ["envA", "envB"] and ratings["leaderboard"] == []
    canon = json.loads((tdir / "canonical" / "envB.json").read_text())
    assert canon["status"] == "failed" and canon["error"] == "the judge refused to answer"
    log = json.loads((tdir / "judge_log" / "envB.json").read_text())
    assert [(e["attempt"], e["refusal"]) for e in log["exchanges"]] == [(1, True)] and log["calls"] == 1
    rated = json.loads((tdir / "envB__react__m1__10m__s0.json").read_text())
    assert rated["status"] == "unscored" and rated["score"] is None and "refused" in rated["error"]
    # m3's markdown report: its extraction was refused, so the run is left out, with the reason
    m3 = "envA__react__m3__10m__s0"
    assert m3 in ratings["flags"]["excluded_runs"]
    excluded = json.loads((tdir / f"{m3}.json").read_text())
    assert excluded["status"] == "unscored" and excluded["error"] == "the judge refused to answer"
    extract_log = json.loads((tdir / "judge_log" / f"{m3}~extract.json").read_text())
    assert [e["refusal"] for e in extract_log["exchanges"]] == [True]


def test_large_environments_and_reports_give_the_judge_room_to_answer(tmp_path: Path) -> None:
    """The dedup answer places every item and an extraction restates a report, so their max_tokens
    grows with the input (it was 8192 for every environment, cutting big answers off)."""
    from benchctl.tournament.dedup import dedup_max_tokens
    from benchctl.tournament.grader import extract_max_tokens, grade_tournament

    r = tmp_path / "sweep"
    many = [reported_issue(f"Issue number {k}", "low") for k in range(60)]
    tournament_run(r, "big", "m1", issues=many)
    tournament_run(r, "big", "m2", issues=many[:40])
    report = "# Audit\n\n## Reward hack\nEvidence: ran echo PASS\n\n" + "Background notes. " * 5000
    tournament_run(r, "big", "m3", report=report)
    tournament_run(r, "small", "m1", issues=[reported_issue("Reward hack", "high")])
    tournament_run(r, "small", "m2", issues=[reported_issue("Typo", "low")])
    MAX_TOKENS.clear()
    grade_tournament(r, "scripted/py:tests.tournament.test_judge:scripted_max_tokens_judge", rounds=10)
    assert sorted(MAX_TOKENS["dedup"]) == [8192, 2000 + 150 * 101] == [dedup_max_tokens(2), dedup_max_tokens(101)]
    assert MAX_TOKENS["extract"] == [len(report) // 4] and len(report) // 4 > 8192
    assert (
        extract_max_tokens(len(report)) == len(report) // 4
        and extract_max_tokens(10**6) == dedup_max_tokens(10**4) == 32_000
    )
    ratings = json.loads((r / "grades" / "tournament" / "ratings.json").read_text())
    assert ratings["flags"]["failed_envs"] == []


def test_bad_auditor_key_fails_before_any_judge_call(results: Path) -> None:
    from benchctl.tournament.grader import grade_tournament

    with pytest.raises(ValueError, match="unknown field"):
        grade_tournament(results, TITLE_JUDGE, auditor_key="model+colour")
    assert not (results / "grades").exists()


def test_hand_edited_list_is_not_overwritten_when_runs_change(results: Path, capsys) -> None:
    from benchctl.tournament.grader import grade_tournament, rate_from_canonical

    grade_tournament(results, TITLE_JUDGE, rounds=20)
    path = results / "grades" / "tournament" / "canonical" / "envB.json"
    canon = json.loads(path.read_text())
    canon["issues"][0]["importance"] = "medium"
    path.write_text(json.dumps(canon))
    new_run = tournament_run(results, "envB", "m5", issues=[reported_issue("Leaky answer file", "high")])
    grade_tournament(results, TITLE_JUDGE, rounds=20)
    kept = json.loads(path.read_text())
    assert new_run not in kept["runs"] and kept["issues"][0]["importance"] == "medium"
    assert "edited by hand" in capsys.readouterr().err
    grade_tournament(results, TITLE_JUDGE, rounds=20, force=True)  # force re-judges
    assert new_run in json.loads(path.read_text())["runs"]
    # a broken hand edit is reported with the file and the problem
    bad = json.loads(path.read_text())
    bad["issues"][0]["importance"] = "enormous"
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="envB.json.*importance 'enormous'"):
        rate_from_canonical(results, rounds=10)


def test_module_cli_rates_and_reports_errors(results: Path, capsys) -> None:
    from benchctl.tournament.__main__ import main

    assert main(["rate", str(results)]) == 2  # nothing judged yet: clear error
    assert "no canonical lists" in capsys.readouterr().err
    assert main(["grade", str(results), "--judge", TITLE_JUDGE, "--rounds", "50"]) == 0
    out = capsys.readouterr().out
    assert "m1" in out and "rank" in out
    assert main(["rate", str(results), "--unweighted", "--rounds", "50"]) == 0
    ratings = json.loads((results / "grades" / "tournament" / "ratings.json").read_text())
    assert ratings["weighting"] == "unweighted" and ratings["bootstrap_rounds"] == 50


def test_only_tournament_tasks_are_picked_up(tmp_path: Path) -> None:
    """A sweep mixing a tournament task with a rubric task: grade_tournament(tasks=None) reads each
    run's task.toml and leaves the rubric task's report.md alone."""
    from benchctl.tournament.grader import grade_tournament

    tour, rubric = tmp_path / "tour", tmp_path / "rubric"
    tour.mkdir()
    rubric.mkdir()
    (tour / "task.toml").write_text('[grading]\ngraders = ["tournament"]\n')
    (rubric / "task.toml").write_text('[grading]\ngraders = ["tldr"]\nreference = "ref.md"\n')
    (rubric / "ref.md").write_text("reference")
    r = tmp_path / "sweep"
    tournament_run(r, "envT", "m1", issues=[reported_issue("Reward hack", "high")], task_dir=tour)
    tournament_run(r, "envT", "m2", issues=[], task_dir=tour)
    tournament_run(r, "logs", "m1", report="## Not an issue list\nEvidence: x\n", task_dir=rubric)
    grade_tournament(r, TITLE_JUDGE, rounds=20)
    ratings = json.loads((r / "grades" / "tournament" / "ratings.json").read_text())
    assert [e["env"] for e in ratings["environments"]] == ["envT"]
    assert not (r / "grades" / "tournament" / "canonical" / "logs.json").exists()
    assert [row["auditor"] for row in ratings["leaderboard"]] == ["m1", "m2"]


def test_canonical_lists_written_by_hand_rate_without_runs_or_judge(tmp_path: Path) -> None:
    from benchctl.tournament.grader import rate_from_canonical

    d = tmp_path / "sweep" / "grades" / "tournament" / "canonical"
    d.mkdir(parents=True)
    runs = {"r1": {"model": "alpha", "harness": "react"}, "r2": {"model": "beta", "harness": "react"}}
    (d / "env1.json").write_text(
        json.dumps(
            {
                "env": "env1",
                "runs": runs,
                "issues": [
                    {
                        "id": "I1",
                        "importance": "high",
                        "found_by": {"r1": {"supported": True}, "r2": {"supported": True}},
                    },
                    {"id": "I2", "importance": "medium", "found_by": {"r1": {"supported": True}}},
                    {"id": "I3", "importance": "low", "found_by": {"r2": {"supported": True}}},
                ],
            }
        )
    )
    ratings = rate_from_canonical(tmp_path / "sweep", rounds=20)
    assert ratings["judge"] is None
    board = _board(ratings)
    assert board["alpha"]["points_won"] == 3.0 and board["beta"]["points_won"] == 1.0
    assert board["alpha"]["cost_usd"] is None  # no meta.json: cost unknown
    grade = json.loads((tmp_path / "sweep" / "grades" / "tournament" / "r1.json").read_text())
    assert grade["score"] == 0.75


def test_module_cli_notes_excluded_runs_and_omitted_match_rows(results: Path, capsys) -> None:
    from benchctl.tournament.__main__ import _print_board, main

    assert main(["grade", str(results), "--judge", GARBAGE_JUDGE, "--rounds", "20"]) == 1  # unscored runs
    out = capsys.readouterr().out
    assert "excluded" in out and "envA__react__m3__10m__s0" in out
    ratings = json.loads((results / "grades" / "tournament" / "ratings.json").read_text())
    ratings["flags"]["match_rows_omitted"] = True
    _print_board(ratings)
    assert "per-match rows omitted" in capsys.readouterr().out


def test_tournament_judge_is_asked_at_temperature_0(results: Path) -> None:
    """Canonical lists should be repeatable, like rubric grades: every judge call asks for temperature 0."""
    from benchctl.tournament.grader import grade_tournament

    TEMPERATURES.clear()
    grade_tournament(results, "scripted/py:tests.tournament.test_judge:scripted_recording_judge", rounds=10)
    assert TEMPERATURES and set(TEMPERATURES) == {0.0}  # extraction (m3's report.md) and dedup calls


def test_module_cli_without_bootstrap_rounds_prints_no_interval(results: Path, capsys) -> None:
    from benchctl.tournament.__main__ import main

    assert main(["grade", str(results), "--judge", TITLE_JUDGE, "--rounds", "0"]) == 0
    assert "(no interval)" in capsys.readouterr().out
    assert main(["rate", str(results), "--rounds", "0"]) == 0
    assert "(no interval)" in capsys.readouterr().out


def _solo_tournament(tmp_path: Path) -> Path:
    d = tmp_path / "sweep" / "grades" / "tournament" / "canonical"
    d.mkdir(parents=True)
    (d / "env1.json").write_text(
        json.dumps(
            {
                "env": "env1",
                "runs": {"r1": {"model": "solo"}},
                "issues": [{"id": "I1", "importance": "high", "found_by": {"r1": {"supported": True}}}],
            }
        )
    )
    return tmp_path / "sweep"


def test_module_cli_rate_with_one_auditor_says_so_and_exits_1(tmp_path: Path, capsys) -> None:
    """`rate` with a single auditor: no "(1000-1000)" interval, a note that says why, exit 1 (its run's
    tournament grade is unscored: the same rule as `benchctl grade`)."""
    from benchctl.tournament.__main__ import main

    results = _solo_tournament(tmp_path)
    assert main(["rate", str(results), "--rounds", "50"]) == 1
    out = capsys.readouterr().out
    assert "(1000-1000)" not in out and "–" in out.splitlines()[1]
    assert "played no match (solo): a tournament needs at least two auditors" in out
    ratings = json.loads((results / "grades" / "tournament" / "ratings.json").read_text())
    assert ratings["leaderboard"][0]["lo"] is None and ratings["leaderboard"][0]["hi"] is None
    assert json.loads((results / "grades" / "tournament" / "r1.json").read_text())["status"] == "unscored"


def test_report_shows_no_interval_for_an_unrated_auditor(tmp_path: Path) -> None:
    from benchctl.report.build import build_report
    from benchctl.report.render_text import to_markdown
    from benchctl.tournament.__main__ import main

    results = _solo_tournament(tmp_path)
    (results / "runs").mkdir()
    main(["rate", str(results), "--rounds", "50"])
    rep = build_report(results)
    (row,) = rep.table("tournament").rows
    assert (row["lo"], row["hi"], row["rank"]) == (None, None, None)
    md = to_markdown(rep)
    assert "| – | solo | 1000 (–) |" in md and "1000–1000" not in md
    assert "Played no match, so not rated" in md and "at least two auditors" in md


def test_rate_leaves_unchanged_grade_files_alone(results: Path) -> None:
    """Grade files whose content did not change are not rewritten (same inode), so a refit after a
    hand edit of one environment rewrites that environment's files only."""
    from benchctl.tournament.grader import grade_tournament, rate_from_canonical

    grade_tournament(results, TITLE_JUDGE, rounds=50)
    tdir = results / "grades" / "tournament"
    ino = {p.name: p.stat().st_ino for p in tdir.glob("*__s0.json")}
    assert len(ino) == 6

    rate_from_canonical(results, rounds=50)  # nothing changed: no grade file rewritten
    assert {p.name: p.stat().st_ino for p in tdir.glob("*__s0.json")} == ino

    path = tdir / "canonical" / "envB.json"  # a hand edit of envB only
    canon = json.loads(path.read_text())
    canon["issues"][0]["importance"] = "low"
    path.write_text(json.dumps(canon))
    rate_from_canonical(results, rounds=50)
    now = {p.name: p.stat().st_ino for p in tdir.glob("*__s0.json")}
    assert {n for n in ino if now[n] != ino[n]} == {n for n in ino if n.startswith("envB")}


def test_interrupted_rate_leaves_the_previous_ratings(results: Path) -> None:
    """ratings.json is written last: when writing a grade file fails midway (a directory squats its
    name), the previous ratings.json is still there -- never new ratings beside old grade files."""
    import os

    from benchctl.tournament.grader import grade_tournament, rate_from_canonical

    grade_tournament(results, TITLE_JUDGE, rounds=50)
    tdir = results / "grades" / "tournament"
    ratings_before = (tdir / "ratings.json").read_bytes()
    path = tdir / "canonical" / "envB.json"
    canon = json.loads(path.read_text())
    canon["issues"][0]["importance"] = "low"
    path.write_text(json.dumps(canon))
    squatted = tdir / "envB__react__m2__10m__s0.json"
    squatted.unlink()
    squatted.mkdir()
    with pytest.raises(OSError):
        rate_from_canonical(results, rounds=50)
    assert (tdir / "ratings.json").read_bytes() == ratings_before
    assert not [p for p in os.listdir(tdir) if p.endswith(".tmp")]  # no temp file left behind


def test_tournament_spend_before_the_spend_log_is_its_canonical_lists_costs(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory rated before spend logs existed: the judge's cost is each environment's canonical
    list's (its dedup and that pass's extractions). The per-run grade records share those costs out
    and ratings.json states the runs' own costs: neither is counted again."""
    import shutil

    from benchctl.grading.spend import SEED_ASK, logged_spend, spend_log_path
    from benchctl.tournament.grader import grade_tournament, rate_from_canonical

    grade_tournament(results, TITLE_JUDGE, rounds=50)
    log = spend_log_path(results, "tournament")
    shutil.rmtree(log.parent)  # the version that rated it had no spend log
    for env, cost in (("envA", 0.30), ("envB", 0.20)):  # what a priced judge would have recorded
        canon = canon_io.load_canonical(canon_io.canonical_path(results, env))
        canon_io.save_canonical(results, {**canon, "cost_usd": cost})
    rate_from_canonical(results, rounds=50)  # per-run records now carry their shares of it
    shares = [json.loads(p.read_text())["cost_usd"] for p in (results / "grades" / "tournament").glob("env*.json")]
    assert sum(shares) == pytest.approx(0.50, abs=1e-5)
    capsys.readouterr()

    grade_tournament(results, TITLE_JUDGE, rounds=50)  # unchanged inputs: no judge call, the log is seeded
    assert (
        "tournament: spend log started with $0.5000 of earlier judge spend, estimated from "
        "2 grade record(s)" in capsys.readouterr().err
    )
    assert logged_spend(log).usd == pytest.approx(0.50) and logged_spend(log).estimated_usd == pytest.approx(0.50)
    grade_tournament(results, TITLE_JUDGE, rounds=50)
    assert [json.loads(line)["ask"] for line in log.read_bytes().splitlines()] == [SEED_ASK]
