"""Harbor tasks -> staged audit tasks.

A Harbor task is a directory with `task.toml`, `instruction.md`, `environment/` (a Dockerfile, or
docker-compose.yaml, and the files it copies), `tests/` (`test.sh`, which writes the reward to
/logs/verifier/reward.txt or reward.json) and usually `solution/` (`solve.sh`, the oracle). The
parts of Harbor's task.toml read here (Harbor itself is not imported: it needs Python >= 3.12):

    [task] name, description                 (newer schema; the directory name is the task's name)
    [environment] docker_image               a prebuilt image instead of building environment/
    [environment] build_timeout_sec
    [verifier] timeout_sec, user, env        how tests/test.sh is run
    [agent] user                             who the agent (and so the reference solution) runs as

The whole task directory becomes the audit task's data, unchanged: the packaging is part of what
is audited (a solution copied into the image, tests that read agent-writable files, a verifier
that never fails, ...).
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

from benchctl.layout import slug
from benchctl.task_import.source import Source, ignore_skipped, skipped
from benchctl.task_import.write import ImportError_, StagedTask

TASK_TOML = "task.toml"
INSTRUCTION = "instruction.md"
MAX_DEPTH = 6
DEFAULT_VERIFIER_TIMEOUT = 600.0


def is_task_dir(p: Path) -> bool:
    return (p / TASK_TOML).is_file() and (p / INSTRUCTION).is_file()


def find_tasks(root: Path) -> list[Path]:
    """`root` itself when it is a Harbor task, else every task directory below it (not inside another
    task, hidden and cache directories skipped), in path order."""
    if root.is_file():
        raise ImportError_(f"{root} is a file; a Harbor task is a directory with {TASK_TOML} and {INSTRUCTION}")
    if is_task_dir(root):
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not skipped(d))
        if here != root and is_task_dir(here):
            found.append(here)
            dirnames[:] = []
        elif depth >= MAX_DEPTH:
            dirnames[:] = []
    return sorted(found, key=lambda p: p.as_posix())


def _read_config(task: Path) -> dict[str, Any]:
    file = task / TASK_TOML
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ImportError_(f"{file}: not valid TOML ({e}). Fix: correct the Harbor task file") from None
    for key in ("task", "environment", "verifier", "agent", "metadata"):
        if key in raw and not isinstance(raw[key], dict):
            raise ImportError_(f"{file}: [{key}] must be a table in a Harbor task.toml")
    return raw


def _number(table: dict[str, Any], key: str, default: float) -> float:
    v = table.get(key, default)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else default


def _literal_env(env: Any, notes: list[str], where: str) -> dict[str, str]:
    """Verifier environment values written in the task. Templated ones (`${VAR}`) would be filled
    from the host's environment by Harbor; benchctl never passes host variables into a sandbox."""
    out: dict[str, str] = {}
    if not isinstance(env, dict):
        return out
    for k, v in env.items():
        if isinstance(v, (str, int, float, bool)) and "${" not in str(v):
            out[str(k)] = str(v)
        else:
            notes.append(
                f"{where}: verifier env {k} = {v!r} is filled from the host by Harbor; benchctl does not "
                f"pass it to run_task_tests"
            )
    return out


def stage(task: Path, source: Source, name: str | None = None) -> StagedTask:
    raw = _read_config(task)
    meta = raw.get("task", {}) if isinstance(raw.get("task"), dict) else {}
    env = raw.get("environment", {})
    verifier = raw.get("verifier", {})
    agent = raw.get("agent", {})
    task_name = slug(name or task.name)
    notes: list[str] = []
    description = str(meta.get("description") or raw.get("metadata", {}).get("description") or "").strip()
    harbor_name = str(meta.get("name") or task.name)
    staged = StagedTask(
        name=task_name,
        format="harbor",
        source_path=source.relative(task),
        description=f"Audit of the Harbor task {harbor_name}" + (f": {description}" if description else ""),
        fill_data=lambda data: shutil.copytree(task, data, symlinks=True, ignore=ignore_skipped, dirs_exist_ok=True),
        build_timeout=_number(env, "build_timeout_sec", 600.0),
        notes=notes,
    )
    if isinstance(env.get("docker_image"), str) and env["docker_image"]:
        staged.image, staged.image_from = env["docker_image"], "docker_image"
    elif (task / "environment" / "Dockerfile").is_file():
        staged.image_from, staged.build_context = "dockerfile", "environment"
    elif any(
        (task / "environment" / f).is_file() for f in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml")
    ):
        staged.image_from = "compose"
        notes.append(f"{task.name}: a docker-compose environment is not built by benchctl; the audit will be static")
    else:
        notes.append(f"{task.name}: no environment/Dockerfile and no docker_image; the audit will be static")
    if (task / "tests" / "test.sh").is_file():
        staged.task_tests = {
            "kind": "harbor",
            "image": staged.image or "",
            "tests": "tests",
            "solution": "solution" if (task / "solution" / "solve.sh").is_file() else "",
            "timeout": _number(verifier, "timeout_sec", DEFAULT_VERIFIER_TIMEOUT),
            "user": str(verifier.get("user") or "root"),
            "agent_user": str(agent.get("user") or "root"),
            "env": _literal_env(verifier.get("env", {}), notes, task.name),
        }
    else:
        notes.append(f"{task.name}: no tests/test.sh; run_task_tests is not offered")
    return staged


def stage_all(source: Source, name: str | None, only: list[str]) -> tuple[list[StagedTask], bool]:
    """Every Harbor task in the source -> (staged tasks, is_suite). `only` filters by directory name."""
    tasks = find_tasks(source.path)
    if not tasks:
        raise ImportError_(
            f"{source.origin}: no Harbor task found (a directory with {TASK_TOML} and {INSTRUCTION}, "
            f"up to {MAX_DEPTH} levels down)"
        )
    suite = not (len(tasks) == 1 and tasks[0] == source.path)
    if only:
        tasks = [t for t in tasks if t.name in only or slug(t.name) in only]
        missing = sorted(set(only) - {t.name for t in tasks} - {slug(t.name) for t in tasks})
        if missing:
            raise ImportError_(f"--only {', '.join(missing)}: no such task in {source.origin}")
    if len(tasks) > 1 and name:
        raise ImportError_(
            "--name renames one task; pick it with --only (a suite's tasks are named after their directories)"
        )
    staged = [stage(t, source, name) for t in tasks]
    _unique_names(staged)
    return staged, suite


def _unique_names(staged: list[StagedTask]) -> None:
    """Two task directories with the same name (a/x, b/x) get their parent's name prefixed."""
    counts: dict[str, int] = {}
    for s in staged:
        counts[s.name] = counts.get(s.name, 0) + 1
    for s in staged:
        if counts[s.name] > 1:
            s.name = slug(s.source_path.replace("/", "-")) or s.name
    names = [s.name for s in staged]
    if len(set(names)) != len(names):
        raise ImportError_(
            f"task names clash after renaming: {sorted(names)}; import them separately with --only and --name"
        )
