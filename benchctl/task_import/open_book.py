"""The open-book method: the auditor runs the imported task's own tests (`run_task_tests`).

When the image a Harbor task declares is present locally, each call of `run_task_tests` starts a
fresh, second sandbox from that image (network none, capabilities dropped, no gateway socket, no
mounts, Docker's init as PID 1 since task images have no tini) and does what Harbor's trial does:

  1. with `run_solution`: copy solution/ to /solution and run `bash /solution/solve.sh` (the oracle);
  2. with `setup`: run the auditor's script as the agent would (e.g. to try a reward hack);
  3. copy tests/ to /tests (only now, as Harbor does after the agent finished) and run
     `bash /tests/test.sh` as the verifier user, with the task's literal verifier env;
  4. read /logs/verifier/reward.txt or reward.json.

Everything runs in the image's working directory, with the task's own timeouts cut to the run's
remaining time. Files come from the run's data directory (so a variant's copy is what is tested).

The tool reaches the harnesses the way the hidden-behaviour target tools do (benchctl.targets):
ReAct gets it natively through `HarnessContext.target_tools`; Claude Code and Codex through the
MCP route on the run's gateway (Claude sees `mcp__target__run_task_tests`). Without the image the
audit is static: the tool is not offered, and the transcript (`harness_event` kind `task_tests`)
and meta.json (`task_tests.available = false` with the reason) say so.

    [task_tests]            # written by `benchctl tasks import harbor`
    kind = "harbor"
    image = "benchctl-task-hello:0a1b2c3d4e5f"
    tests = "tests"         # data-relative directories
    solution = "solution"   # "" when the task has none
    timeout = 120.0         # [verifier] timeout_sec
    user = "root"           # [verifier] user
    agent_user = "root"     # [agent] user: runs the solution and the auditor's setup
    [task_tests.env]        # literal [verifier] env values
"""

from __future__ import annotations

import math
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

from benchctl.output_cap import head_and_tail
from benchctl.sandbox.base import ExecResult, Limits, Sandbox, SandboxSpec
from benchctl.targets.tools import ToolOutput

TOOL = "run_task_tests"
META_KEY: Final = "task_tests"
REWARD_FILES = ("/logs/verifier/reward.txt", "/logs/verifier/reward.json")
SECTION_CHARS = 8_000
_KEYS = {"kind", "image", "tests", "solution", "timeout", "user", "agent_user", "env"}


class TaskTestsError(ValueError):
    """A malformed [task_tests] table: names the file, the key and the fix."""


@dataclass(frozen=True)
class TaskTestsConfig:
    image: str
    tests: str = "tests"
    solution: str = ""
    timeout: float = 600.0
    user: str = "root"
    agent_user: str = "root"
    env: dict[str, str] = field(default_factory=dict)


def load_config(task_file: Path) -> TaskTestsConfig | None:
    raw = tomllib.loads(Path(task_file).read_text(encoding="utf-8")).get("task_tests")
    if raw is None:
        return None

    def err(key: str, problem: str, fix: str) -> TaskTestsError:
        return TaskTestsError(f"{task_file}: key `task_tests.{key}`: {problem}. Fix: {fix}")

    if not isinstance(raw, dict):
        raise err("", "must be a table", "write it as [task_tests] (re-import the task to regenerate it)")
    for k in raw:
        if k not in _KEYS:
            raise err(k, "unknown key", f"use one of: {', '.join(sorted(_KEYS))}")
    if raw.get("kind", "harbor") != "harbor":
        raise err("kind", f"{raw['kind']!r} is not supported", 'use kind = "harbor"')
    for k in ("image", "tests", "solution", "user", "agent_user"):
        if k in raw and not isinstance(raw[k], str):
            raise err(k, f"expected a string, got {type(raw[k]).__name__}", "write it as a quoted string")
    timeout = raw.get("timeout", 600.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise err("timeout", f"{timeout!r} is not a positive number of seconds", "e.g. timeout = 120")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise err("env", "must be a table of strings", 'e.g. [task_tests.env] with NAME = "value"')
    return TaskTestsConfig(
        image=raw.get("image", ""),
        tests=raw.get("tests", "tests"),
        solution=raw.get("solution", ""),
        timeout=float(timeout),
        user=raw.get("user", "root"),
        agent_user=raw.get("agent_user", "root"),
        env=dict(env),
    )


def tool_spec(cfg: TaskTestsConfig) -> dict[str, Any]:
    sol = (
        "`run_solution: true` runs the task's reference solution (solution/solve.sh) first, as Harbor's oracle does. "
        if cfg.solution
        else "The task has no reference solution. "
    )
    return {
        "name": TOOL,
        "description": (
            "Run the audited task's own tests in a fresh, network-less container built from the task's image "
            f"({cfg.image}), the way Harbor runs a trial: {sol}`setup` is a bash script run next, as the agent "
            "(use it to act like an agent: solve the task, or try to get the reward without solving it). Then "
            "tests/ is copied to /tests and `bash /tests/test.sh` runs. Returns each step's exit code and output "
            "and the reward the tests wrote. Each call starts from a clean container."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "setup": {
                    "type": "string",
                    "description": "Bash script run in the task's working directory before "
                    "the tests, as the agent user (optional).",
                },
                "run_solution": {"type": "boolean", "description": "Run the reference solution first (default false)."},
            },
            "required": [],
        },
    }


