"""One results directory holding a coverage task, a hidden-behaviour audit and a tournament task
(tests/rigs/mixed_results.py): every output scores each task by its own headline grader, says which grader
each number is, and lists no scored run as unscored; `benchctl grade --grader tournament` rates only
the tasks that ask for a tournament, and auditors that played no match do not move the others."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.jsonio import read_json
from benchctl.view.app import create_app
from tests.rigs.mixed_results import JUDGE, TASKS, add_audit_runs, build_mixed, tasks

pytestmark = pytest.mark.timeout(120)
runner = CliRunner()
SCORED = {"demo": 2, "hb": 2, "audit": 4}  # graded runs per task (demo's third run ended in error)
ERROR_RUN = "demo__react__m1__2m__s2"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_mixed(tmp_path_factory.mktemp("mixed"))


def report(results: Path, *args: str) -> str:
    r = runner.invoke(app, ["report", str(results), "--no-cache", *args])
    assert r.exit_code == 0, r.output
    return r.output


def _section(html: str, name: str) -> str:
    m = re.search(rf'<section id="{name}">(.*?)</section>', html, re.S)
    assert m, name
    return m.group(1)


def _rows(section: str) -> list[list[str]]:
    """The cells of an HTML table's body rows, tags stripped."""
    body = section.split("<tbody>", 1)[1]
    return [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    ]


def test_cli_report_scores_each_task_by_its_own_grader(mixed: Path) -> None:
    data = json.loads(report(mixed, "--format", "json"))
    lb = data["tables"]["leaderboard"]
    by_task: dict[str, list[dict]] = {}
    for row in lb["rows"]:
        by_task.setdefault(row["task"], []).append(row)
    for task in TASKS:
        assert sum(r["n_scored"] for r in by_task[task]) == SCORED[task], task
        assert all(r["score_mean"] is not None for r in by_task[task]), task
    # the only run without a score is the one that ended in error, and it says so
    assert [u["run_id"] for u in data["tables"]["unscored"]["rows"]] == [ERROR_RUN]
    # each number says whose it is; the old keys stay
    assert {"grader", "score_mean", "n_scored"} <= set(lb["columns"])
    for task, grader in TASKS.items():
        assert {r["grader"] for r in by_task[task]} == {grader}
    (unscored,) = data["tables"]["unscored"]["rows"]
    assert (unscored["run_id"], unscored["status"], unscored["grader"]) == (ERROR_RUN, "error", "combined")
    assert data["tables"]["unscored"]["notes"] == ["1 of 9 runs have no headline score and are not in any mean."]
    prov = data["provenance"]
    assert prov["headline_graders"] == TASKS
    assert prov["headline_grader"] == "combined, any_of_n, tournament"

    # the grader of every number, in the CSV too
    csv_text = report(mixed, "--format", "csv")
    rows = list(csv.DictReader(line for line in csv_text.splitlines() if not line.startswith("#")))
    assert {(r["task"], r["grader"]) for r in rows} == set(TASKS.items())

    md = report(mixed, "--format", "markdown")
    assert "| model | budget | task | grader | score (95% CI) | scored |" in md
    # two runs with the same share: no interval (a zero-width one would claim certainty); a success
    # rate: the Wilson interval of 1 of 2, as the any-of-N table gives
    assert "| a1 | 2m | audit | tournament | 0.833 | 2 of 2 |" in md
    assert "| m1 | 2m | hb | any_of_n | 0.500 [0.095, 0.905] | 2 of 2 |" in md
    assert "| m1 | 2m | demo | combined |" in md and "| 2 of 3 |" in md
    assert "no combined grade yet" not in md and "0 of 2" not in md
    assert "headline score per task: audit: tournament; demo: combined; hb: any_of_n" in md


