"""Who plays: runs -> environments and auditors.

env = the run's task, plus "~<variant>" when it has a data variant (a variant changes what there is
to find, so it is its own environment).

auditor = the meta.json fields named by the auditor key, joined with " + ": "model" (default),
"model+harness", "model+budget", "model+harness+budget", ... Fields: task, harness, model, budget,
variant, tools, seed. The same fields are stored in each canonical list's `runs`, so ratings can be
refitted (with any auditor key) even if a run directory is gone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl.grading.config import TournamentSettings
from benchctl.layout import GRADED_STATUSES, iter_runs

AUDITOR_FIELDS = ("task", "harness", "model", "budget", "variant", "tools", "seed")


@dataclass
class Participant:
    run_id: str
    path: Path | None
    env: str
    info: dict[str, Any]  # the AUDITOR_FIELDS values, as stored in canonical `runs`
    cost_usd: float | None
    artifact: str | None = None  # the task's [grading] artifact, tried after issues.json
    task_dir: str | None = None  # meta spec.task_dir: where the environment's task is (for its verifier)
    settings: TournamentSettings = TournamentSettings()  # the task's [grading.tournament]


def run_info(meta: Mapping[str, Any]) -> dict[str, Any]:
    spec = meta.get("spec") or {}
    return {f: meta.get(f, spec.get(f)) for f in AUDITOR_FIELDS}


def env_of(info: Mapping[str, Any]) -> str:
    task = info.get("task")
    if not task:
        raise ValueError("run has no 'task' in meta.json; it cannot be placed in an environment")
    variant = info.get("variant")
    return f"{task}~{variant}" if variant else str(task)


def parse_auditor_key(key: str) -> list[str]:
    fields = [f.strip() for f in key.split("+") if f.strip()]
    bad = [f for f in fields if f not in AUDITOR_FIELDS]
    if not fields or bad:
        raise ValueError(
            f"auditor key {key!r}: unknown field(s) {bad or [key]}; use fields from "
            f"{', '.join(AUDITOR_FIELDS)} joined by '+', e.g. 'model' or 'model+harness'"
        )
    return fields


def auditor_label(info: Mapping[str, Any], key: str) -> str:
    return " + ".join(str(info.get(f)) if info.get(f) is not None else "-" for f in parse_auditor_key(key))


def collect(results: Path, tasks: Collection[str] | None = None) -> list[Participant]:
    """Finished runs (completed / timeout / refused); runs with status `error` are infrastructure
    failures and are left out.

    tasks=None picks the tournament tasks itself: a run whose task.toml (meta spec.task_dir) lists
    "tournament" in [grading] graders is in, one whose task.toml does not is out, one whose task.toml
    cannot be found is in. If no run's task.toml lists "tournament" (the grader was asked for on the
    command line), every finished run is in."""
    found: list[tuple[Participant, bool | None]] = []
    configs: dict[str | None, tuple[bool | None, str | None, TournamentSettings]] = {}  # by task_dir
    for path, meta in iter_runs(results):
        if meta.get("status") not in GRADED_STATUSES:
            continue
        info = run_info(meta)
        if tasks is not None and info.get("task") not in tasks:
            continue
        task_dir = (meta.get("spec") or {}).get("task_dir")
        if task_dir not in configs:
            configs[task_dir] = _task_grading(task_dir)
        declares, artifact, settings = configs[task_dir]
        found.append(
            (
                Participant(
                    run_id=path.name,
                    path=path,
                    env=env_of(info),
                    info=info,
                    cost_usd=meta.get("cost_usd"),
                    artifact=artifact,
                    task_dir=task_dir,
                    settings=settings,
                ),
                declares,
            )
        )
    if tasks is None and any(d for _, d in found):
        return [p for p, d in found if d is not False]
    return [p for p, _ in found]


def _task_grading(task_dir: str | None) -> tuple[bool | None, str | None, TournamentSettings]:
    """(does the task's [grading] list "tournament"?, its artifact, its [grading.tournament]) --
    (None, None, the defaults) when unknown."""
    if not task_dir:
        return None, None, TournamentSettings()
    try:
        from benchctl.grading.graders import load_grading

        cfg = load_grading(Path(task_dir))
    except Exception:  # task moved or unreadable: grading still works from the run's own files
        return None, None, TournamentSettings()
    return "tournament" in cfg.graders, cfg.artifact, cfg.tournament
