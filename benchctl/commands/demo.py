"""`benchctl demo [OUT]`: the whole loop on a fresh machine with Docker and no API key.

Builds the sandbox image if it is missing, runs the demo investigation (the demo task shipped with
benchctl) with its embedded scripted investigator, grades it with the built-in fake judge and prints
the report. Each step is the `benchctl` command a user would type, run in the directory that holds
the demo task (so the run ids are the ones a source checkout's `configs/demo` gives); a step that
fails stops the demo with its exit code. Rerunning resumes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer

SCRIPTED_INVESTIGATOR = "scripted/configs/demo/investigator.json"  # relative to the demo's root
FAKE_JUDGE = "scripted/py:benchctl.grading.fake_judge:judge"


def demo_steps(out: Path) -> list[list[str]]:
    """The commands the demo runs, in order (arguments after `benchctl`)."""
    o = str(out)
    return [
        ["images", "build", "--if-missing"],
        ["run", "configs/demo", "--model", SCRIPTED_INVESTIGATOR, "--budget", "2m", "--out", o],
        ["grade", o, "--judge", FAKE_JUDGE],
        ["report", o],
    ]


def demo(
    out: Path = typer.Argument(Path("results/demo"), metavar="OUT", help="The results directory (rerunning resumes)."),
) -> None:
    """Run the demo investigation end to end with no API key: image, run, grade, report."""
    from benchctl import bundled

    out = out.resolve()
    root = bundled.root()
    # the steps name the demo task relative to where it ships, so say where that is: outside a
    # checkout `benchctl run configs/demo ...` typed in the user's own directory finds no task
    typer.secho(f"$ cd {root}", bold=True)
    for step in demo_steps(out):
        typer.secho(f"$ benchctl {' '.join(step)}", bold=True)
        done = subprocess.run([sys.executable, "-m", "benchctl", *step], cwd=root)
        if done.returncode != 0:
            raise typer.Exit(done.returncode)
    reports = sorted(out.glob("runs/*/artifacts/report.md"))
    typer.echo("")
    if reports:
        typer.echo(f"The agent's report: {reports[0]}")
    typer.echo("Look at the run, its transcript and its grades in the browser:")
    typer.echo(f"  benchctl view {out} --open")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