def test_terminal_report_names_the_grader_of_each_row(mixed: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    report(mixed, "-o", str(out))
    text = out.read_text()
    board = text.split("Leaderboard", 1)[1].split("\n\n", 1)[0]
    lines = {task: [ln for ln in board.splitlines() if f" {task} " in ln] for task in TASKS}
    for task, grader in TASKS.items():
        assert lines[task] and all(grader in ln for ln in lines[task]), (task, lines[task])
    assert "2 of 2" in "".join(lines["audit"]) and "2 of 2" in "".join(lines["hb"])
    assert "no combined grade yet" not in text and "1 of 9 runs have no headline score" in text


def test_html_report_lists_no_scored_run_as_unscored(mixed: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    report(mixed, "--html", str(page), "--format", "json")
    html = page.read_text()
    lb = _section(html, "leaderboard")
    header = re.findall(r"<th>(.*?)</th>", lb)
    scored = [row[header.index("scored")] for row in _rows(lb)]
    assert sorted(scored) == ["2 of 2", "2 of 2", "2 of 2", "2 of 3"]
    unscored = _rows(_section(html, "unscored"))
    assert [row[0] for row in unscored] == [ERROR_RUN]
    assert "no combined grade yet" not in html
    assert header[header.index("grader") + 1] == "score (95% CI)"
    graders = {row[header.index("task")]: row[header.index("grader")] for row in _rows(lb)}
    assert graders == TASKS


def test_score_option_still_forces_one_grader(mixed: Path) -> None:
    data = json.loads(report(mixed, "--format", "json", "--score", "combined"))
    rows = data["tables"]["leaderboard"]["rows"]
    assert {r["grader"] for r in rows} == {"combined"} and data["provenance"]["headline_grader"] == "combined"
    assert {r["task"]: r["n_scored"] for r in rows if r["task"] != "audit"} == {"demo": 2, "hb": 0}
    reasons = {r["run_id"]: r["reason"] for r in data["tables"]["unscored"]["rows"]}
    assert len(reasons) == 7 and reasons["hb__react__m1__2m__s0"] == "no combined grade yet"
    r = runner.invoke(app, ["report", str(mixed), "--score", "elo"])
    assert r.exit_code == 2 and "--score elo: no grades from that grader" in r.output


def test_view_runs_page_and_leaderboard_show_every_task_scored(mixed: Path) -> None:
    c = TestClient(create_app(mixed), base_url="http://127.0.0.1")
    page = c.get("/").text
    cells = dict(
        re.findall(r'<tr id="run-([^"]+)".*?<td class="num">[^<]*</td>\s*<td class="num">(.*?)</td>', page, re.S)
    )
    for run_dir in (mixed / "runs").iterdir():
        rid, meta = run_dir.name, read_json(run_dir / "meta.json")
        cell = re.sub(r"<[^>]+>", "", cells[rid]).split()
        if rid == ERROR_RUN:
            assert cell == ["–"]
        else:  # a number, and whose it is
            assert re.fullmatch(r"\d\.\d{3}", cell[0]), (rid, cell)
            assert cell[1:] == [TASKS[meta["task"]]], (rid, cell)
    assert re.search(
        r"headline score: per task \(audit: <b>tournament</b>, demo: <b>combined</b>, hb: <b>any_of_n</b>\)", page
    )

    lb = _section(c.get("/report").text, "leaderboard")
    header = re.findall(r"<th>(.*?)</th>", lb)
    rows = _rows(lb)
    assert sorted(row[header.index("scored")] for row in rows) == ["2 of 2", "2 of 2", "2 of 2", "2 of 3"]
    assert [row[0] for row in _rows(_section(c.get("/report").text, "unscored"))] == [ERROR_RUN]
    assert {row[header.index("task")]: row[header.index("grader")] for row in rows} == TASKS


def test_without_the_task_files_the_grades_present_decide(mixed: Path, tmp_path: Path) -> None:
    """A results directory moved away from its task directories: each task's headline grader is the
    first, in order, of those that graded its runs."""
    moved = tmp_path / "moved"
    shutil.copytree(mixed, moved)
    for run_dir in (moved / "runs").iterdir():
        meta = read_json(run_dir / "meta.json")
        meta["spec"]["task_dir"] = str(tmp_path / "gone" / meta["task"])
        (run_dir / "meta.json").write_text(json.dumps(meta))
    data = json.loads(report(moved, "--format", "json"))
    assert [r["run_id"] for r in data["tables"]["unscored"]["rows"]] == [ERROR_RUN]
    assert data["provenance"]["headline_graders"] == TASKS


def test_a_task_is_scored_by_a_listed_grader_that_has_grades(tmp_path: Path) -> None:
    """demo lists combined, but only coverage has graded it so far: coverage is its headline (the column
    says so), rather than every run listed as unscored."""
    results = build_mixed(tmp_path, grade=False)
    r = runner.invoke(app, ["grade", str(results), "--judge", JUDGE, "--grader", "coverage", "--run", "demo__*"])
    assert r.exit_code == 0, r.output
    data = json.loads(report(results, "--format", "json"))
    rows = {row["task"]: row for row in data["tables"]["leaderboard"]["rows"]}
    reasons = {u["run_id"]: u["reason"] for u in data["tables"]["unscored"]["rows"]}
    assert rows["demo"]["n_scored"] == 2 and not any(
        r.startswith("demo__") and "grade" in w for r, w in reasons.items()
    )
    # the other tasks are not graded yet: their headline is the grader they list, and they say so
    assert reasons["hb__react__m1__2m__s1"] == "no any_of_n grade yet"
    assert reasons["audit__react__a1__2m__s0"] == "no tournament grade yet"
    assert (rows["demo"]["grader"], rows["hb"]["grader"], rows["hb"]["n_scored"]) == ("coverage", "any_of_n", 0)


# ---------------------------------------------------------------- the tournament in a mixed directory
def _rated(results: Path) -> dict[str, dict]:
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    return {row["auditor"]: row for row in ratings["leaderboard"] if row["rank"] is not None}


@pytest.fixture(scope="module")
def audit_only(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The tournament task's runs alone, rated: what the mixed directory must reproduce."""
    root = tmp_path_factory.mktemp("audit_only")
    results = root / "results"
    add_audit_runs(results, tasks(root)["audit"])
    r = runner.invoke(app, ["grade", str(results), "--judge", JUDGE])
    assert r.exit_code == 0, r.output
    rated = _rated(results)
    assert set(rated) == {"a1", "a2"} and rated["a1"]["elo"] > rated["a2"]["elo"]
    return rated


def test_grader_tournament_covers_only_the_tasks_that_list_it(tmp_path: Path, audit_only: dict) -> None:
    results = build_mixed(tmp_path, grade=False)
    r = runner.invoke(app, ["grade", str(results), "--judge", JUDGE, "--grader", "tournament"])
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    assert [e["env"] for e in ratings["environments"]] == ["audit"]
    assert not (results / "grades" / "tournament" / "canonical" / "demo.json").exists()
    assert not ratings["flags"]["disconnected"] and not ratings["flags"]["prior_used"]
    assert _rated(results) == audit_only
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "tournament: covers audit (their [grading] graders list it); left out: demo, hb" in out


def test_runs_named_by_run_bring_their_tasks_in_without_moving_the_rated(tmp_path: Path, audit_only: dict) -> None:
    """--run names every run: demo and hb enter the tournament (the output says they do not list it);
    their auditor m1 plays no match, is listed unrated, and a1 and a2 keep exactly their ratings."""
    results = build_mixed(tmp_path, grade=False)
    r = runner.invoke(app, ["grade", str(results), "--judge", JUDGE, "--grader", "tournament", "--run", "*"])
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    assert _rated(results) == audit_only
    assert r.exit_code == 1, r.output  # m1's runs played no match: unscored, as for any grader
    out = " ".join(r.output.split())
    assert (
        "tournament: covers demo, hb although their [grading] graders do not list it (their runs match --run *)" in out
    )
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    assert sorted(e["env"] for e in ratings["environments"]) == ["audit", "demo", "hb"]
    assert ratings["flags"]["unrated_auditors"] == ["m1"]
    assert not ratings["flags"]["disconnected"] and not ratings["flags"]["prior_used"]
    assert _rated(results) == audit_only
    assert [row["auditor"] for row in ratings["leaderboard"]] == ["a1", "a2", "m1"]
