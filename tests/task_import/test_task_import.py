"""`benchctl tasks import` without Docker: Harbor and Inspect packages (tests/rigs/task_import.py)
imported from a local git repository at a given commit, the generated task and its pin,
idempotent re-import, and `benchctl run` refusing a task whose files left their pin."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.grading.graders import load_grading
from benchctl.task_import.pin import file_digests
from benchctl.tasks import TaskError, load_task
from tests.rigs import task_import as rig
from tests.rigs.run import cli

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root: bytes and mtime (so 'unchanged' really means untouched)."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, str]:
    return rig.make_repo(tmp_path)


# ---------------------------------------------------------------- Harbor


def test_harbor_suite_from_git_at_a_ref(tmp_path: Path, upstream) -> None:
    repo, first = upstream
    second = rig.commit_change(repo, "tasks/word-count/tests/expected.txt", "6\n")
    out = tmp_path / "audit"
    r = invoke("tasks", "import", "harbor", repo, "-o", out, "--ref", first)
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["shipped-answer", "word-count"]  # one task per environment
    # the files are the first commit's, and the working tree was not touched
    assert (out / "word-count" / "data" / "tests" / "expected.txt").read_text() == "5\n"
    assert rig.git(repo, "status", "--porcelain") == "" and rig.git(repo, "rev-parse", "HEAD") == second

    task = load_task(out / "shipped-answer")
    pin = task.pin
    assert (pin.format, pin.source, pin.path, pin.commit, pin.ref, pin.dirty) == (
        "harbor",
        str(repo),
        "tasks/shipped-answer",
        first,
        first,
        False,
    )
    assert pin.image_from == "dockerfile" and pin.image.startswith("benchctl-task-shipped-answer:")
    assert pin.image_digest is None  # not built: nothing to pin but the name
    assert pin.files == file_digests(task.data_dir)
    assert set(pin.files) == set(rig.SHIPPED_ANSWER)  # the whole Harbor task, as packaged
    # an ordinary benchctl audit task: issues.json, graded by the tournament
    assert task.artifacts == ["issues.json"] and task.budgets == ["30m"]
    assert load_grading(task.task_dir).graders == ["tournament"]
    assert f"commit: {first}" in task.instructions and "/data/tests/" in task.instructions
    assert "/data/environment/expected_answer.txt" in task.instructions  # the file listing
    raw = tomllib.loads(task.task_file.read_text())
    tt = raw["task_tests"]
    assert (tt["timeout"], tt["user"], tt["agent_user"], tt["solution"]) == (60.0, "root", "root", "solution")
    # literal verifier env is kept; a value Harbor fills from the host (${HOST_TOKEN}) is not
    assert tt["env"] == {"EXPECTED_FILE": "/app/expected_answer.txt"}
    assert "HOST_TOKEN" in r.output  # ... and the import says so

    r = invoke("tasks", "import", "harbor", repo, "-o", tmp_path / "head")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "head" / "word-count" / "data" / "tests" / "expected.txt").read_text() == "6\n"
    assert load_task(tmp_path / "head" / "word-count").pin.commit == second


def test_single_task_and_name(tmp_path: Path, upstream) -> None:
    repo, first = upstream
    out = tmp_path / "one"
    r = invoke("tasks", "import", "harbor", repo / "tasks" / "word-count", "-o", out, "--name", "wc")
    assert r.exit_code == 0, r.output
    task = load_task(out)  # a single task is written to -o itself
    assert task.name == "wc" and task.pin.path == "tasks/word-count" and task.pin.commit == first
    # --only picks from a suite; --name with several tasks is refused
    r = invoke("tasks", "import", "harbor", repo, "-o", tmp_path / "only", "--only", "word-count")
    assert r.exit_code == 0 and [p.name for p in (tmp_path / "only").iterdir()] == ["word-count"]
    r = invoke("tasks", "import", "harbor", repo, "-o", tmp_path / "x", "--name", "n")
    assert r.exit_code == 2 and "--name renames one task" in r.output


def test_reimport_is_idempotent_and_updates_only_what_it_owns(tmp_path: Path, upstream) -> None:
    repo, _ = upstream
    out = tmp_path / "audit"
    assert invoke("tasks", "import", "harbor", repo, "-o", out).exit_code == 0
    (out / "word-count" / "NOTES.md").write_text("my notes")
    before = tree(out)
    r = invoke("tasks", "import", "harbor", repo, "-o", out)
    assert r.exit_code == 0 and r.output.count("unchanged") == 2, r.output
    assert tree(out) == before  # same bytes, files not even rewritten
    old_hash = load_task(out / "shipped-answer").pin.content_hash
    second = rig.commit_change(repo, "tasks/word-count/instruction.md", "Count the words.\n")
    r = invoke("tasks", "import", "harbor", repo, "-o", out)
    assert r.output.count("updated   ") == 2, r.output  # both are pinned to the new commit ...
    assert (out / "word-count" / "data" / "instruction.md").read_text() == "Count the words.\n"
    assert (out / "word-count" / "NOTES.md").read_text() == "my notes"  # not the import's
    shipped = load_task(out / "shipped-answer").pin
    assert shipped.commit == second and shipped.content_hash == old_hash  # ... one with the same files


def test_dirty_working_tree_is_recorded(tmp_path: Path, upstream) -> None:
    repo, first = upstream
    (repo / "tasks" / "word-count" / "tests" / "extra.txt").write_text("untracked\n")
    r = invoke("tasks", "import", "harbor", repo / "tasks" / "word-count", "-o", tmp_path / "wc")
    assert r.exit_code == 0, r.output
    pin = load_task(tmp_path / "wc").pin
    assert pin.commit == first and pin.dirty and "tests/extra.txt" in pin.files
    assert "(dirty)" in r.output


def test_a_changed_file_breaks_the_pin(tmp_path: Path, upstream) -> None:
    repo, _ = upstream
    out = tmp_path / "wc"
    assert invoke("tasks", "import", "harbor", repo / "tasks" / "word-count", "-o", out).exit_code == 0
    assert invoke("tasks", "verify", out).exit_code == 0
    data = out / "data"
    (data / "tests" / "expected.txt").write_text("4\n")
    (data / "tests" / "new.sh").write_text("echo\n")
    (data / "solution" / "solve.sh").unlink()
    r = invoke("tasks", "verify", out)
    assert r.exit_code == 1
    assert "changed: tests/expected.txt; added: tests/new.sh; removed: solution/solve.sh" in r.output
    # benchctl run refuses before anything starts (exit 2, the files named), unless --allow-changed
    p = cli(
        "run",
        str(out),
        "--model",
        "scripted/configs/demo/investigator.json",
        "--budget",
        "1m",
        "--out",
        str(tmp_path / "res"),
    )
    assert p.returncode == 2, p.stderr
    assert (
        "no longer match their pin" in p.stderr and "tests/expected.txt" in p.stderr and "--allow-changed" in p.stderr
    )
    assert not (tmp_path / "res").exists()
    # editing the per-file table to hide the change is caught by the content hash
    text = (out / "task.toml").read_text()
    from benchctl.task_import.pin import file_digests as digests

    now = digests(data)
    raw = tomllib.loads(text)
    raw["pin"]["files"] = now
    import tomli_w

    (out / "task.toml").write_text(tomli_w.dumps(raw))
    r = invoke("tasks", "verify", out)
    assert r.exit_code == 1 and "the [pin] table was edited" in r.output


def test_existing_directory_that_is_not_an_import_is_refused(tmp_path: Path, upstream) -> None:
    repo, _ = upstream
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "task.toml").write_text('instructions = "x"\n')
    r = invoke("tasks", "import", "harbor", repo / "tasks" / "word-count", "-o", mine)
    assert r.exit_code == 2 and "is not a task made by `benchctl tasks import`" in r.output
    assert (mine / "task.toml").read_text() == 'instructions = "x"\n'


@pytest.mark.parametrize(
    "args,message",
    [
        (["--ref", "no-such-ref"], "--ref 'no-such-ref': no such commit"),
        (["--only", "nope"], "--only nope: no such task"),
        (["--budget", "soon"], "--budget"),
        (["--with-inspect"], "applies to Inspect tasks only"),
    ],
)
def test_bad_arguments_exit_2_with_the_fix(tmp_path: Path, upstream, args, message) -> None:
    repo, _ = upstream
    r = invoke("tasks", "import", "harbor", repo, "-o", tmp_path / "o", *args)
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "o").exists()


def test_no_task_and_not_a_repo(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    r = invoke("tasks", "import", "harbor", tmp_path / "empty", "-o", tmp_path / "o")
    assert r.exit_code == 2 and "no Harbor task found" in r.output
    r = invoke("tasks", "import", "harbor", tmp_path / "empty", "-o", tmp_path / "o", "--ref", "HEAD")
    assert r.exit_code == 2 and "not inside a git repository" in r.output


def test_a_repository_url_is_cloned_at_the_ref(tmp_path: Path, upstream) -> None:
    repo, first = upstream
    rig.commit_change(repo, "tasks/word-count/tests/expected.txt", "7\n")
    url = f"file://{repo}"
    r = invoke("tasks", "import", "harbor", url, "-o", tmp_path / "o", "--ref", first, "--only", "word-count")
    assert r.exit_code == 0, r.output
    pin = load_task(tmp_path / "o" / "word-count").pin
    assert (pin.source, pin.commit, pin.path) == (url, first, "tasks/word-count")
    assert (tmp_path / "o" / "word-count" / "data" / "tests" / "expected.txt").read_text() == "5\n"


def test_harbor_image_declarations(tmp_path: Path) -> None:
    prebuilt = tmp_path / "src" / "prebuilt"
    rig.write_files(
        prebuilt,
        {
            "task.toml": '[environment]\ndocker_image = "example.org/team/img:1"\n',
            "instruction.md": "do it\n",
            "tests/test.sh": "exit 0\n",
        },
    )
    compose = tmp_path / "src" / "compose"
    rig.write_files(
        compose, {"task.toml": "", "instruction.md": "do it\n", "environment/docker-compose.yaml": "services: {}\n"}
    )
    r = invoke("tasks", "import", "harbor", tmp_path / "src", "-o", tmp_path / "o")
    assert r.exit_code == 0, r.output
    p = load_task(tmp_path / "o" / "prebuilt").pin
    assert (p.image, p.image_from, p.commit, p.source) == (
        "example.org/team/img:1",
        "docker_image",
        None,
        str(tmp_path / "src"),
    )
    assert (
        tomllib.loads((tmp_path / "o" / "prebuilt" / "task.toml").read_text())["task_tests"]["image"]
        == "example.org/team/img:1"
    )
    c = load_task(tmp_path / "o" / "compose")
    assert (c.pin.image, c.pin.image_from) == (None, "compose")
    assert "task_tests" not in tomllib.loads(c.task_file.read_text())  # no tests/test.sh
    assert "not built by benchctl" in r.output and "no tests/test.sh" in r.output


def test_template_override_and_unknown_placeholder(tmp_path: Path, upstream) -> None:
    repo, first = upstream
    tpl = tmp_path / "audit.md"
    tpl.write_text("Audit {{name}} at {{commit}}; image {{image}}.\n")
    out = tmp_path / "o"
    r = invoke("tasks", "import", "harbor", repo / "tasks" / "word-count", "-o", out, "--template", tpl)
    assert r.exit_code == 0, r.output
    assert (
        (out / "instructions.md")
        .read_text()
        .startswith(f"Audit word-count at {first}; image benchctl-task-word-count:")
    )
    tpl.write_text("{{nme}}\n")
    r = invoke("tasks", "import", "harbor", repo / "tasks" / "word-count", "-o", tmp_path / "o2", "--template", tpl)
    assert r.exit_code == 2 and "{{nme}}" in r.output and "files" in r.output  # names what is available
    assert not (tmp_path / "o2").exists()


def test_malformed_pin_is_a_task_error(tmp_path: Path, upstream) -> None:
    repo, _ = upstream
    out = tmp_path / "o"
    invoke("tasks", "import", "harbor", repo / "tasks" / "word-count", "-o", out)
    text = (out / "task.toml").read_text()
    (out / "task.toml").write_text(text.replace('format = "harbor"', 'format = "gym"'))
    with pytest.raises(TaskError, match=r"key `pin.format`: 'gym' is not a known format"):
        load_task(out)
    (out / "task.toml").write_text(text.replace("timeout = 30.0", 'timeout = "soon"'))
    p = cli("run", str(out), "--model", "scripted/configs/demo/investigator.json", "--out", str(tmp_path / "r"))
    assert p.returncode == 2 and "task_tests.timeout" in p.stderr


# ---------------------------------------------------------------- Inspect


def test_inspect_task_from_git_at_a_commit_static(tmp_path: Path, upstream) -> None:
    repo, first = upstream
    rig.commit_change(repo, "inspect/arith/arith.jsonl", rig.ARITH_JSONL.replace('"15"', '"16"'))
    out = tmp_path / "arith"
    r = invoke("tasks", "import", "inspect", repo / "inspect" / "arith" / "arith.py", "-o", out, "--ref", first)
    assert r.exit_code == 0, r.output
    task = load_task(out)
    assert (task.name, task.pin.format, task.pin.commit, task.pin.path) == (
        "arith",
        "inspect",
        first,
        "inspect/arith/arith.py",
    )
    assert sorted(task.pin.files) == ["samples.jsonl", "samples.md", "source/arith.jsonl", "source/arith.py"]
    samples = [json.loads(line) for line in (out / "data" / "samples.jsonl").read_text().splitlines()]
    # the FieldSpec mapping, applied statically: metadata = the listed fields only
    assert samples == [
        {"id": "q1", "input": "What is 1+1?", "target": "2", "metadata": {"level": 1}},
        {"id": "q2", "input": "What is 10+5?", "target": "15", "metadata": {"level": 2}},
    ]
    md = (out / "data" / "samples.md").read_text()
    assert "read statically from arith.jsonl with FieldSpec(input='question'" in md
    assert "scorer=includes()" in md and "### 2 (id: q2)" in md
    assert "Inspect framework" in task.instructions and load_grading(out).graders == ["tournament"]
    assert "task_tests" not in tomllib.loads(task.task_file.read_text())


INSPECT_CASES = {
    "literal.py": (
        "from inspect_ai import Task, task\nfrom inspect_ai.dataset import Sample\n\n"
        'SAMPLES = [Sample(input="2+2?", target="4"), Sample(input="3+3?", target=["6", "six"], id="b")]\n\n'
        "@task\ndef literal():\n    return Task(dataset=SAMPLES)\n"
    ),
    "converted.py": (
        "from inspect_ai import Task, task\nfrom inspect_ai.dataset import Sample, csv_dataset\n\n"
        'def to_sample(r):\n    return Sample(input=r["q"].upper(), target=r["a"])\n\n'
        '@task\ndef converted():\n    return Task(dataset=csv_dataset("qa.csv", to_sample))\n'
    ),
    "remote.py": (
        "from inspect_ai import Task, task\nfrom inspect_ai.dataset import hf_dataset\n\n"
        '@task\ndef remote():\n    return Task(dataset=hf_dataset("org/data", split="test"))\n'
    ),
}


def test_inspect_static_reading_cases(tmp_path: Path) -> None:
    src = tmp_path / "evals"
    rig.write_files(src, {**INSPECT_CASES, "qa.csv": "q,a\nwhat,that\n"})
    r = invoke("tasks", "import", "inspect", src, "-o", tmp_path / "o")
    assert r.exit_code == 0, r.output
    lit = [json.loads(x) for x in (tmp_path / "o" / "literal" / "data" / "samples.jsonl").read_text().splitlines()]
    assert lit == [{"input": "2+2?", "target": "4"}, {"id": "b", "input": "3+3?", "target": ["6", "six"]}]
    conv = (tmp_path / "o" / "converted" / "data" / "samples.md").read_text()
    assert "converted by to_sample, which was not run, so raw records are shown" in conv
    assert '{"q": "what", "a": "that"}' in conv
    remote = (tmp_path / "o" / "remote" / "data" / "samples.md").read_text()
    assert "(0 samples)" in remote and "was not run; samples not rendered" in remote
    assert "remote: the dataset is built by code" in r.output  # the import says what it could not do


def test_inspect_richer_path_loads_with_inspect_ai(tmp_path: Path, upstream) -> None:
    pytest.importorskip("inspect_ai")
    src = tmp_path / "evals"
    rig.write_files(src, {"converted.py": INSPECT_CASES["converted.py"], "qa.csv": "q,a\nwhat,that\n"})
    r = invoke("tasks", "import", "inspect", src, "-o", tmp_path / "o", "--with-inspect")
    assert r.exit_code == 0, r.output
    samples = [json.loads(x) for x in (tmp_path / "o" / "data" / "samples.jsonl").read_text().splitlines()]
    assert samples == [{"input": "WHAT", "target": "that"}]  # record_to_sample really ran
    assert "loaded with inspect-ai" in (tmp_path / "o" / "data" / "samples.md").read_text()
    # on the FieldSpec task, the richer path and the static reading agree
    repo, _ = upstream
    arith = repo / "inspect" / "arith"
    a = invoke("tasks", "import", "inspect", arith, "-o", tmp_path / "static")
    b = invoke("tasks", "import", "inspect", arith, "-o", tmp_path / "loaded", "--with-inspect")
    assert a.exit_code == b.exit_code == 0
    assert (tmp_path / "static" / "data" / "samples.jsonl").read_text() == (
        tmp_path / "loaded" / "data" / "samples.jsonl"
    ).read_text()
    # a task inspect-ai cannot load falls back to the static reading, and says why
    rig.write_files(
        src, {"broken.py": "from inspect_ai import task\nimport not_a_module\n\n@task\ndef broken():\n    pass\n"}
    )
    r = invoke("tasks", "import", "inspect", src / "broken.py", "-o", tmp_path / "b", "--with-inspect")
    assert r.exit_code == 0 and "inspect-ai could not load the task" in r.output and "not_a_module" in r.output
