"""Harness names → factories. Built-ins are registered the same way a plugin would be.

Adapters are imported lazily (`module:Class` strings) so that choosing `react` never imports
the Claude Code or Codex adapters, and `benchctl --help` stays fast.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from harnesses.base import Harness

HARNESSES: dict[str, str] = {
    "react": "harnesses.react:ReactHarness",
    "claude-code": "harnesses.claude_code:ClaudeCodeHarness",
    "codex": "harnesses.codex:CodexHarness",
}


class UnknownHarness(ValueError):
    pass


def known() -> list[str]:
    return sorted(HARNESSES)


def check(name: str) -> None:
    """Raise UnknownHarness (naming the known ones) if `name` is not registered."""
    if name not in HARNESSES:
        raise UnknownHarness(f"unknown harness {name!r}; known harnesses: {', '.join(known())}")


def register(name: str, target: str | Callable[..., Harness]) -> None:
    """Add a harness: `target` is 'module:Class' or a callable returning a Harness."""
    HARNESSES[name] = target  # type: ignore[assignment]


def factory(name: str) -> Callable[..., Harness]:
    check(name)
    target: Any = HARNESSES[name]
    if callable(target):
        return target
    module, _, attr = target.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise UnknownHarness(f"harness {name!r} is registered but its adapter {module} cannot be imported: {e}") from e
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise UnknownHarness(f"harness {name!r}: {module} has no {attr}") from None


def create(name: str, options: dict[str, Any] | None = None) -> Harness:
    """A harness instance. Adapters take their options as keyword `options` if they accept it."""
    cls = factory(name)
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = {}
    if "options" in params:
        return cls(options=dict(options or {}))
    return cls()
