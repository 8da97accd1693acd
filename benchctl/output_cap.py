"""The one cap on text a model is shown (a tool result, a test run's output): the head and the
tail, with how much was cut between them. Both ends, because a command's setup is at the top and
its verdict (an error, a summary line, an exit status) at the bottom; the middle is what goes.
"""

from __future__ import annotations


def head_and_tail(text: str, limit: int) -> tuple[str, bool]:
    """(text, False) when it has at most `limit` characters, else its first and last limit // 2
    characters around a `[... N characters cut ...]` line, and True."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return text[:half] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-half:], True
