"""benchctl installed from its wheel, outside the repository: the wheel carries the sandbox build
context and the demo task, `benchctl demo` runs from it, and a task made by `benchctl tasks new`
runs as it is.

The wheel is built with `python -m build` and installed into a fresh venv in a temporary directory.
The venv sees the system's site-packages (so the big dependencies are not downloaded again), but
benchctl itself comes from the wheel alone: PYTHONPATH is cleared, every command runs outside the
repository, and `benchctl.__file__` is checked to be inside the venv."""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from benchctl import __version__

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.docker

AGENT_SCRIPT = {
    "turns": [
        {"text": "Reading the log.", "tool_calls": [{"name": "bash", "input": {"command": "cat /data/app.log"}}]},
        {
            "text": "Writing the report.",
            "tool_calls": [
                {
                    "name": "create",
                    "input": {
                        "path": "/work/report.md",
                        "file_text": "## TLDR\nAn outside address, 198.51.100.9, guessed the admin password "
                        "after four failed password logins, made bob an owner and exported all data as CSV.\n",
                    },
                }
            ],
        },
        {"text": "Done."},
    ]
}


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """(venv, env): benchctl's wheel installed into a fresh venv outside the repository."""
    work = tmp_path_factory.mktemp("wheel")
    assert REPO not in work.parents
    # --no-isolation: the build backend (hatchling, in the dev extra) is already installed, so the
    # build needs no network and takes a few seconds
    _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(work / "dist"), str(REPO)],
        work,
        dict(os.environ),
    )
    (wheel,) = (work / "dist").glob("benchctl-*.whl")
    assert wheel.name.startswith(f"benchctl-{__version__}-")
    # check-wheel-contents reads its settings from pyproject.toml in the current directory
    _run([sys.executable, "-m", "check_wheel_contents", str(wheel)], REPO, dict(os.environ))

    env_dir = work / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(env_dir)
    # the system pip installs into the venv's own site-packages (no pip inside the venv: faster)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env_dir / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ],
        work,
        env,
    )
    return env_dir, env


def _py(env_dir: Path) -> str:
    return str(env_dir / "bin" / "python")


def test_benchctl_comes_from_the_wheel_with_its_bundled_files(installed, tmp_path: Path) -> None:
    env_dir, env = installed
    probe = (
        "import json, benchctl, importlib.metadata as md; from benchctl import bundled; "
        "from benchctl.sandbox.images import sandboxes_dir; "
        "print(json.dumps({'file': benchctl.__file__, 'sandboxes': str(sandboxes_dir()), "
        "'demo': str(bundled.demo_dir()), 'version': md.version('benchctl')}))"
    )
    found = json.loads(_run([_py(env_dir), "-c", probe], tmp_path, env).stdout)
    site = (env_dir / "lib").resolve()
    for key in ("file", "sandboxes", "demo"):
        assert site in Path(found[key]).resolve().parents, f"{key} is not from the wheel: {found[key]}"
    assert found["version"] == __version__
    # the wheel's build context and demo task are the repository's, file for file
    for mine, theirs in ((REPO / "sandboxes", found["sandboxes"]), (REPO / "configs/demo", found["demo"])):
        names = sorted(
            str(p.relative_to(mine)) for p in mine.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        )
        match, mismatch, errors = filecmp.cmpfiles(mine, theirs, names, shallow=False)
        assert mismatch == [] and errors == [] and match == names

    assert _run(["benchctl", "--version"], tmp_path, env).stdout.strip() == f"benchctl {__version__}"
    out = _run(["benchctl", "images", "build", "--if-missing"], tmp_path, env).stdout
    assert "nothing to do" in out or "built " in out


def test_demo_runs_from_the_installed_package(installed, tmp_path: Path) -> None:
    env_dir, env = installed
    r = _run(["benchctl", "demo", "demo-results"], tmp_path, env)
    (run,) = (tmp_path / "demo-results" / "runs").iterdir()
    assert run.name == "demo__react__scripted-configs-demo-investigator.json__2m__s0"  # as in a checkout
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "completed"
    assert Path(meta["spec"]["task_dir"]).resolve().is_relative_to((env_dir / "lib").resolve())
    assert (run / "artifacts" / "report.md").is_file()
    grade = json.loads((tmp_path / "demo-results" / "grades" / "combined" / f"{run.name}.json").read_text())
    assert grade["status"] == "scored"
    assert "Leaderboard" in r.stdout and f"benchctl view {tmp_path / 'demo-results'} --open" in r.stdout


def test_a_new_task_runs_as_it_is(installed, tmp_path: Path) -> None:
    env_dir, env = installed
    _run(["benchctl", "tasks", "new", "my-task"], tmp_path, env)
    task = tmp_path / "my-task"
    assert {"task.toml", "data", "grading"} <= {p.name for p in task.iterdir()}
    assert "# " in (task / "task.toml").read_text()  # commented
    (tmp_path / "agent.json").write_text(json.dumps(AGENT_SCRIPT))
    _run(
        [
            "benchctl",
            "run",
            "my-task",
            "--model",
            "scripted/agent.json",
            "--budget",
            "1m",
            "--out",
            "res",
            "--progress",
            "quiet",
        ],
        tmp_path,
        env,
    )
    (run,) = (tmp_path / "res" / "runs").iterdir()
    assert json.loads((run / "meta.json").read_text())["status"] == "completed"
    assert (run / "artifacts" / "report.md").read_text().startswith("## TLDR")
    _run(["benchctl", "grade", "res", "--judge", "scripted/py:benchctl.grading.fake_judge:judge"], tmp_path, env)
    coverage = json.loads((tmp_path / "res" / "grades" / "coverage" / f"{run.name}.json").read_text())
    assert coverage["status"] == "scored" and coverage["n_items"] == 4  # the example rubric's findings
