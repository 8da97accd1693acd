"""The pin of an imported task: where its files came from and what exactly they were.

Written by `benchctl tasks import` into the generated task.toml; read by `benchctl.tasks`
(`Task.pin`) and verified by `benchctl run`, which refuses a task whose data no longer matches
(unless --allow-changed) and copies the pin into every run's meta.json.

    [pin]
    format = "harbor"                       # or "inspect"
    source = "/srv/tasks"                   # the SOURCE given to the import (absolute path or URL)
    path = "tasks/hello"                    # the task's directory (or file) inside the source; "" = its top
    commit = "4f1c…"                        # the git commit the files came from (absent outside git)
    ref = "v1.2"                            # the --ref asked for, when one was
    dirty = true                            # only when the working tree differed from `commit`
    content_hash = "sha256:…"               # over every file of the task's data directory (see below)
    image = "benchctl-task-hello:0a1b2c3d4e5f"   # the image the task declares (or builds from environment/)
    image_from = "dockerfile"               # dockerfile | docker_image | compose | inspect_sandbox | none
    image_digest = "sha256:…"               # when the image was present locally at import
    [pin.files]                             # one digest per file, relative to the data directory
    "tests/test.sh" = "sha256:…"

A file's digest is "sha256:<hex of its bytes>", a symlink's "symlink:<its target>" (links are
never followed). `content_hash` is sha256 over the sorted "path<TAB>digest" lines, so it covers
names as well as contents; the per-file table is there to name what changed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("harbor", "inspect")
IMAGE_FROM = ("dockerfile", "docker_image", "compose", "inspect_sandbox", "none")
_KEYS = {
    "format",
    "source",
    "path",
    "commit",
    "ref",
    "dirty",
    "content_hash",
    "image",
    "image_from",
    "image_digest",
    "files",
}
_REQUIRED = ("format", "source", "content_hash")


class PinError(ValueError):
    """A malformed [pin] table; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Pin:
    format: str
    source: str
    content_hash: str
    path: str = ""
    commit: str | None = None
    ref: str | None = None
    dirty: bool = False
    image: str | None = None
    image_from: str = "none"
    image_digest: str | None = None
    files: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """What a run's meta.json records (everything but the per-file table)."""
        return {
            "format": self.format,
            "source": self.source,
            "path": self.path,
            "commit": self.commit,
            "ref": self.ref,
            "dirty": self.dirty,
            "content_hash": self.content_hash,
            "image": self.image,
            "image_from": self.image_from,
            "image_digest": self.image_digest,
            "files": len(self.files),
        }

    def to_toml_table(self) -> dict[str, Any]:
        """The [pin] table as written by the import (None / False values left out)."""
        table: dict[str, Any] = {"format": self.format, "source": self.source, "path": self.path}
        for key in ("commit", "ref"):
            if getattr(self, key):
                table[key] = getattr(self, key)
        if self.dirty:
            table["dirty"] = True
        table["content_hash"] = self.content_hash
        if self.image:
            table["image"] = self.image
        table["image_from"] = self.image_from
        if self.image_digest:
            table["image_digest"] = self.image_digest
        table["files"] = dict(sorted(self.files.items()))
        return table


# ---- digests -------------------------------------------------------------------------------


