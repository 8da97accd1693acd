"""No import circles among benchctl/ and harnesses/ modules, read from the source (ast).

An edge A -> B is any import of B written in A: at module level, inside a function (a late
import is still a dependency), or under TYPE_CHECKING; `from P import x` counts as P.x when that
is a module, else as P. A dotted string naming a module (`"harnesses.react:ReactHarness"`,
`gateway/__init__.py`'s lazy exports) is a lazy import by name and counts too, except when it
names one of the module's own ancestor packages (`resources.files("benchctl.grading")` reads
package data; Python imports a module's ancestors before the module anyway).

A circle means two modules each need the other: move what both need into a module below both.
ALLOWED lists the circles accepted on purpose, each with its reason (none today: keep it so).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("benchctl", "harnesses")
ALLOWED: dict[frozenset[str], str] = {}  # frozenset of a circle's modules -> why it must stay
_NAMED_MODULE = re.compile(r"^((?:benchctl|harnesses)(?:\.\w+)+)(?::\w+)?$")


def source_modules(root: Path = REPO) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest module of ours that `name` is or lies in (None: not ours)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _named(module: str, path: Path, node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The modules one import statement or module-naming string brings in."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:  # relative: from the module's package, up level-1 more
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            pkg = ".".join(base + ([node.module] if node.module else []))
        else:
            pkg = node.module or ""
        return [f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in modules else pkg for a in node.names]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and (m := _NAMED_MODULE.match(node.value)):
        named = m.group(1)
        return [named] if named in modules and not module.startswith(named + ".") else []
    return []


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first import}."""
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for name in _named(module, path, node, modules):
                target = _known(name, modules)
                if target and target != module:
                    graph[module].setdefault(target, node.lineno)
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def describe(component: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    inside = set(component)
    return "\n".join(
        f"  {modules[a].relative_to(REPO)}:{line} imports {b}"
        for a in component
        for b, line in sorted(graph[a].items())
        if b in inside
    )


def test_no_import_circles() -> None:
    modules = source_modules()
    graph = import_graph(modules)
    found = circles(graph)
    bad = [c for c in found if frozenset(c) not in ALLOWED]
    assert not bad, "import circles (move what both sides need into a module below both):\n" + "\n\n".join(
        describe(c, graph, modules) for c in bad
    )
    assert set(ALLOWED) <= {frozenset(c) for c in found}, "ALLOWED lists a circle that is gone: remove it"


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Late, TYPE_CHECKING, relative and by-name imports all make edges, so a circle through any of
    them is found; an import statement of an ancestor package is an edge, a string naming one is not."""
    pkg = tmp_path / "benchctl"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import a\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from benchctl.sub.b import g\n")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n")
    (pkg / "sub" / "c.py").write_text("LAZY = {'x': 'benchctl.sub.a:f'}\nDATA = 'benchctl.sub'\n")
    (pkg / "sub" / "d.py").write_text("import os\nfrom benchctl import __version__, sub\n")
    (tmp_path / "harnesses").mkdir()
    modules = source_modules(tmp_path)
    graph = import_graph(modules)
    assert graph == {
        "benchctl": {},
        "benchctl.sub": {"benchctl.sub.a": 1},
        "benchctl.sub.a": {"benchctl.sub.b": 2},
        "benchctl.sub.b": {"benchctl.sub.c": 3},
        "benchctl.sub.c": {"benchctl.sub.a": 1},
        "benchctl.sub.d": {"benchctl": 2, "benchctl.sub": 2},
    }
    assert circles(graph) == [["benchctl.sub.a", "benchctl.sub.b", "benchctl.sub.c"]]


# ---- benchctl reaches the harnesses only by name ---------------------------------------------------


def harness_imports(root: Path = REPO) -> list[str]:
    """Every import (of any kind above) of the `harnesses` package written in a benchctl/ module."""
    modules = source_modules(root)
    return [
        f"{modules[m].relative_to(root)}:{line} imports {target}"
        for m, edges in import_graph(modules).items()
        if m.split(".")[0] == "benchctl"
        for target, line in sorted(edges.items())
        if target.split(".")[0] == "harnesses"
    ]


def test_nothing_in_benchctl_imports_the_harnesses_package() -> None:
    """The built-in harnesses are found the way a plugin is, by name through their entry points
    (benchctl/harness.py HARNESSES): a benchctl module importing `harnesses` would make benchctl
    depend on them, and what it needs from them would be out of a plugin's reach."""
    found = harness_imports()
    assert not found, "go through benchctl.harness.create_harness (entry points) instead:\n  " + "\n  ".join(found)


def test_harness_imports_sees_every_kind_of_import(tmp_path: Path) -> None:
    (tmp_path / "benchctl").mkdir()
    (tmp_path / "benchctl" / "__init__.py").write_text("")
    (tmp_path / "benchctl" / "a.py").write_text("def f():\n    from harnesses.react import ReactHarness\n")
    (tmp_path / "benchctl" / "b.py").write_text("import importlib\nM = importlib.import_module('harnesses.react')\n")
    (tmp_path / "benchctl" / "c.py").write_text("DOC = 'harnesses are found by name'\n")
    (tmp_path / "harnesses" / "react").mkdir(parents=True)
    (tmp_path / "harnesses" / "__init__.py").write_text("")
    (tmp_path / "harnesses" / "react" / "__init__.py").write_text("import benchctl.a\n")
    assert harness_imports(tmp_path) == [
        "benchctl/a.py:2 imports harnesses.react",
        "benchctl/b.py:2 imports harnesses.react",
    ]


# ---- the protocol that keeps gateway/exchange.py from importing gateway/server.py ---------------


def test_gateway_context_declares_what_exchange_uses_and_gateway_has_it() -> None:
    """exchange.py is typed against GatewayContext instead of importing server.Gateway: every
    `gw.<name>` it uses must be declared there, and the real Gateway must have all of them."""
    from benchctl.gateway.context import GatewayContext
    from benchctl.gateway.server import Gateway, GatewayConfig

    tree = ast.parse((REPO / "benchctl/gateway/exchange.py").read_text(encoding="utf-8"))
    used = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and (
            (isinstance(n.value, ast.Name) and n.value.id == "gw")
            or (isinstance(n.value, ast.Attribute) and n.value.attr == "gw")
        )
    }
    declared = {name for name in dir(GatewayContext) if not name.startswith("_")} | set(GatewayContext.__annotations__)
    assert used and not used - declared, f"used by exchange.py but not in GatewayContext: {sorted(used - declared)}"
    gateway = Gateway(GatewayConfig(model=f"scripted/{REPO / 'configs/demo/investigator.json'}"))
    assert isinstance(gateway, GatewayContext)  # runtime_checkable: every declared member is there


def test_every_module_imports_on_its_own() -> None:
    """Each module imported first, in an interpreter holding none of ours: a circle through a
    package's __init__ (importing P.x runs P/__init__.py first, which the graph above does not
    model) fails here as the ImportError a user would get."""
    import subprocess
    import sys

    names = sorted(m for m in source_modules() if not m.endswith("__main__"))
    probe = (
        "import importlib, sys, traceback\n"
        "bad = []\n"
        f"for name in {names!r}:\n"
        "    for m in [m for m in sys.modules if m.split('.')[0] in ('benchctl', 'harnesses')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        bad.append(name + ': ' + traceback.format_exc(limit=-3))\n"
        "print('\\n'.join(bad))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert not res.stdout.strip(), "modules that fail when imported first:\n" + res.stdout


def test_package_exports_are_not_shadowed_by_submodules() -> None:
    """A lazily exported name that is also a submodule's name returns the module once that
    submodule is imported (Python sets it on the package): `from benchctl.run import execute`
    must give the function."""
    import importlib

    for pkg in ("benchctl.run", "benchctl.gateway"):
        module = importlib.import_module(pkg)
        for name in module.__all__:
            assert f"{pkg}.{name}" not in source_modules(), f"{pkg}.{name} is both an export and a submodule"
