"""What `benchctl run` checks of an imported task before anything starts, and what a run records.

    check_before_run(task, allow_changed)   # benchctl.run.config: PinChanged (exit 2) when data/ left its pin
    pin_meta(task)                          # runner: meta.json["pin"] = the pin + what was verified

A task without a [pin] passes unchanged; the [task_tests] table is parsed here too, so a broken
one fails before any run starts rather than inside each run.
"""

from __future__ import annotations

import sys
from typing import Any

from benchctl.task_import.open_book import load_config
from benchctl.task_import.pin import PinCheck, verify


class PinChanged(ValueError):
    pass


def _check(task: Any) -> PinCheck:
    return verify(task.pin, task.data_dir)


def check_before_run(task: Any, allow_changed: bool = False) -> PinCheck | None:
    load_config(task.task_file)  # raises TaskTestsError (a ValueError) naming the key
    if task.pin is None:
        return None
    check = _check(task)
    if check.ok:
        return check
    where = task.pin.source + (f" at {task.pin.commit[:12]}" if task.pin.commit else "")
    if not allow_changed:
        raise PinChanged(
            f"{task.task_dir}: the imported files no longer match their pin ({check.describe()}); "
            f"they were imported from {where}. Fix: re-import the task (benchctl tasks import "
            f"{task.pin.format} ...), undo the change, or pass --allow-changed to run it anyway "
            f"(the runs record what changed)"
        )
    print(
        f"warning: {task.task_dir}: running with files that differ from their pin ({check.describe()}); "
        f"each run's meta.json records it",
        file=sys.stderr,
    )
    return check


def pin_meta(task: Any) -> dict[str, Any] | None:
    if task.pin is None:
        return None
    return {**task.pin.summary(), **_check(task).to_dict()}
