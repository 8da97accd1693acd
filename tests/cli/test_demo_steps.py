"""`benchctl demo` prints each step as a command the user can type again, from where it ran."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchctl import bundled
from benchctl.cli import app


def test_demo_prints_the_directory_its_steps_run_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run step names `configs/demo` relative to the demo's root (the wheel's copy outside a
    checkout): the printed commands say to run them there, before the first one that needs it."""
    ran: list[tuple[list[str], Any]] = []

    def fake_run(args: list[str], cwd: Any = None, **_: Any) -> subprocess.CompletedProcess[str]:
        ran.append((args, cwd))
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr("benchctl.commands.demo.subprocess.run", fake_run)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["demo", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert {cwd for _, cwd in ran} == {bundled.root()}
    lines = r.output.splitlines()
    cd = lines.index(f"$ cd {bundled.root()}")
    first_run = next(i for i, line in enumerate(lines) if line.startswith("$ benchctl run configs/demo "))
    assert cd < first_run
