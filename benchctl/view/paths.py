"""Every file the viewer reads is found here, and only inside the results dir.

Names from a URL (run ids, attempt numbers, artifact paths) are checked against the results
layout before any file is opened: a run id is one existing entry of `runs/` (or, for a tournament
verifier's run, of `grades/tournament/verify/runs/`, a results layout of its own) made of run-id
characters, an attempt is a number, an artifact path is a chain of plain names under the run's
`artifacts/` with no symlink anywhere (artifact collection never creates one, so a symlink there
was put in by hand and could point anywhere).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from benchctl.layout import ARTIFACTS, GRADES, META, RUNS, TRANSCRIPT
from benchctl.run.runner import ATTEMPTS
from benchctl.tournament.schema import TOURNAMENT, VERIFY_DIR

# The tournament's verifier runs (benchctl/tournament/verify.py): their pages are a run's pages.
VERIFIER_RUNS = (GRADES, TOURNAMENT, VERIFY_DIR, RUNS)

RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,300}")
_NAME = re.compile(r"[^/\x00]{1,255}")


class NotFound(Exception):
    """A name that does not lead to a file of the results dir (the app answers 404)."""


@dataclass(frozen=True)
class RunFiles:
    run_id: str
    attempt: int | None
    dir: str  # runs/<id> or runs/<id>/attempts/<n>

    @property
    def meta(self) -> str:
        return os.path.join(self.dir, META)

    @property
    def transcript(self) -> str:
        return os.path.join(self.dir, TRANSCRIPT)

    @property
    def artifacts(self) -> str:
        return os.path.join(self.dir, ARTIFACTS)


def _real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)  # lstat: a symlink is not a directory here
    except OSError:
        return False


def run_files(root: str, run_id: str, attempt: str | int | None = None) -> RunFiles:
    if not RUN_ID.fullmatch(run_id) or run_id in (".", ".."):
        raise NotFound(f"no run {run_id!r}")
    d = os.path.join(root, RUNS, run_id)
    if not _real_dir(d):
        # a verifier's run, reached through real directories only (as artifacts are)
        parts = [*VERIFIER_RUNS, run_id]
        d = os.path.join(root, *parts)
        if not all(_real_dir(os.path.join(root, *parts[: k + 1])) for k in range(len(parts))):
            raise NotFound(f"no run {run_id!r}")
    if attempt in (None, ""):
        return RunFiles(run_id, None, d)
    if not str(attempt).isdigit():
        raise NotFound(f"no attempt {attempt!r}")
    n = int(str(attempt))
    ad = os.path.join(d, ATTEMPTS, str(n))
    if not _real_dir(os.path.join(d, ATTEMPTS)) or not _real_dir(ad):
        raise NotFound(f"run {run_id} has no attempt {n}")
    return RunFiles(run_id, n, ad)


def attempts(run_dir: str) -> list[int]:
    d = os.path.join(run_dir, ATTEMPTS)
    if not _real_dir(d):
        return []
    with os.scandir(d) as it:
        return sorted(int(e.name) for e in it if e.name.isdigit() and e.is_dir(follow_symlinks=False))


def artifact_file(files: RunFiles, rel: str) -> str:
    """The path of artifact `rel` (e.g. `report.md`, `sub/notes.txt`): a regular file under
    artifacts/ reached through real directories only."""
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") or not _NAME.fullmatch(p) for p in parts):
        raise NotFound(f"no artifact {rel!r}")
    path = files.artifacts
    if not _real_dir(path):
        raise NotFound("this run has no artifacts")
    for i, p in enumerate(parts):
        path = os.path.join(path, p)
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise NotFound(f"no artifact {rel!r}") from None
        last = i == len(parts) - 1
        if (last and not stat.S_ISREG(mode)) or (not last and not stat.S_ISDIR(mode)):
            raise NotFound(f"no artifact {rel!r}")
    return path


def list_artifacts(files: RunFiles, limit: int = 500) -> list[tuple[str, int]]:
    """(relative path, size) of the regular files under artifacts/, symlinks not followed."""
    out: list[tuple[str, int]] = []
    if not _real_dir(files.artifacts):
        return out
    stack = [""]
    while stack and len(out) < limit:
        rel = stack.pop()
        with os.scandir(os.path.join(files.artifacts, rel)) as it:
            for e in sorted(it, key=lambda e: e.name):
                r = f"{rel}/{e.name}" if rel else e.name
                if e.is_symlink():
                    continue
                if e.is_dir():
                    stack.append(r)
                elif e.is_file():
                    out.append((r, e.stat(follow_symlinks=False).st_size))
    return sorted(out)[:limit]
