"""docs/architecture.md's repository tree against the repository: every package and top-level
module is named in it, and everything it names exists.

The tree is the fenced block under "## Repository tree". Its format, which `parse_tree` reads:

- an entry line starts with 2·depth spaces, then one or more names separated by single spaces
  (a name ending in `/` is a directory; a name may hold a `/` itself, as `.ci/run`), then two or
  more spaces and the description, or the end of the line;
- the entries right below a directory entry (one level deeper, on lines of their own) are inside it;
- a line indented further than one level below the entry before it continues that entry's
  description.

Checked (`tree_problems`):

- every name exists (relative to the directory entry it sits under);
- required entries: the top-level folders (benchctl/, harnesses/, scripts/, sandboxes/, configs/,
  docs/, tests/), every top-level module and directory of benchctl/ and harnesses/, every package
  (a directory with `__init__.py`) below them, every folder of tests/ and every task in configs/;
- every module or script a description names (`x.py`, `x.sh`, `bench_*.py`, `gateway/wire/`'s
  `neutral.py`) is found under the entry's directory (a file entry: the directory it sits in), or
  from the repository root when it is a path (`scripts/test.sh`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = "docs/architecture.md"
HEADING = "## Repository tree"
TOP_LEVEL = ("benchctl/", "harnesses/", "scripts/", "sandboxes/", "configs/", "docs/", "tests/")
PACKAGES = ("benchctl", "harnesses")
# a module or script named in a description: `cli.py`, `bench_*.py`, `scripts/test.sh`
_NAMED_FILE = re.compile(r"(?<![\w./*-])((?:[\w.*-]+/)*[\w*-]+\.(?:py|sh))(?![\w/-])")


@dataclass
class Entry:
    path: str  # relative to the repository root; a directory's ends in "/"
    line: int  # in the page
    depth: int
    description: str


def tree_block(page: str) -> tuple[str, int]:
    """The tree's text and the page line its first line is on."""
    start = page.index(HEADING)
    m = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL).search(page, start)
    assert m is not None, f"{PAGE}: no fenced block under {HEADING!r}"
    return m.group(1), page.count("\n", 0, m.start(1)) + 1


def parse_tree(page: str) -> tuple[list[Entry], list[str]]:
    """The tree's entries, and what in its layout could not be read (see the module docstring)."""
    text, first_line = tree_block(page)
    entries: list[Entry] = []
    problems: list[str] = []
    dirs: list[str] = []  # dirs[d]: the directory an entry at depth d + 1 sits in
    line_entries: list[Entry] = []  # the entries of the last entry line: a continuation is theirs
    for n, raw in enumerate(text.splitlines(), start=first_line):
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if line_entries and indent > 2 * (line_entries[0].depth + 1):
            for e in line_entries:
                e.description += " " + raw.strip()
            continue
        names, _, description = re.split(r"( {2,}|$)", raw.strip(), maxsplit=1)
        depth = indent // 2
        if indent % 2 or depth > len(dirs):
            parent = f" under {dirs[-1]}" if dirs else ""
            problems.append(
                f"{PAGE} line {n}: {names!r} is indented {indent} spaces; an entry{parent} is indented "
                f"{2 * len(dirs)} spaces or fewer, in steps of two (deeper lines continue a description)"
            )
            continue
        del dirs[depth:]
        base = dirs[-1] if dirs else ""
        line_entries = [Entry(base + name, n, depth, description.strip()) for name in names.split(" ")]
        entries.extend(line_entries)
        if len(line_entries) == 1 and line_entries[0].path.endswith("/"):
            dirs.append(line_entries[0].path)
    return entries, problems


def _has_files(d: Path) -> bool:
    """Whether a directory holds a file outside __pycache__ (a folder git no longer tracks can stay
    behind holding only bytecode)."""
    return any(p.is_file() and "__pycache__" not in p.parts for p in d.rglob("*"))


def _dirs(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith((".", "_")) and _has_files(p))


def required_paths(root: Path) -> list[str]:
    """What the tree must name, as tree paths (directories end in "/")."""
    out = list(TOP_LEVEL)
    for pkg in PACKAGES:
        top = root / pkg
        out += [f"{pkg}/{p.name}" for p in sorted(top.glob("*.py"))]
        out += [f"{pkg}/{p.name}/" for p in _dirs(top)]
        out += [
            f"{p.parent.relative_to(root).as_posix()}/"
            for p in sorted(top.glob("*/*/**/__init__.py"))
            if "__pycache__" not in p.parts
        ]
    out += [f"tests/{p.name}/" for p in _dirs(root / "tests")]
    out += [f"configs/{p.name}/" for p in _dirs(root / "configs")]
    return list(dict.fromkeys(out))


def _found(name: str, base: Path, root: Path) -> bool:
    if "/" in name and any(root.glob(name)):
        return True
    return any(p for p in base.rglob(name) if "__pycache__" not in p.parts)


