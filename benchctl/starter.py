"""`benchctl tasks new NAME`: a starter task directory that `benchctl run` accepts as it is.

The files are `benchctl/starter_task/` (a commented task.toml, example evidence in data/, an
example rubric in grading/), copied with the task's name filled in.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from benchctl.tasks import TASK_FILE, is_task_name, load_task

TEMPLATE = Path(__file__).resolve().parent / "starter_task"


class StarterError(ValueError):
    """The starter task cannot be written here; the message says why and what to do."""


def write_starter_task(dest: Path) -> list[Path]:
    """Write the starter task into `dest` (new or empty); its name is the directory's name.
    Returns the files written. The result is loaded as `benchctl run` loads it before returning."""
    name = dest.resolve().name
    if not is_task_name(name):
        raise StarterError(
            f"{name!r} is not a usable task name (it names the task in every run id): "
            "use letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise StarterError(f"{dest} already exists and is not an empty directory; choose a new name")
    shutil.copytree(TEMPLATE, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    task_file = dest / TASK_FILE
    text = task_file.read_text(encoding="utf-8")
    task_file.write_text(text.replace("{{name}}", name).replace("{{path}}", str(dest)), encoding="utf-8")
    load_task(dest)  # the promise: `benchctl run` accepts it as it is
    return sorted(p for p in dest.rglob("*") if p.is_file())
