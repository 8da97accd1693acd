"""Plugins by entry points (benchctl/plugins.py): a third-party harness and grader, pip-installed as a
distribution of their own (tests/plugins/tiny, tests/rigs/plugin.py), are found by name by `benchctl
doctor`, `benchctl run --harness` and `benchctl grade --grader`, exactly as the built-ins are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchctl.jsonio import read_json, read_jsonl
from benchctl.plugins import Registry, UnknownPlugin
from tests.rigs.plugin import CLASH, entry_points_txt, env_with, install, install_tiny
from tests.rigs.run import BENCHCTL, make_scripted_task, only_run


@pytest.fixture(scope="module")
def tiny_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_tiny(tmp_path_factory.mktemp("tiny"))


def benchctl(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run([*BENCHCTL, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_doctor_lists_an_installed_plugin_with_its_distribution(tiny_site: Path) -> None:
    r = benchctl(["doctor", "--json"], env=env_with(tiny_site))
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["harness: tiny"]["status"] == "ok"
    assert checks["harness: tiny"]["detail"] == "benchctl-tiny 0.3.1 (benchctl_tiny:TinyHarness)"
    assert checks["grader: nonempty"]["detail"] == "benchctl-tiny 0.3.1 (benchctl_tiny:GRADER)"
    assert checks["harness: react"]["detail"] == "benchctl 0.1.0 (harnesses.react:ReactHarness)"
    without = {c["name"] for c in json.loads(benchctl(["doctor", "--json"]).stdout)["checks"]}
    assert "harness: react" in without and "harness: tiny" not in without


def test_a_harness_that_is_not_installed_is_refused_naming_the_installed_ones(tmp_path: Path) -> None:
    task, model = make_scripted_task(tmp_path, [{"text": "done"}])
    r = benchctl(["run", str(task), "--harness", "tiny", "--model", model, "--out", str(tmp_path / "out")])
    assert r.returncode == 2, r.stderr
    assert "unknown harness 'tiny'; known harnesses: claude-code, codex, react" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.docker
def test_benchctl_run_and_grade_use_an_installed_plugin_by_name(tiny_site: Path, tmp_path: Path) -> None:
    task, model = make_scripted_task(tmp_path, [{"text": "done"}])
    out = tmp_path / "out"
    env = env_with(tiny_site)
    r = benchctl(
        [
            "run",
            str(task),
            "--harness",
            "tiny",
            "--model",
            model,
            "--budget",
            "1m",
            "--out",
            str(out),
            "--progress",
            "quiet",
        ],
        env,
    )
    assert r.returncode == 0, r.stderr
    meta, events, run = only_run(out)
    assert (meta["status"], meta["harness"], meta["tool_versions"]) == ("completed", "tiny", {"tiny": "0.3.1"})
    assert (run / "artifacts" / "report.md").read_text() == "found by name\n"
    said = [e for e in events if e["type"] == "assistant"]
    assert [(e["source"], e["text"]) for e in said] == [("harness", "tiny writes: found by name")]
    exec_event = next(e for e in events if e.get("kind") == "tiny_exec")
    assert exec_event["exit_code"] == 0 and exec_event["host"].strip()  # it ran in the container
    g = benchctl(["grade", str(out), "--judge", model, "--grader", "nonempty"], env)
    assert g.returncode == 0, g.stderr
    grade = read_json(out / "grades" / "nonempty" / f"{meta['run_id']}.json")
    assert (grade["grader"], grade["score"], grade["status"]) == ("nonempty", 1.0, "scored")
    assert read_jsonl(run / "transcript.jsonl") == events  # grading wrote nothing into the run


def _dist(root: Path, name: str, version: str, groups: dict[str, dict[str, str]]) -> Path:
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points_txt(groups))
    return root


def test_a_name_two_distributions_declare_is_refused_naming_both(tmp_path: Path, monkeypatch) -> None:
    group = {"benchctl.tests-only": {"same": "json:dumps"}}
    monkeypatch.syspath_prepend(str(_dist(tmp_path / "a", "dist-a", "1.0", group)))
    monkeypatch.syspath_prepend(str(_dist(tmp_path / "b", "dist-b", "2.0", group)))
    reg: Registry[object] = Registry("benchctl.tests-only", "widget")
    assert reg.names() == ["same"]
    with pytest.raises(UnknownPlugin, match=r"more than one .*dist-[ab] [12]\.0 \(json:dumps\); dist-[ab]"):
        reg.load("same")
    with pytest.raises(UnknownPlugin, match="unknown widget 'other'; known tests-only: same"):
        reg.load("other")


def test_a_declared_plugin_that_does_not_import_says_which_distribution(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(
        str(_dist(tmp_path, "broken", "0.1", {"benchctl.tests-only": {"gone": "no_such_module_x:Thing"}}))
    )
    reg: Registry[object] = Registry("benchctl.tests-only", "widget")
    with pytest.raises(
        UnknownPlugin, match=r"widget 'gone' \(broken 0\.1 \(no_such_module_x:Thing\)\) cannot be loaded"
    ):
        reg.load("gone")
    reg.register("gone", sys)  # in this process only, it wins over the broken declaration
    assert reg.load("gone") is sys and reg.provider("gone") == "this process"


def test_another_distributions_harnesses_package_is_named_and_not_taken_for_benchctls(tmp_path: Path) -> None:
    """PyPI has a distribution whose top-level package is named `harnesses` too. Installed where it
    comes first on the path, benchctl refuses to take it for its own built-in harnesses and says
    what to do; doctor names the distribution."""
    clash = install(CLASH, tmp_path / "clash")
    env = env_with(clash, first=True)
    # not from the checkout's directory: `python -c` puts the working directory first on the path
    checks = {c["name"]: c for c in json.loads(benchctl(["doctor", "--json"], env, tmp_path).stdout)["checks"]}
    assert checks["package names"]["status"] == "warn"
    assert checks["package names"]["detail"] == "'harnesses' is also installed by harnesses"
    react = checks["harness: react"]
    assert react["status"] == "warn" and f"'harnesses' here is {clash / 'harnesses' / '__init__.py'}" in react["detail"]
    assert checks["grader: coverage"]["status"] == "ok"  # benchctl's own package is still benchctl's
    task, model = make_scripted_task(tmp_path, [{"text": "done"}])
    r = benchctl(["run", str(task), "--model", model, "--budget", "1m", "--out", str(tmp_path / "out")], env, tmp_path)
    assert r.returncode == 2 and "benchctl's built-in package 'harnesses' should be" in r.stderr, r.stderr
    assert "pip uninstall" in r.stderr and not (tmp_path / "out").exists()
    clean = {c["name"]: c for c in json.loads(benchctl(["doctor", "--json"], cwd=tmp_path).stdout)["checks"]}
    assert clean["package names"]["status"] == "ok" and clean["harness: react"]["status"] == "ok"
