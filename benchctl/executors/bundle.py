"""What a run on another machine needs from the driver, as bytes (Ray nodes share no filesystem).

A bundle is a tar of the task directory (without its data directory and without any results
directory inside it), the run's data directory (the task's, or a variant's copy) as `data/`,
and the scripted-model files the run's model ids name. It is made once per data variant and
shipped through Ray's object store; a node unpacks it into a scratch directory.

The run's files come back the same way: `pack_dir` on the node, `unpack_into` on the driver
(with tarfile's `data` filter: no links, no absolute or `..` names, no special files).
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from benchctl.tasks import Task

TASK = "task"
DATA = "data"
SKIP_NAMES = {".git", ".variants", "__pycache__"}


@dataclass
class Bundle:
    tar: bytes  # task/ and data/
    has_data: bool
    scripts: dict[str, bytes] = field(default_factory=dict)  # scripted model path as written -> bytes


def scripted_paths(models: list[str | None]) -> list[str]:
    """The script files named by `scripted/<file>` model ids (not `scripted/py:...` callables)."""
    out = []
    for m in models:
        if m and m.startswith("scripted/") and not m[len("scripted/") :].startswith("py:"):
            out.append(m[len("scripted/") :])
    return sorted(set(out))


def make_bundle(task: Task, data_dir: Path | None, models: list[str | None], exclude: list[Path]) -> Bundle:
    skip = {p.resolve() for p in exclude}
    if task.data_dir is not None:
        skip.add(Path(task.data_dir).resolve())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add_tree(tar, Path(task.task_dir), TASK, skip)
        if data_dir is not None:
            _add_tree(tar, Path(data_dir), DATA, set())
    scripts = {}
    for p in scripted_paths(models):
        path = Path(p).expanduser()
        scripts[p] = (path if path.is_absolute() else Path.cwd() / path).read_bytes()
    return Bundle(buf.getvalue(), data_dir is not None, scripts)


def _add_tree(tar: tarfile.TarFile, root: Path, arcroot: str, skip: set[Path]) -> None:
    tar.add(str(root), arcname=arcroot, recursive=False)
    for p in sorted(root.iterdir()):
        if p.name in SKIP_NAMES or p.resolve() in skip:
            continue
        if p.is_dir() and not p.is_symlink():
            _add_tree(tar, p, f"{arcroot}/{p.name}", skip)
        else:
            tar.add(str(p), arcname=f"{arcroot}/{p.name}", recursive=False)


def unpack_bundle(bundle: Bundle, dest: Path) -> tuple[Path, Path | None]:
    """Unpack into dest; returns (task dir, data dir or None). The driver's own files: links
    inside the data are kept as links, as the local run would mount them."""
    with tarfile.open(fileobj=io.BytesIO(bundle.tar)) as tar:
        tar.extractall(dest, filter="tar")
    return dest / TASK, (dest / DATA if bundle.has_data else None)


def pack_dir(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(root.iterdir()):
            tar.add(str(p), arcname=p.name)
    return buf.getvalue()


def unpack_into(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
