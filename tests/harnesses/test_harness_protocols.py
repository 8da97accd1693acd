"""The protocols of HarnessContext's objects (benchctl/harness.py: HarnessGateway, HostTools,
CostStop) hold for the real objects the runner puts there, and harness code uses nothing else.

Two checks, each catching what the other cannot: mypy over tests/rigs/harness_protocols.py (the
real classes assigned to the protocols, fakes each wrong in one way), harnesses/ and the runner
body that builds the context — types, and any member a harness uses that a protocol lacks; and at
run time, isinstance (runtime_checkable: every member is there) plus a comparison of each method's
parameters with inspect.signature, on real objects and on the same fakes — parameter names, which
mypy does not compare (a real `call(..., deadline=)` would pass it, and ReAct calls `timeout=`).
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchctl.gateway.server import Gateway, GatewayConfig
from benchctl.harness import CostStop, HarnessGateway, HostTools
from benchctl.limits.run import RunStop
from benchctl.sandbox.base import Sandbox, SandboxSpec
from benchctl.targets.spec import TargetSpec, parse_tools
from benchctl.targets.tools import TargetTools
from benchctl.task_import.open_book import TaskTestsConfig, TaskTestsTool
from tests.rigs import harness_protocols as cases

REPO = Path(__file__).resolve().parents[2]
CASES = Path(cases.__file__).resolve()
PROTOCOLS = (HarnessGateway, HostTools, CostStop)
# what harness code must only use through the protocols (an error naming one is a harness using
# a member the protocol does not offer, or a real object that no longer fits)
PROTOCOL_NAMES = re.compile(r'"(HarnessGateway|HostTools|HostToolResult|CostStop)\b')
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")


def protocol_members(proto: type) -> set[str]:
    """The members a protocol declares: its methods and properties (3.11 has no public helper)."""
    return {name for name in vars(proto) if not name.startswith("_")} | set(getattr(proto, "__annotations__", {}))


def shape_mismatches(proto: type, impl: type) -> list[str]:
    """How `impl`'s methods fail to take the calls the protocol allows: a missing parameter, another
    kind or order, a default the protocol has and `impl` lacks, an extra parameter without default.
    Properties only need to be there (isinstance checks that); their types are mypy's job."""
    out = []
    for name in sorted(protocol_members(proto)):
        declared = inspect.getattr_static(proto, name)
        if isinstance(declared, property):
            continue
        have = inspect.getattr_static(impl, name, None)
        if not inspect.isfunction(have):
            out.append(f"{name}: not a method")
            continue
        want = list(inspect.signature(declared).parameters.values())[1:]  # past self
        got = list(inspect.signature(have).parameters.values())[1:]
        got_by_name = {p.name: p for p in got}
        for i, p in enumerate(want):
            q = got_by_name.get(p.name)
            if q is None:
                out.append(f"{name}: no parameter {p.name}")
            elif q.kind != p.kind or got.index(q) != i:
                out.append(
                    f"{name}: parameter {p.name} is {q.kind.description} at {got.index(q)}, "
                    f"not {p.kind.description} at {i}"
                )
            elif p.default is not inspect.Parameter.empty and q.default is inspect.Parameter.empty:
                out.append(f"{name}: parameter {p.name} has no default")
        for q in got:
            if (
                q.name not in {p.name for p in want}
                and q.default is inspect.Parameter.empty
                and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)
            ):
                out.append(f"{name}: extra parameter {q.name} without a default")
    return out


def no_sandbox(spec: SandboxSpec) -> Sandbox:
    raise AssertionError("no tool is called here")


@pytest.fixture
def real_objects(tmp_path: Path) -> Any:
    gateway = Gateway(
        GatewayConfig(model=f"scripted/{REPO / 'configs/demo/investigator.json'}", socket_path=tmp_path / "gw.sock")
    ).start()  # as the runner hands it over
    target = TargetTools(
        TargetSpec(model="scripted/py:benchctl.targets.demo:target", system_prompt="x", display_name="T"),
        parse_tools({}).configs["default"],
    )
    task_tests = TaskTestsTool(TaskTestsConfig(image="unused"), tmp_path, "r", "/work", no_sandbox, transcript=None)
    try:
        yield {HarnessGateway: [gateway], HostTools: [target, task_tests], CostStop: [RunStop()]}
    finally:
        gateway.close()
        target.close()


