"""The CLI's help says what its source says: rich markup (on in typer's help) reads `[word ...]` as a
style tag and drops it, so a help text naming a TOML table or a default in brackets must escape the
bracket (`\\[target]`)."""

from __future__ import annotations

import re
from typing import Any

import typer.main
from typer.testing import CliRunner

from benchctl.cli import app

# what rich takes for a markup tag: `[` then a lower-case letter, `#`, `/` or `@`, up to `]`
_TAG = re.compile(r"(?<!\\)\[[a-z#/@][^\[\]]*\]")


def _commands(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _commands(sub, (*path, name))
    return out


def test_no_help_text_loses_a_bracketed_word_to_rich_markup() -> None:
    lost = []
    for path, cmd in _commands(typer.main.get_command(app)):
        texts = [("", cmd.help or "")] + [
            (p.opts[0] if p.opts else p.name, getattr(p, "help", None) or "") for p in cmd.params
        ]
        for where, text in texts:
            lost += [f"benchctl {' '.join(path)} {where}: {m}" for m in _TAG.findall(text)]
    assert not lost, "escape these brackets as \\[ so rich shows them:\n" + "\n".join(lost)


def test_the_bracketed_words_show_in_the_rendered_help() -> None:
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "300"}).output
    assert "a task with a [target]" in " ".join(out.split())
    out = CliRunner().invoke(app, ["images", "build", "--help"], env={"COLUMNS": "300"}).output
    assert "[default: $BENCHCTL_IMAGE or benchctl-sandbox:latest]" in " ".join(out.split())


def test_grade_help_shows_how_to_grade_and_errors_name_the_command_typed(tmp_path: Any) -> None:
    """`benchctl grade RESULTS --judge M` is the command users type, but `benchctl grade --help`
    listed only the subcommands `runs` and `validate`, and its usage errors said `benchctl grade runs`."""
    runner = CliRunner()
    out = runner.invoke(app, ["grade", "--help"], env={"COLUMNS": "200"}, prog_name="benchctl").output
    assert "Usage: benchctl grade [OPTIONS] COMMAND" in out  # the group's own help, then the default command's
    assert "--judge" in out and "--repeats" in out and "Usage: benchctl grade [OPTIONS] {results}" in out
    assert "validate" in out
    (tmp_path / "runs").mkdir()
    for args in ([str(tmp_path)], [str(tmp_path), "--no-such-option"]):
        r = runner.invoke(app, ["grade", *args], env={"COLUMNS": "200"}, prog_name="benchctl")
        assert r.exit_code == 2
        assert "Usage: benchctl grade [OPTIONS]" in r.output and "Try 'benchctl grade --help'" in r.output
        assert "grade runs" not in r.output
    # the explicit subcommand keeps its own name
    r = runner.invoke(app, ["grade", "runs", str(tmp_path)], env={"COLUMNS": "200"}, prog_name="benchctl")
    assert r.exit_code == 2 and "Usage: benchctl grade runs [OPTIONS]" in r.output
    r = runner.invoke(app, ["grade", str(tmp_path), "--help"], env={"COLUMNS": "200"}, prog_name="benchctl")
    assert r.exit_code == 0 and "Usage: benchctl grade [OPTIONS] {results}" in r.output and "--judge" in r.output


def test_command_lists_show_each_commands_first_sentence_on_one_line() -> None:
    """typer's rich command list keeps a docstring's hard line breaks: `benchctl --help` showed
    "... any-of-N and" / "tournament tables ..." on two lines at any width."""
    for path, cmd in _commands(typer.main.get_command(app)):
        for name, sub in getattr(cmd, "commands", {}).items():
            shown = sub.short_help or (sub.help or "").split("\n\n")[0]  # what the command list prints
            where = f"benchctl {' '.join((*path, name))}"
            assert shown and "\n" not in shown, f"{where}: {shown!r}"
            assert not shown.endswith("..."), f"{where}: cut mid-sentence: {shown!r}"
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "300"}).output
    assert "breakdowns, any-of-N and tournament tables, with provenance and mixed-judge warnings." in out


def test_first_sentence() -> None:
    from benchctl.cli import first_sentence

    assert (
        first_sentence("One line\n    broken here, e.g. there. Second.\n\nMore.") == "One line broken here, e.g. there."
    )
    assert first_sentence("Ends with (`x.y`) and no stop") == "Ends with (`x.y`) and no stop"
