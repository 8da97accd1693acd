"""The `benchctl` command line.

Each command lives in `benchctl/commands/<name>.py` and exposes `register(app)`. Command
modules import only typer and the standard library at module level; heavy SDKs (docker,
anthropic, openai, google-genai, matplotlib) are imported inside the command bodies so that
`benchctl --help` stays fast.
"""

import inspect
import re

import typer
from typer.main import solve_typer_info_help
from typer.models import DefaultPlaceholder

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

# the end of a sentence: a full stop before white space or the end, not the one of "e.g." / "i.e."
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)")


def first_sentence(text: str) -> str:
    """A command's line in its group's command list: the first sentence of its help, on one line.
    typer's rich help keeps a docstring's hard line breaks there, which broke sentences in the middle
    ("... any-of-N and" / "tournament tables ...") whatever the terminal's width."""
    words = " ".join(inspect.cleandoc(text).split("\n\n")[0].split())
    end = _SENTENCE_END.search(words)
    return words[: end.end()] if end else words


def _short_helps(t: typer.Typer) -> None:
    """Give every command and group without a short help of its own its first sentence as one."""
    for info in t.registered_commands:
        if info.short_help is None:
            info.short_help = first_sentence(info.help or inspect.getdoc(info.callback) or "")
    for group in t.registered_groups:
        if isinstance(group.short_help, DefaultPlaceholder):
            group.short_help = first_sentence(solve_typer_info_help(group) or "")
        if group.typer_instance is not None:
            _short_helps(group.typer_instance)


_short_helps(app)


def __getattr__(name: str) -> object:
    # `benchctl.cli.click_command` is the Click command typer builds from `app`: the docs' CLI reference
    # (docs/cli.md, rendered by mkdocs-click) is generated from it, so it cannot drift from the commands.
    if name == "click_command":
        return typer.main.get_command(app)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
