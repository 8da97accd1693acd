"""SOURCE + --ref -> a local directory holding the files to import, and where they came from.

- A repository URL (`https://…`, `ssh://…`, `file://…`, `git@host:path`): cloned into a temporary
  directory; --ref (a commit, tag or branch) is checked out there, else the default branch.
- A path inside a git working tree: with --ref the files come from that commit (`git archive`, so
  the working tree is never touched); without it they are the working tree's files, pinned to
  HEAD, and `dirty` records that they differ from HEAD.
- Any other directory (or file): its files as they are, with no commit.

Git is run as a subprocess with prompts disabled; nothing here needs the network unless the
URL does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Never imported: version-control metadata and caches that are not part of a task.
SKIP_NAMES = frozenset(
    {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv", "node_modules", ".DS_Store"}
)
SKIP_SUFFIXES = (".pyc", ".pyo")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^[\w.-]+@[\w.-]+:", re.IGNORECASE)


class SourceError(ValueError):
    """SOURCE or --ref cannot be used; the message says what to do."""


def skipped(name: str) -> bool:
    return name in SKIP_NAMES or name.endswith(SKIP_SUFFIXES)


def ignore_skipped(_dir: str, names: list[str]) -> set[str]:
    """A shutil.copytree `ignore` callable for SKIP_NAMES."""
    return {n for n in names if skipped(n)}


@dataclass
class Source:
    path: Path  # the files to import: a directory (or a single file) on local disk
    origin: str  # the SOURCE as recorded in the pin: an absolute path or the URL
    subpath: str  # `path` relative to the repository top ("" for the top or outside git)
    commit: str | None = None
    ref: str | None = None
    dirty: bool = False
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def relative(self, p: Path) -> str:
        """A path under `self.path` as recorded in the pin (relative to the repository top)."""
        base = self.path if self.path.is_dir() else self.path.parent
        rel = Path(self.subpath if self.path.is_dir() else Path(self.subpath).parent) / p.relative_to(base)
        s = rel.as_posix()
        return "" if s == "." else s


def _git(args: list[str], cwd: Path | None = None, timeout: float = 600) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise SourceError(
            "git is not installed; install it (apt-get install git) to import from a repository"
        ) from None
    except subprocess.TimeoutExpired:
        raise SourceError(f"git {' '.join(args[:2])} did not finish in {timeout:.0f} s") from None
    if r.returncode != 0:
        raise SourceError(f"git {' '.join(args)} failed: {(r.stderr or r.stdout).strip()[:500]}")
    return r.stdout


def _toplevel(path: Path) -> Path | None:
    d = path if path.is_dir() else path.parent
    try:
        return Path(_git(["rev-parse", "--show-toplevel"], cwd=d).strip()).resolve()
    except SourceError:
        return None


def _resolve_commit(repo: Path, ref: str) -> str:
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=repo).strip()
    except SourceError:
        raise SourceError(
            f"--ref {ref!r}: no such commit, tag or branch in {repo}. Fix: pass a commit id "
            f"(git log) or a tag (git tag)"
        ) from None


def open_source(source: str, ref: str | None = None) -> Source:
    """The files SOURCE names at --ref (the caller closes the result, or uses it as a context manager)."""
    if _URL.match(source) and not Path(source).exists():
        return _clone(source, ref)
    p = Path(source).expanduser().resolve()
    if not p.exists():
        raise SourceError(
            f"{source}: no such file or directory. Fix: pass a task directory, a directory of "
            f"tasks, or a repository URL"
        )
    top = _toplevel(p)
    if top is None:
        if ref:
            raise SourceError(
                f"--ref {ref!r}: {p} is not inside a git repository. Fix: drop --ref, or pass the "
                f"repository (path or URL)"
            )
        return Source(path=p, origin=str(p), subpath="")
    subpath = p.relative_to(top).as_posix()
    subpath = "" if subpath == "." else subpath
    if ref:
        resolved = _resolve_commit(top, ref)
        return _archive(top, resolved, subpath, origin=str(p), ref=ref, whole_dir=p.is_file())
    try:
        commit: str | None = _git(["rev-parse", "--verify", "--quiet", "HEAD"], cwd=top).strip() or None
    except SourceError:
        commit = None  # a repository without commits yet
    status = _git(
        ["status", "--porcelain", "--untracked-files=all", "--ignored=matching", "--", subpath or "."], cwd=top
    )
    dirty = any(
        not any(skipped(part) for part in Path(line[3:].strip('"').rstrip("/")).parts)
        for line in status.splitlines()
        if line.strip()
    )
    return Source(path=p, origin=str(p), subpath=subpath, commit=commit, dirty=dirty or commit is None)


def _archive(top: Path, commit: str, subpath: str, *, origin: str, ref: str, whole_dir: bool = False) -> Source:
    """The files at `commit` under subpath (for a file, its whole directory: an Inspect task's datasets
    and helpers sit next to it)."""
    tmp = tempfile.TemporaryDirectory(prefix="benchctl-import-")
    tar_path = Path(tmp.name) / "tree.tar"
    wanted = (Path(subpath).parent.as_posix() if whole_dir else subpath) or "."
    _git(["archive", "--format=tar", "-o", str(tar_path), commit, "--", wanted], cwd=top)
    dest = Path(tmp.name) / "tree"
    dest.mkdir()
    with tarfile.open(tar_path) as tf:
        tf.extractall(dest, filter="tar")  # refuses absolute names, `..` and links out of the tree
    tar_path.unlink()
    path = dest / subpath if subpath else dest
    if not path.exists():
        tmp.cleanup()
        raise SourceError(f"{subpath} does not exist at commit {commit[:12]} ({ref}). Fix: check the path and --ref")
    return Source(path=path, origin=origin, subpath=subpath, commit=commit, ref=ref, _tmp=tmp)


def _clone(url: str, ref: str | None) -> Source:
    tmp = tempfile.TemporaryDirectory(prefix="benchctl-import-")
    repo = Path(tmp.name) / "repo"
    try:
        _git(["clone", "--quiet", "--no-checkout", "--", url, str(repo)])
        commit = _resolve_commit(repo, ref) if ref else _git(["rev-parse", "HEAD"], cwd=repo).strip()
        _git(["checkout", "--quiet", "--detach", commit], cwd=repo)
    except SourceError:
        tmp.cleanup()
        raise
    shutil.rmtree(repo / ".git", ignore_errors=True)
    return Source(path=repo, origin=url, subpath="", commit=commit, ref=ref, _tmp=tmp)
