"""The one way to make a rich Console for tables: full width on a terminal, a fixed wide width
otherwise. Piped, captured or written to a file, rich would assume 80 columns and fold every
table cell; a fixed width keeps one row per line, which is what a log or a diff wants.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

PIPED_WIDTH = 160


def wide_console(piped_width: int = PIPED_WIDTH, **kwargs: Any) -> Console:
    """A Console (kwargs as rich's: file, no_color, stderr, ...) that, when its output is not a
    terminal, is `piped_width` columns wide instead of 80."""
    console = Console(**kwargs)
    return console if console.is_terminal else Console(width=piped_width, **kwargs)