def file_digests(root: Path) -> dict[str, str]:
    """path (relative, posix) -> digest of every file and symlink under `root` (hidden ones
    included), links not followed."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        names = list(filenames) + [d for d in dirnames if (base / d).is_symlink()]
        for name in names:
            p = base / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "symlink:" + os.readlink(p)
            elif p.is_file():
                h = hashlib.sha256()
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                out[rel] = "sha256:" + h.hexdigest()
    return dict(sorted(out.items()))


def content_hash(digests: dict[str, str]) -> str:
    h = hashlib.sha256()
    for rel, digest in sorted(digests.items()):
        h.update(f"{rel}\t{digest}\n".encode())
    return "sha256:" + h.hexdigest()


# ---- parsing (called by benchctl.tasks.load_task) ------------------------------------------


def parse_pin(file: Path, raw: Any, data_dir: Path | None) -> Pin:
    def err(key: str, problem: str, fix: str) -> PinError:
        return PinError(f"{file}: key `pin.{key}`: {problem}. Fix: {fix}")

    if not isinstance(raw, dict):
        raise PinError(
            f"{file}: key `pin`: must be a table. Fix: write it as [pin] (re-import the task to regenerate it)"
        )
    for k in raw:
        if k not in _KEYS:
            raise err(k, "unknown key", f"use one of: {', '.join(sorted(_KEYS))}")
    for k in _REQUIRED:
        if not isinstance(raw.get(k), str) or not raw[k]:
            raise err(
                k, "missing or not a string", "re-import the task with `benchctl tasks import` to regenerate the pin"
            )
    if raw["format"] not in FORMATS:
        raise err("format", f"{raw['format']!r} is not a known format", f"use one of {', '.join(FORMATS)}")
    if data_dir is None:
        raise PinError(
            f"{file}: key `pin`: a pinned task needs its imported files in a data directory. "
            f'Fix: add data = "data" (the directory the import wrote)'
        )
    for k in ("path", "commit", "ref", "image", "image_digest"):
        if k in raw and not isinstance(raw[k], str):
            raise err(k, f"expected a string, got {type(raw[k]).__name__}", "write it as a quoted string")
    if "dirty" in raw and not isinstance(raw["dirty"], bool):
        raise err("dirty", "expected true or false", "write dirty = true, or remove the key")
    image_from = raw.get("image_from", "none")
    if image_from not in IMAGE_FROM:
        raise err("image_from", f"{image_from!r} is not known", f"use one of {', '.join(IMAGE_FROM)}")
    files = raw.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise err("files", 'must be a table of "path" = "sha256:…"', "re-import the task to regenerate it")
    return Pin(
        format=raw["format"],
        source=raw["source"],
        content_hash=raw["content_hash"],
        path=raw.get("path", ""),
        commit=raw.get("commit"),
        ref=raw.get("ref"),
        dirty=bool(raw.get("dirty", False)),
        image=raw.get("image"),
        image_from=image_from,
        image_digest=raw.get("image_digest"),
        files=dict(files),
    )


# ---- verification (called by benchctl run) -------------------------------------------------


@dataclass
class PinCheck:
    changed: list[str] = field(default_factory=list)  # present in both, different digest
    added: list[str] = field(default_factory=list)  # present now, not in the pin
    removed: list[str] = field(default_factory=list)  # in the pin, missing now
    note: str = ""  # when the files table cannot name the change

    @property
    def ok(self) -> bool:
        return not (self.changed or self.added or self.removed or self.note)

    def paths(self) -> list[str]:
        return [*self.changed, *self.added, *self.removed]

    def describe(self, limit: int = 20) -> str:
        parts = []
        for label, items in (("changed", self.changed), ("added", self.added), ("removed", self.removed)):
            if items:
                shown = ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")
                parts.append(f"{label}: {shown}")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verified": self.ok,
            "changed": self.changed,
            "added": self.added,
            "removed": self.removed,
            "note": self.note or None,
        }


def verify(pin: Pin, data_dir: Path) -> PinCheck:
    """Compare the data directory with its pin."""
    now = file_digests(data_dir)
    if content_hash(now) == pin.content_hash:
        return PinCheck()
    check = PinCheck(
        changed=sorted(p for p in now if p in pin.files and pin.files[p] != now[p]),
        added=sorted(p for p in now if p not in pin.files),
        removed=sorted(p for p in pin.files if p not in now),
    )
    if check.ok:
        check.note = (
            "the files match [pin.files] but not pin.content_hash: the [pin] table was edited"
            if pin.files
            else "the content hash differs and the pin lists no files to name the change"
        )
    return check
