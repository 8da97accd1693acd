"""Another project's `harnesses` package (not benchctl's)."""

from harnesses.opencode import OpenCode

__all__ = ["OpenCode"]
