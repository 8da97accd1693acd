"""benchctl/console.py: tables printed anywhere but a terminal get a fixed wide width, not rich's
80 columns (grading's summary and validation tables, `benchctl report`)."""

from __future__ import annotations

import io

import pytest

from benchctl.console import PIPED_WIDTH, wide_console


def test_piped_or_to_a_file_the_width_is_fixed_and_options_pass_through() -> None:
    buf = io.StringIO()
    c = wide_console(file=buf)
    assert not c.is_terminal and c.width == PIPED_WIDTH == 160
    c = wide_console(200, file=buf, no_color=True)
    assert c.width == 200 and c.no_color and c.file is buf


def test_on_a_terminal_the_terminal_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "97")
    c = wide_console(200, file=io.StringIO(), force_terminal=True)
    assert c.is_terminal and c.width == 97


def test_a_table_piped_is_not_folded_at_80_columns() -> None:
    from rich.table import Table

    buf = io.StringIO()
    t = Table()
    for i in range(8):
        t.add_column(f"column_{i}")
    t.add_row(*(f"value_{i:02d}" for i in range(8)))
    wide_console(200, file=buf, no_color=True).print(t)
    assert "value_00" in buf.getvalue() and max(map(len, buf.getvalue().splitlines())) > 80
    assert sum("value_" in line for line in buf.getvalue().splitlines()) == 1  # one row, one line