def test_the_real_objects_have_every_member_with_the_parameters_declared(real_objects: Any) -> None:
    for proto, objects in real_objects.items():
        assert protocol_members(proto), proto
        for obj in objects:
            assert isinstance(obj, proto), f"{type(obj).__name__} lacks a member of {proto.__name__}"
            assert shape_mismatches(proto, type(obj)) == [], type(obj).__name__
    gateway = real_objects[HarnessGateway][0]
    assert gateway.socket_path is not None and gateway.socket_path.is_socket()  # what the clients connect to


def test_fakes_missing_a_member_or_a_parameter_are_caught_at_run_time() -> None:
    assert not isinstance(cases.GatewayWithoutRefused(), HarnessGateway)
    # present but of the wrong shape: isinstance cannot see that, the parameter comparison does
    assert isinstance(cases.GatewayWithWrongTypes(), HarnessGateway)
    assert shape_mismatches(HarnessGateway, cases.GatewayWithWrongTypes) == ["set_deadline: no parameter unix_seconds"]
    assert shape_mismatches(HarnessGateway, cases.GatewayThatCannotSettle) == ["settle: no parameter timeout"]
    assert shape_mismatches(HostTools, cases.ToolsWithoutTimeout) == ["call: no parameter timeout"]
    assert shape_mismatches(CostStop, cases.StopWithFlags) == ["settled: not a method"]
    assert not isinstance(object(), CostStop)


def _mypy(cache: Path, *targets: Path) -> list[tuple[Path, int, str]]:
    """mypy's errors on `targets`. Imports of ours are followed silently (only these files' errors
    are shown); installed packages are not read (--no-site-packages: their types are not what this
    checks, and reading the SDKs takes 30 s more), so benchctl is the checkout's (MYPYPATH)."""
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-site-packages",
            "--follow-imports=silent",
            "--ignore-missing-imports",
            "--no-error-summary",
            "--hide-error-context",
            "--cache-dir",
            str(cache),
            *map(str, targets),
        ],
        cwd=REPO,
        env={**os.environ, "MYPYPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "No module named mypy" not in res.stderr, "mypy is missing: pip install -e '.[dev]'"
    assert res.returncode in (0, 1), res.stdout + res.stderr  # 2: mypy itself failed
    errors = []
    for line in res.stdout.splitlines():
        m = ERROR.match(line)
        if m:
            errors.append(((REPO / m["path"]).resolve(), int(m["line"]), m["message"]))
    return errors


def test_mypy_accepts_the_real_objects_and_harness_code_and_rejects_each_fake(tmp_path: Path) -> None:
    runner = REPO / "benchctl/executors/run_body.py"  # builds the context from the real objects
    errors = _mypy(tmp_path / "mypy-cache", CASES, REPO / "harnesses", runner)
    rejected = {i for i, line in enumerate(CASES.read_text().splitlines(), 1) if line.rstrip().endswith("# rejected")}
    assert len(rejected) == 11
    in_cases = {line: message for path, line, message in errors if path == CASES}
    assert set(in_cases) == rejected, (
        f"mypy should reject exactly the lines marked `# rejected` in {CASES.name}; it rejected "
        f"{sorted(in_cases)} instead of {sorted(rejected)}:\n"
        + "\n".join(f"{k}: {v}" for k, v in sorted(in_cases.items()))
    )
    # elsewhere, no error may involve the protocols: harness code uses only what they declare, and
    # the runner puts objects that fit into the context (the project's other mypy findings are not this test's)
    involved = [
        f"{path.relative_to(REPO)}:{line}: {message}"
        for path, line, message in errors
        if path != CASES and PROTOCOL_NAMES.search(message)
    ]
    assert involved == [], "\n".join(involved)
