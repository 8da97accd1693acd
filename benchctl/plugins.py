"""Plugins: harnesses and graders found by name through Python entry points.

A distribution declares what it adds in its pyproject.toml, one entry point per name:

    [project.entry-points."benchctl.harnesses"]
    my-agent = "my_agent.harness:MyHarness"      # a class (or callable) making a benchctl.harness.Harness

    [project.entry-points."benchctl.graders"]
    my-rubric = "my_rubric:GRADER"               # a benchctl.grading.Grader

benchctl's own harnesses and graders are declared the same way in its pyproject.toml. So once a
plugin is installed (`pip install`), every benchctl process finds it by name: `benchctl run
--harness my-agent`, `benchctl doctor`, `benchctl grade`, and the processes on Ray nodes where it
is installed too. The entry points are read when a name is looked up; a plugin's module is
imported only when its name is used (choosing `react` never imports the Claude Code adapter).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownPlugin(ValueError):
    """A name no installed distribution declares, or one that cannot be loaded; the message says why."""


class Registry(Generic[T]):
    """The plugins of one entry-point group, by name."""

    def __init__(self, group: str, kind: str) -> None:
        self.group = group  # e.g. "benchctl.harnesses"
        self.kind = kind  # what one is called in messages: "harness", "grader"
        self._local: dict[str, T] = {}

    def _declared(self) -> dict[str, list[EntryPoint]]:
        out: dict[str, list[EntryPoint]] = {}
        for ep in entry_points(group=self.group):
            out.setdefault(ep.name, []).append(ep)
        return out

    def names(self) -> list[str]:
        return sorted(set(self._declared()) | set(self._local))

    def check(self, name: str) -> None:
        """Raise UnknownPlugin, naming the known ones and how to add one, if `name` is not declared."""
        if name not in self._local and name not in self._declared():
            kinds = self.group.rpartition(".")[2]
            raise UnknownPlugin(
                f"unknown {self.kind} {name!r}; known {kinds}: {', '.join(self.names()) or 'none'} (a plugin "
                f"{self.kind} is known once its distribution is installed: it declares it as an entry point in "
                f"the group {self.group!r})"
            )

    def provider(self, name: str) -> str:
        """Where `name` comes from: 'distribution version (module:attr)', or 'this process' for register()."""
        if name in self._local:
            return "this process"
        self.check(name)
        return "; ".join(_where(ep) for ep in self._declared()[name])

    def load(self, name: str) -> T:
        """The object `name` declares (its module imported now)."""
        if name in self._local:
            return self._local[name]
        self.check(name)
        found = self._declared()[name]
        if len(found) > 1:
            raise UnknownPlugin(
                f"{self.kind} {name!r} is declared by more than one installed distribution: "
                f"{'; '.join(_where(ep) for ep in found)}. Fix: uninstall all but one of them"
            )
        try:
            obj: Any = found[0].load()
        except (ImportError, AttributeError) as e:
            raise UnknownPlugin(f"{self.kind} {name!r} ({_where(found[0])}) cannot be loaded: {e}") from e
        return obj

    def register(self, name: str, obj: T) -> None:
        """Add `name` in this process only (tests; Python code embedding benchctl). It reaches neither
        other processes nor Ray nodes: a plugin for those is declared as an entry point."""
        self._local[name] = obj

    def unregister(self, name: str) -> None:
        self._local.pop(name, None)


def _where(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version} ({ep.value})" if dist is not None else ep.value
