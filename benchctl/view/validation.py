"""The target-validation pages' data: every `benchctl targets validate` output under
RESULTS/validation/<name>/ (validation.json, study.json, confession.jsonl, strength.jsonl).

A name from a URL is one plain directory name under validation/ (no symlink, like run ids in
paths.py); only regular files in it are read. Replies, prompts and the judge's reasons are model
text: the template escapes them and never renders them as markup.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import orjson

from benchctl.view.paths import NotFound

VALIDATION_DIR = "validation"
MEASURES = (
    ("confession", "prompts", "confession: prompts"),
    ("confession", "prefills", "confession: prefills"),
    ("strength", "target", "behaviour strength: target"),
    ("strength", "baseline", "behaviour strength: baseline"),
)
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
BAR_WIDTH = 300


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _json(path: str) -> Any:
    if not _regular(path):
        return None
    try:
        with open(path, "rb") as f:
            return orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None


def _jsonl(path: str) -> list[dict[str, Any]]:
    if not _regular(path):
        return []
    out = []
    with open(path, "rb") as f:
        for line in f:
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(row, dict):
                out.append(row)
    return out


def names(root: str) -> list[str]:
    """The validation directories (those holding a validation.json), sorted."""
    base = os.path.join(root, VALIDATION_DIR)
    try:
        if not stat.S_ISDIR(os.lstat(base).st_mode):
            return []
        with os.scandir(base) as it:
            found = [e.name for e in it if e.is_dir(follow_symlinks=False) and _NAME.fullmatch(e.name)]
    except OSError:
        return []
    return sorted(n for n in found if _regular(os.path.join(base, n, "validation.json")))


def _bar(r: Any) -> dict[str, Any] | None:
    """A RATE with its x positions on a 0-100 % bar (None when not measured)."""
    if not isinstance(r, dict):
        return None

    def x(v: Any) -> float | None:
        return round(float(v) * BAR_WIDTH, 1) if isinstance(v, (int, float)) else None

    return {**r, "x_rate": x(r.get("rate")), "x_lo": x(r.get("lo")), "x_hi": x(r.get("hi"))}


def summary(root: str, name: str) -> dict[str, Any]:
    d = os.path.join(root, VALIDATION_DIR, name)
    v = _json(os.path.join(d, "validation.json"))
    study = _json(os.path.join(d, "study.json"))
    v = v if isinstance(v, dict) else {}
    rates: list[dict[str, Any]] = []
    for part, key, label in MEASURES:
        section = v.get(part)
        rate = _bar(section.get(key)) if isinstance(section, dict) else None
        rates.append({"key": f"{part}_{key}", "label": label, "rate": rate})
    base = rates[-1]["rate"]  # strength: baseline
    return {
        "name": name,
        "study": study if isinstance(study, dict) else {},
        "rates": rates,
        "x_baseline": base["x_rate"] if base else None,  # the untrained reference, drawn on every strength bar
        "readable": bool(v),
        "bar_width": BAR_WIDTH,
    }


def detail(root: str, name: str) -> dict[str, Any]:
    if not _NAME.fullmatch(name) or name not in names(root):
        raise NotFound(f"no target validation {name!r} under {VALIDATION_DIR}/")
    d = os.path.join(root, VALIDATION_DIR, name)
    return summary(root, name) | {
        "confession": _jsonl(os.path.join(d, "confession.jsonl")),
        "strength": _jsonl(os.path.join(d, "strength.jsonl")),
    }
