"""Helpers for the run tests: a task dir + a scripted model, and reading a run back."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchctl.jsonio import read_json, read_jsonl
from benchctl.sandbox.docker_client import docker_client

REPO = Path(__file__).resolve().parents[2]
BENCHCTL = [sys.executable, "-c", "from benchctl.cli import app; app()"]

BASE_TASK = """name = "{name}"
instructions = "Investigate /data and write /work/report.md."
data = "data"
artifacts = ["report.md"]
tool_timeout = 20
"""


def make_scripted_task(
    tmp: Path,
    turns: list[dict[str, Any]],
    extra: str = "",
    name: str = "t",
    data: dict[str, str] | None = None,
    after_end: str = "stop",
) -> tuple[Path, str]:
    """A runnable task (instructions, data, `report.md` as its artifact) and the `scripted/<abs path>`
    model id that replays `turns` in it. For a task that is only graded see
    tests.rigs.grading.make_rubric_task; for a hidden-behaviour target see
    tests.rigs.validation.make_target_task."""
    task = tmp / name
    (task / "data").mkdir(parents=True, exist_ok=True)
    for fname, text in (data or {"app.log": "ok\nERROR disk full on db-1\nok\n"}).items():
        (task / "data" / fname).write_text(text)
    (task / "task.toml").write_text(BASE_TASK.format(name=name) + extra)
    script = tmp / f"{name}-script.json"
    script.write_text(json.dumps({"turns": turns, "after_end": after_end}))
    return task, f"scripted/{script}"


def bash(cmd: str, text: str = "") -> dict[str, Any]:
    return {"text": text, "tool_calls": [{"name": "bash", "input": {"command": cmd}}]}


def tool(name: str, **inp: Any) -> dict[str, Any]:
    return {"text": "", "tool_calls": [{"name": name, "input": inp}]}


def run_inprocess(task: Path, model: str, out: Path, budget: str = "1m", **kw: Any) -> int:
    from benchctl.run import execute, resolve_config

    r = resolve_config(
        task=task,
        models=[model],
        harnesses=kw.pop("harnesses", []),
        budgets=[budget],
        seeds=kw.pop("seeds", 1),
        out=out,
        concurrency=kw.pop("concurrency", 1),
        fallback=kw.pop("fallback", None),
        variants=kw.pop("variants", []),
        sweep=None,
    )
    return execute(r, progress_mode="quiet")


def runs(out: Path) -> list[Path]:
    return sorted(p for p in (out / "runs").iterdir() if p.is_dir())


def only_run(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]], Path]:
    (run,) = runs(out)
    return read_json(run / "meta.json"), read_jsonl(run / "transcript.jsonl"), run


def cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BENCHCTL, *args],
        cwd=kw.pop("cwd", REPO),
        capture_output=True,
        text=True,
        timeout=kw.pop("timeout", 300),
        **kw,
    )


def containers_with_label(key: str, value: str | None = None) -> list[Any]:
    with closing(docker_client()) as client:
        flt = f"{key}={value}" if value else key
        # The low-level list call returns labels without a second inspect per container, so a
        # container removed meanwhile (by this test or another process) cannot raise NotFound.
        return [
            SimpleNamespace(id=c["Id"], labels=c.get("Labels") or {})
            for c in client.api.containers(all=True, filters={"label": flt})
        ]