def tree_problems(page: str, root: Path) -> list[str]:
    """Every way the page's tree and the repository at `root` disagree, each saying what to do."""
    entries, problems = parse_tree(page)
    named = {e.path: e for e in entries}
    for e in entries:
        path = root / e.path
        if not (path.is_dir() if e.path.endswith("/") else path.is_file()):
            problems.append(
                f"{PAGE} line {e.line}: the repository tree names {e.path}, which does not exist: "
                "remove the entry or correct its name"
            )
            continue
        base = path if path.is_dir() else path.parent
        for name in _NAMED_FILE.findall(e.description):
            if not _found(name, base, root):
                where = base.relative_to(root).as_posix() or "the repository"
                problems.append(
                    f"{PAGE} line {e.line}: the description of {e.path} names {name}, which is not in "
                    f"{where}: correct the name or drop it"
                )
    for path in required_paths(root):
        if path not in named:
            parent = path.rstrip("/").rpartition("/")[0]
            under = f"under {parent}/" if parent else "at the top"
            problems.append(
                f"{path} is missing from the repository tree of {PAGE}: add an entry for it {under}, "
                "saying what it holds"
            )
    return problems


def test_the_repository_tree_matches_the_repository() -> None:
    problems = tree_problems((REPO / PAGE).read_text(encoding="utf-8"), REPO)
    assert not problems, "\n".join(problems)


def _write(root: Path, *files: str) -> None:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("")


def test_a_missing_or_stale_entry_is_named_with_what_to_do(tmp_path: Path) -> None:
    """The checks themselves, on a small repository: a module the tree leaves out, an entry whose
    file is gone, a description naming a module that is not there, a package below a package and a
    test folder left out, and a misindented line."""
    _write(
        tmp_path,
        "benchctl/__init__.py",
        "benchctl/cli.py",
        "benchctl/new.py",
        "benchctl/run/__init__.py",
        "benchctl/run/sweep.py",
        "benchctl/run/deep/__init__.py",
        "harnesses/__init__.py",
        "scripts/test.sh",
        "sandboxes/Dockerfile",
        "configs/demo/task.toml",
        "docs/index.md",
        "tests/core/__init__.py",
        "tests/run/__init__.py",
    )
    (tmp_path / "benchctl" / "stale").mkdir()  # only bytecode left: not required
    _write(tmp_path, "benchctl/stale/__pycache__/x.cpython-311.pyc")
    page = "\n".join(
        [
            "# Architecture",
            "",
            HEADING,
            "",
            "```",
            "benchctl/             the core",
            "  __init__.py           the version",
            "  cli.py                the app; commands/ and __main__.py",
            "  gone.py               a module that was removed",
            "  run/                  sweep.py (expansion), runner.py (resume)",
            "harnesses/            adapters",
            "  __init__.py           the package",
            "   misindented.py      three spaces",
            "scripts/              test.sh, scripts/demo.sh",
            "sandboxes/            the image",
            "configs/              tasks",
            "  demo/                 the demo",
            "docs/                 this site",
            "tests/                the suite",
            "  core/                 top-level modules",
            "```",
        ]
    )
    assert tree_problems(page, tmp_path) == [
        f"{PAGE} line 13: 'misindented.py' is indented 3 spaces; an entry under harnesses/ is indented 2 spaces "
        "or fewer, in steps of two (deeper lines continue a description)",
        f"{PAGE} line 8: the description of benchctl/cli.py names __main__.py, which is not in benchctl: "
        "correct the name or drop it",
        f"{PAGE} line 9: the repository tree names benchctl/gone.py, which does not exist: remove the entry or "
        "correct its name",
        f"{PAGE} line 10: the description of benchctl/run/ names runner.py, which is not in benchctl/run: "
        "correct the name or drop it",
        f"{PAGE} line 14: the description of scripts/ names scripts/demo.sh, which is not in scripts: "
        "correct the name or drop it",
        f"benchctl/new.py is missing from the repository tree of {PAGE}: add an entry for it under benchctl/, "
        "saying what it holds",
        f"benchctl/run/deep/ is missing from the repository tree of {PAGE}: add an entry for it under "
        "benchctl/run/, saying what it holds",
        f"tests/run/ is missing from the repository tree of {PAGE}: add an entry for it under tests/, "
        "saying what it holds",
    ]


def test_several_names_on_one_line_and_continued_descriptions(tmp_path: Path) -> None:
    page = "\n".join(
        [
            HEADING,
            "```",
            "tests/                the suite",
            "  core/ run/            one folder per package,",
            "                          named as the package",
            "  conftest.py           fixtures",
            "```",
        ]
    )
    entries, problems = parse_tree(page)
    assert problems == []
    assert [(e.path, e.depth, e.description) for e in entries] == [
        ("tests/", 0, "the suite"),
        ("tests/core/", 1, "one folder per package, named as the package"),
        ("tests/run/", 1, "one folder per package, named as the package"),
        ("tests/conftest.py", 1, "fixtures"),
    ]