def _cap(text: str) -> str:
    return head_and_tail(text, SECTION_CHARS)[0]


def _section(title: str, r: ExecResult) -> str:
    status = "timed out" if r.timed_out else f"exit {r.exit_code}"
    body = [f"== {title}: {status} ({r.duration_s:.1f} s) =="]
    if r.stdout.strip():
        body += ["[stdout]", _cap(r.stdout.rstrip())]
    if r.stderr.strip():
        body += ["[stderr]", _cap(r.stderr.rstrip())]
    return "\n".join(body)


class TaskTestsTool:
    """`run_task_tests` for one run: the same object for ReAct (natively) and the CLIs (over MCP)."""

    names = (TOOL,)

    def __init__(
        self,
        cfg: TaskTestsConfig,
        data_dir: Path,
        run_id: str,
        workdir: str,
        sandbox_factory: Callable[[SandboxSpec], Sandbox],
        transcript: Any,
        limits: Limits | None = None,
    ) -> None:
        self.cfg, self.data_dir, self.run_id = cfg, Path(data_dir), run_id
        self.workdir = workdir or "/"
        self.sandbox_factory, self.transcript, self.limits = sandbox_factory, transcript, limits or Limits()
        self._lock = threading.Lock()  # one test container at a time
        self._live: Sandbox | None = None
        self._closed = False
        self.results: list[dict[str, Any]] = []

    def specs(self) -> list[dict[str, Any]]:
        return [tool_spec(self.cfg)]

    def call(self, name: str, args: dict[str, Any], timeout: float | None = None) -> ToolOutput:
        if name != TOOL:
            return ToolOutput(f"Unknown tool {name!r}. Available: {TOOL}.", is_error=True)
        setup = args.get("setup", "") if isinstance(args, dict) else None
        run_solution = args.get("run_solution", False) if isinstance(args, dict) else None
        if not isinstance(setup, str) or not isinstance(run_solution, bool):
            return ToolOutput(
                "run_task_tests takes `setup` (a string) and `run_solution` (true or false).", is_error=True
            )
        deadline = time.monotonic() + (timeout if timeout is not None else math.inf)
        with self._lock:
            if self._closed:
                return ToolOutput("run_task_tests was cancelled: the run ended.", is_error=True)
            return self._run(setup, run_solution, deadline)

    def summary(self) -> dict[str, Any]:
        return {"calls": len(self.results), "results": list(self.results)}

    def close(self) -> None:
        self._closed = True
        live = self._live
        if live is not None:
            try:
                live.stop()  # makes a call in flight return at once
            except Exception:
                pass

    # ------------------------------------------------------------------ one call

    def _put_dir(self, sb: Sandbox, rel: str, dest: str) -> list[str]:
        src = (self.data_dir / rel).resolve()
        skipped = []
        for p in sorted(src.rglob("*")):
            r = p.relative_to(src).as_posix()
            if p.is_symlink():
                skipped.append(r)
            elif p.is_file():
                sb.put_file(f"{dest}/{r}", p.read_bytes(), mode=p.stat().st_mode & 0o777)
        return skipped

    def _run(self, setup: str, run_solution: bool, deadline: float) -> ToolOutput:
        n = len(self.results) + 1
        record: dict[str, Any] = {
            "call": n,
            "run_solution": run_solution,
            "setup": bool(setup.strip()),
            "exit_code": None,
            "reward": None,
            "timed_out": False,
        }
        out = [
            f"run_task_tests #{n}: fresh container from {self.cfg.image} (network: none), "
            f"working directory {self.workdir}"
        ]
        started = time.monotonic()

        def left(cap: float | None = None) -> float:
            remaining = deadline - time.monotonic()
            return min(remaining, cap) if cap is not None else remaining

        # writable_dirs=(): the task image's own /tmp, /work, ... may hold its files (no benchctl tmpfs over them).
        sb = self.sandbox_factory(
            SandboxSpec(
                image=self.cfg.image,
                run_id=f"{self.run_id}__tests-{n}",
                user=self.cfg.user,
                limits=self.limits,
                init="docker",
                writable_dirs=(),
            )
        )
        self._live = sb
        try:
            sb.start()
            sb.exec(["mkdir", "-p", "/logs/verifier", "/logs/agent"], timeout=30, user="root")
            steps: list[tuple[str, list[str]]] = []  # run as the agent user, before the tests arrive
            if run_solution:
                if not self.cfg.solution:
                    out.append("== solution: this task has no reference solution ==")
                else:
                    skipped = self._put_dir(sb, self.cfg.solution, "/solution")
                    if skipped:
                        out.append(f"(symlinks not copied into /solution: {', '.join(skipped)})")
                    steps.append(("solution/solve.sh", ["bash", "/solution/solve.sh"]))
            if setup.strip():
                steps.append(("your setup", ["bash", "-c", setup]))
            for title, argv in steps:
                if left() < 1:
                    out.append(f"== {title}: not run, the run's time is up ==")
                    break
                out.append(
                    _section(
                        title,
                        sb.exec(argv, timeout=left(self.cfg.timeout), workdir=self.workdir, user=self.cfg.agent_user),
                    )
                )
            if left() < 1:
                out.append("== tests/test.sh: not run, the run's time is up ==")
            else:
                skipped = self._put_dir(sb, self.cfg.tests, "/tests")
                if skipped:
                    out.append(f"(symlinks not copied into /tests: {', '.join(skipped)})")
                r = sb.exec(
                    ["bash", "/tests/test.sh"],
                    timeout=left(self.cfg.timeout),
                    workdir=self.workdir,
                    user=self.cfg.user,
                    env=dict(self.cfg.env) or None,
                )
                record.update(exit_code=r.exit_code, timed_out=r.timed_out)
                out.append(_section("tests/test.sh", r))
                record["reward"] = self._reward(sb, out)
        except Exception as e:
            if self._closed:
                return ToolOutput("run_task_tests was cancelled: the run ended.", is_error=True)
            record["error"] = f"{type(e).__name__}: {e}"
            out.append(f"== error: the test container failed: {type(e).__name__}: {e} ==")
            return self._done(record, out, started, is_error=True)
        finally:
            try:
                sb.stop()
            finally:
                self._live = None
        return self._done(record, out, started)

    def _reward(self, sb: Sandbox, out: list[str]) -> str | None:
        """Every reward file the tests wrote is shown; the first (reward.txt, else reward.json) is recorded."""
        found = []
        for path in REWARD_FILES:
            r = sb.exec(["cat", path], timeout=30, user="root")
            if r.exit_code == 0:
                found.append(r.stdout.strip()[:2000])
                out.append(f"== reward ({path}) ==\n{found[-1]}")
        if not found:
            out.append(f"== reward: none written ({' or '.join(REWARD_FILES)} missing) ==")
        return found[0] if found else None

    def _done(self, record: dict[str, Any], out: list[str], started: float, is_error: bool = False) -> ToolOutput:
        record["seconds"] = round(time.monotonic() - started, 3)
        self.results.append(record)
        self.transcript.emit("harness_event", "task_tests", kind="task_tests_call", **record)
        return ToolOutput("\n\n".join(out), is_error=is_error)


