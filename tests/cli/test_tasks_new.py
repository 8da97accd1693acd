"""`benchctl tasks new NAME`: a starter task that loads as `benchctl run` loads it, and clear refusals
that leave existing files alone. (Running it from the installed wheel: tests/gates/test_wheel.py.)"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.tasks import load_task

runner = CliRunner()


def test_new_task_loads_with_its_example_rubric(tmp_path: Path) -> None:
    r = runner.invoke(app, ["tasks", "new", str(tmp_path / "log-hunt")])
    assert r.exit_code == 0, r.output
    task = load_task(tmp_path / "log-hunt")
    assert task.name == "log-hunt" and task.artifacts == ["report.md"]
    assert (tmp_path / "log-hunt" / "data" / "app.log").is_file()
    for rel in ("grading/findings.jsonl", "grading/reference.md"):
        assert (tmp_path / "log-hunt" / rel).is_file()
    text = (tmp_path / "log-hunt" / "task.toml").read_text()
    assert "{{" not in text and 'name = "log-hunt"' in text


def test_new_task_goes_into_an_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert runner.invoke(app, ["tasks", "new", str(tmp_path / "empty")]).exit_code == 0
    assert load_task(tmp_path / "empty").name == "empty"


def test_new_task_refuses_an_existing_directory_and_a_bad_name(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    r = runner.invoke(app, ["tasks", "new", str(tmp_path / "mine")])
    assert r.exit_code == 2 and "already exists" in r.output
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]

    r = runner.invoke(app, ["tasks", "new", str(tmp_path / "no good")])
    assert r.exit_code == 2 and "not a usable task name" in r.output
    assert not (tmp_path / "no good").exists()


def test_version_has_one_home() -> None:
    import tomllib

    from benchctl import __version__

    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"benchctl {__version__}"
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
