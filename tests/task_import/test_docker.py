"""Imported tasks in real runs: task images built FROM benchctl-sandbox:latest, run_task_tests in a
second network-less sandbox (ReAct natively, Claude Code over MCP), the static audit without an
image, --allow-changed, and a tournament over imported environments with scripted auditors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.executors.run_body import docker_sandbox
from benchctl.jsonio import read_json, read_jsonl
from benchctl.task_import.images import TAG_PREFIX, probe
from benchctl.task_import.open_book import TaskTestsTool, load_config
from benchctl.tasks import load_task
from benchctl.transcript import TranscriptWriter
from tests.rigs import task_import as rig
from tests.rigs.run import cli, containers_with_label, run_inprocess, runs
from tests.rigs.tournament import TITLE_JUDGE

pytestmark = pytest.mark.docker
runner = CliRunner()
OPEN_BOOK = "scripted/py:tests.rigs.task_import:open_book_auditor"
STATIC = "scripted/py:tests.rigs.task_import:static_auditor"


@pytest.fixture(scope="module")
def built(tmp_path_factory, docker_engine) -> dict[str, object]:
    """The test repository imported once with its task images built; the images are removed at the end."""
    root = tmp_path_factory.mktemp("import")
    repo, first = rig.make_repo(root)
    r = runner.invoke(
        app, ["tasks", "import", "harbor", str(repo), "-o", str(root / "audit"), "--ref", first, "--build-images"]
    )
    assert r.exit_code == 0, r.output
    tags = [load_task(root / "audit" / n).pin.image for n in ("shipped-answer", "word-count")]
    yield {"root": root, "repo": repo, "first": first, "audit": root / "audit"}
    for tag in tags:
        try:
            docker_engine.images.remove(tag, noprune=False)
        except Exception:
            pass  # still used by a container another test left: `benchctl cleanup` finds those


def tool_result(transcript: list[dict], n: int) -> str:
    return [e["output"] for e in transcript if e["type"] == "tool_result" and "run_task_tests" in e["name"]][n]


def test_task_image_is_built_and_pinned(built) -> None:
    task = load_task(built["audit"] / "shipped-answer")
    p = probe(task.pin.image)
    assert task.pin.image.startswith(TAG_PREFIX + "shipped-answer:") and p.digest == task.pin.image_digest
    assert p.workdir == "/app"
    assert f"present locally ({p.digest})" in task.instructions


def test_run_task_tests_in_a_second_sandbox(built, tmp_path) -> None:
    """The tool itself: a fresh container per call from the task image (no tini in it: Docker's init),
    network none, tests copied only after the setup ran, the verifier's literal env passed, reward read."""
    task = load_task(built["audit"] / "shipped-answer")
    cfg = load_config(task.task_file)
    events = tmp_path / "t.jsonl"
    tool = TaskTestsTool(
        cfg, task.data_dir, "tool-test", probe(cfg.image).workdir, docker_sandbox, TranscriptWriter(events)
    )
    probe_net = (
        "python3 -c \"import socket\ntry:\n socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
        " print('NET-OK')\nexcept OSError:\n print('NET-FAIL')\""
    )
    setup = (
        f"{probe_net}; echo PWD=$(pwd); test -e /usr/bin/tini || echo NO-TINI; test -e /tests || echo NO-TESTS; "
        "echo EXPECTED=$EXPECTED_FILE; echo USER=$(id -un)"
    )
    out = tool.call("run_task_tests", {"setup": setup}, timeout=120)
    assert not out.is_error, out.text
    assert "NET-FAIL" in out.text and "NET-OK" not in out.text
    assert "PWD=/app\n" in out.text and "USER=root" in out.text  # the image's WORKDIR, the agent user
    assert "NO-TINI" in out.text  # an image without tini: Docker's init is PID 1
    assert "NO-TESTS" in out.text  # tests arrive only after the agent's part, as in Harbor
    assert "EXPECTED=\n" in out.text  # the verifier's env is not the agent's ...
    assert "== tests/test.sh: exit 0" in out.text and "== reward (/logs/verifier/reward.txt) ==\n0" in out.text
    sol = tool.call("run_task_tests", {"run_solution": True}, timeout=120)
    # ... but test.sh gets it: it reads $EXPECTED_FILE, so the oracle's reward 1 needs it
    assert "== solution/solve.sh: exit 0" in sol.text and "reward.txt) ==\n1" in sol.text
    tiny = tool.call("run_task_tests", {"setup": "sleep 30"}, timeout=3)  # the run's time caps every step
    assert "== your setup: timed out" in tiny.text
    bad = tool.call("run_task_tests", {"setup": 3})
    assert bad.is_error and "`setup` (a string)" in bad.text
    assert [r["reward"] for r in tool.summary()["results"]] == ["0", "1", None]
    assert not containers_with_label("benchctl.run_id", "tool-test__tests-1")
    calls = [e for e in read_jsonl(events) if e.get("kind") == "task_tests_call"]
    assert [c["reward"] for c in calls] == ["0", "1", None]


def test_open_book_audit_with_react(built, tmp_path) -> None:
    out = tmp_path / "res"
    assert run_inprocess(built["audit"] / "shipped-answer", OPEN_BOOK, out, budget="2m") == 0
    (run,) = runs(out)
    meta, transcript = read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl")
    assert meta["status"] == "completed", meta["error"]
    pin = meta["pin"]
    assert (pin["commit"], pin["verified"], pin["format"], pin["path"]) == (
        built["first"],
        True,
        "harbor",
        "tasks/shipped-answer",
    )
    tt = meta["task_tests"]
    assert tt["available"] and tt["image_digest"] == pin["image_digest"] and tt["image_matches_pin"]
    assert [(r["run_solution"], r["setup"], r["reward"]) for r in tt["results"]] == [
        (True, False, "1"),
        (False, True, "1"),
    ]
    assert "== solution/solve.sh: exit 0" in tool_result(transcript, 0)
    assert "== your setup: exit 0" in tool_result(transcript, 1) and "reward.txt) ==\n1" in tool_result(transcript, 1)
    ev = [e for e in transcript if e.get("kind") == "task_tests"]
    assert ev and ev[0]["available"] is True and ev[0]["tool"] == "run_task_tests"
    issues = json.loads((run / "artifacts" / "issues.json").read_text())
    assert issues[0]["title"] == "Answer key ships in the agent's image"
    assert not [c for c in containers_with_label("benchctl.run_id") if c.labels["benchctl.run_id"].startswith(run.name)]


def test_static_audit_without_the_image_and_allow_changed(built, tmp_path) -> None:
    src = tmp_path / "src"  # word-count with one byte changed: its image tag differs, and it is never built
    rig.write_files(src, {k: v + ("\n" if k == "environment/text.txt" else "") for k, v in rig.WORD_COUNT.items()})
    task_dir = tmp_path / "wc"
    r = runner.invoke(app, ["tasks", "import", "harbor", str(src), "-o", str(task_dir)])  # not built
    assert r.exit_code == 0 and "static audit" in r.output
    (task_dir / "data" / "tests" / "expected.txt").write_text("6\n")
    p = cli(
        "run",
        str(task_dir),
        "--model",
        OPEN_BOOK,
        "--budget",
        "1m",
        "--out",
        str(tmp_path / "res"),
        "--progress",
        "quiet",
        "--allow-changed",
    )
    assert p.returncode == 0, p.stderr
    assert "running with files that differ from their pin (changed: tests/expected.txt)" in p.stderr
    (run,) = runs(tmp_path / "res")
    meta, transcript = read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl")
    assert meta["pin"]["verified"] is False and meta["pin"]["changed"] == ["tests/expected.txt"]
    tt = meta["task_tests"]
    assert tt["available"] is False and "is not present locally" in tt["reason"] and tt["calls"] == 0
    ev = [e for e in transcript if e.get("kind") == "task_tests"]
    assert ev[0]["available"] is False and ev[0]["tool"] is None and "static audit" in ev[0]["reason"]
    # the auditor was not offered the tool, so it audited statically
    assert not [e for e in transcript if e["type"] == "tool_call" and e["name"] == "run_task_tests"]
    assert "Answer key" not in (run / "artifacts" / "issues.json").read_text()


def test_tournament_over_imported_environments(built, tmp_path) -> None:
    """From "a directory of Harbor tasks" (and an Inspect task) to an Elo leaderboard, as docs/importing.md
    describes: import, one `benchctl run` per environment into one results directory, grade, rate."""
    audit, repo = built["audit"], built["repo"]
    r = runner.invoke(
        app,
        [
            "tasks",
            "import",
            "inspect",
            str(repo / "inspect" / "arith"),
            "-o",
            str(audit / "arith"),
            "--ref",
            built["first"],
        ],
    )
    assert r.exit_code == 0, r.output
    results = tmp_path / "results"
    for env in ("shipped-answer", "word-count", "arith"):
        p = cli(
            "run",
            str(audit / env),
            "--model",
            OPEN_BOOK,
            "--model",
            STATIC,
            "--budget",
            "2m",
            "--out",
            str(results),
            "--progress",
            "quiet",
            "--concurrency",
            "2",
        )
        assert p.returncode == 0, p.stderr
    metas = [read_json(run / "meta.json") for run in runs(results)]
    assert len(metas) == 6 and {m["status"] for m in metas} == {"completed"}
    assert all(m["pin"]["verified"] and m["pin"]["commit"] == built["first"] for m in metas)
    g = runner.invoke(app, ["grade", str(results), "--judge", TITLE_JUDGE])
    # Both auditors report the same single issue in word-count: shared issues cancel, nothing is left
    # to play for, so those two runs have no score -- and, like any unscored grade, that exits 1.
    assert g.exit_code == 1, g.output
    assert "2 run(s) played no match" in g.output and g.output.count("word-count__react__") == 2
    ratings = read_json(results / "grades" / "tournament" / "ratings.json")
    board = {row["auditor"]: row for row in ratings["leaderboard"]}
    assert set(board) == {OPEN_BOOK, STATIC}
    assert board[OPEN_BOOK]["elo"] > board[STATIC]["elo"]
    canon = read_json(results / "grades" / "tournament" / "canonical" / "shipped-answer.json")
    high = [i for i in canon["issues"] if i["importance"] == "high"]
    assert [i["title"] for i in high] == ["Answer key ships in the agent's image"]
    arith = read_json(results / "grades" / "tournament" / "canonical" / "arith.json")
    assert "Scorer accepts any answer containing the target" in [i["title"] for i in arith["issues"]]
    rep = runner.invoke(app, ["report", str(results), "--format", "json", "--table", "tournament"])
    assert rep.exit_code == 0, rep.output
    assert OPEN_BOOK in rep.output and STATIC in rep.output


@pytest.mark.cli_binaries
def test_claude_code_reaches_run_task_tests_over_mcp(built, tmp_path) -> None:
    from harnesses.claude_code.harness import ClaudeCodeHarness
    from tests.rigs.cli_harness import need_binary

    need_binary(ClaudeCodeHarness({}))
    out = tmp_path / "res"
    code = run_inprocess(built["audit"] / "shipped-answer", OPEN_BOOK, out, budget="3m", harnesses=["claude-code"])
    (run,) = runs(out)
    meta, transcript = read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl")
    assert code == 0 and meta["status"] == "completed", meta.get("error")
    calls = [e["name"] for e in transcript if e["type"] == "tool_call"]
    assert calls.count("mcp__target__run_task_tests") == 2, calls
    assert [r["reward"] for r in meta["task_tests"]["results"]] == ["1", "1"]
    issues = json.loads((run / "artifacts" / "issues.json").read_text())
    assert issues[0]["title"] == "Answer key ships in the agent's image"