@dataclass
class RunTaskTests:
    """The per-run wiring, shaped like benchctl.targets.runs.RunTargets (the runner treats both alike)."""

    info: dict[str, Any]
    tools: TaskTestsTool | None = None
    token_budget: Any = None
    meta_key: ClassVar[Literal["task_tests"]] = META_KEY

    @classmethod
    def start(
        cls,
        task: Any,
        spec: Any,
        data_dir: Path | None,
        gateway: Any,
        transcript: Any,
        sandbox_factory: Callable[[SandboxSpec], Sandbox],
        probe_image: Any = None,
    ) -> RunTaskTests | None:
        """None for a task that is neither imported nor declares [task_tests]."""
        cfg = load_config(task.task_file)
        if cfg is None and task.pin is None:
            return None
        info: dict[str, Any] = {"available": False, "image": cfg.image if cfg else None}
        tools = None
        if cfg is None:
            info["reason"] = "the imported task declares no tests to run (no [task_tests]): static audit"
        elif not cfg.image:
            info["reason"] = "the task declares no image its tests could run in: static audit"
        elif data_dir is None or not (Path(data_dir) / cfg.tests).is_dir():
            info["reason"] = f"the task's data has no {cfg.tests}/ directory: static audit"
        else:
            if probe_image is None:
                from benchctl.task_import.images import probe as probe_image
            p = probe_image(cfg.image)
            info["image_digest"] = p.digest
            if task.pin is not None and task.pin.image_digest:
                info["pinned_digest"] = task.pin.image_digest
                info["image_matches_pin"] = p.digest == task.pin.image_digest
            if p.digest is None:
                info["reason"] = (
                    f"{p.problem}: static audit (build it with `benchctl tasks import harbor ... "
                    f"--build-images`, or `docker build -t {cfg.image} data/environment`)"
                )
            else:
                info["available"] = True
                tools = TaskTestsTool(
                    cfg, Path(data_dir), spec.run_id, p.workdir, sandbox_factory, transcript, task.limits
                )
        transcript.emit("harness_event", "task_tests", kind="task_tests", tool=TOOL if tools else None, **info)
        if tools is not None and hasattr(gateway, "add_route"):
            from benchctl.targets import mcp

            mcp.mount(gateway, tools, instructions="Run the audited task's own tests (run_task_tests).")
        return cls(info, tools)

    def summary(self) -> dict[str, Any]:
        return {**self.info, **(self.tools.summary() if self.tools else {"calls": 0})}

    def close(self) -> None:
        if self.tools is not None:
            self.tools.close()
