"""Plugins: harnesses, graders and scanners found by name through Python entry points.

A distribution declares what it adds in its pyproject.toml, one entry point per name:

    [project.entry-points."benchctl.harnesses"]
    my-agent = "my_agent.harness:MyHarness"      # a class (or callable) making a benchctl.harness.Harness

    [project.entry-points."benchctl.graders"]
    my-rubric = "my_rubric:GRADER"               # a benchctl.grading.Grader

    [project.entry-points."benchctl.scanners"]
    my_scanner = "my_scanners:SCANNER"           # a benchctl.scan.Scanner (benchctl scan --scanner my_scanner)

benchctl's own harnesses and graders are declared the same way in its pyproject.toml. So once a
plugin is installed (`pip install`), every benchctl process finds it by name: `benchctl run
--harness my-agent`, `benchctl doctor`, `benchctl grade`, and the processes on Ray nodes where it
is installed too. The entry points are read when a name is looked up; a plugin's module is
imported only when its name is used (choosing `react` never imports the Claude Code adapter).

benchctl's own entry points name modules of its two top-level packages, `benchctl` and
`harnesses` (the built-in harnesses). `harnesses` is a common name: PyPI has a distribution of
that name (verifiers' harnesses) whose top-level package is `harnesses` too. Installed into one
environment, the two share a directory (each overwriting the other's files) or one shadows the
other on sys.path. So before loading one of benchctl's own, the registry checks that its package
is the one beside `benchctl` (else: an error naming what is there and the fix), and `benchctl
doctor` names every other installed distribution that ships a package of those names.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import EntryPoint, entry_points, packages_distributions
from pathlib import Path
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
        own_package_problem = _own_package_problem(found[0])
        if own_package_problem:
            raise UnknownPlugin(f"{self.kind} {name!r}: {own_package_problem}")
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


DISTRIBUTION = "benchctl"
HOME = Path(__file__).resolve().parent.parent  # the directory holding the benchctl package (and harnesses)


def _own_package_problem(ep: EntryPoint) -> str | None:
    """For one of benchctl's own entry points: why its top-level package is not benchctl's (None: it is)."""
    if not _is_own(ep):
        return None
    top = ep.module.partition(".")[0]
    spec = importlib.util.find_spec(top)  # finds it without running it
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin is not None and origin.parent.parent == HOME:
        return None
    return (
        f"benchctl's built-in package {top!r} should be {HOME / top}, but {top!r} here is "
        f"{origin or 'not a package of files'}: another distribution or directory of that name comes first. Fix: "
        f"`pip uninstall` the other one (`benchctl doctor` names it) and reinstall benchctl, or keep them in "
        f"separate virtual environments"
    )


def own_packages() -> list[str]:
    """The top-level packages benchctl's own entry points (and benchctl itself) live in."""
    tops = {DISTRIBUTION}
    for group in ("benchctl.harnesses", "benchctl.graders", "benchctl.scanners"):
        tops |= {ep.module.partition(".")[0] for ep in entry_points(group=group) if _is_own(ep)}
    return sorted(tops)


def package_clashes() -> dict[str, list[str]]:
    """{package: [other distributions]} for each of benchctl's top-level packages that another installed
    distribution also ships (slow: it reads every installed distribution's file list)."""
    shipped = packages_distributions()
    out = {}
    for top in own_packages():
        others = sorted({d for d in shipped.get(top, []) if d.lower() != DISTRIBUTION})
        if others:
            out[top] = others
    return out


def _is_own(ep: EntryPoint) -> bool:
    return ep.dist is not None and ep.dist.name.lower() == DISTRIBUTION


def _where(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version} ({ep.value})" if dist is not None else ep.value
