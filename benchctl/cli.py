"""The `benchctl` command line.

Each command lives in `benchctl/commands/<name>.py` and exposes `register(app)`. Command
modules import only typer and the standard library at module level; heavy SDKs (docker,
anthropic, openai, google-genai, matplotlib) are imported inside the command bodies so that
`benchctl --help` stays fast.
"""

import typer

from benchctl import __version__
from benchctl.commands import (
    demo,
    doctor,
    export,
    gateway,
    grade,
    images,
    internals,
    report,
    run,
    scan,
    targets,
    tasks,
    view,
)

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Benchmark harness for auditing agents: run, grade, report, view, export.",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"benchctl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run agents in network-less sandboxes, grade their outputs, report."""


for _module in (run, grade, scan, report, view, export, gateway, images, doctor, tasks, targets, internals, demo):
    _module.register(app)


def __getattr__(name: str) -> object:
    # `benchctl.cli.click_command` is the Click command typer builds from `app`: the docs' CLI reference
    # (docs/cli.md, rendered by mkdocs-click) is generated from it, so it cannot drift from the commands.
    if name == "click_command":
        return typer.main.get_command(app)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
