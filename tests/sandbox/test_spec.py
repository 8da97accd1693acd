"""DockerSandbox refuses bad specs before touching Docker (no engine needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchctl.sandbox.base import Mount, SandboxSpec
from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError


class NoDocker:
    """Stands in for the docker client: any use of it means validation let a bad spec through."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"docker client used ({name}) before the spec was validated")


def _start(spec: SandboxSpec) -> None:
    DockerSandbox(spec, client=NoDocker()).start()


def test_provider_key_names_refused() -> None:
    with pytest.raises(SandboxError, match="ANTHROPIC_API_KEY"):
        _start(SandboxSpec(image="x", run_id="r", env={"ANTHROPIC_API_KEY": "dummy"}))


def test_provider_key_values_refused_under_any_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret-abcdef123456")
    with pytest.raises(SandboxError, match="TOKEN"):
        _start(SandboxSpec(image="x", run_id="r", env={"TOKEN": "sk-real-secret-abcdef123456"}))


def test_missing_dirs_and_relative_mounts_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="data_dir"):
        _start(SandboxSpec(image="x", run_id="r", data_dir=tmp_path / "nope"))
    with pytest.raises(SandboxError, match="gateway_dir"):
        _start(SandboxSpec(image="x", run_id="r", gateway_dir=tmp_path / "nope"))
    with pytest.raises(SandboxError, match="does not exist"):
        _start(SandboxSpec(image="x", run_id="r", extra_mounts=[Mount(tmp_path / "nope", "/opt/benchctl/x")]))
    with pytest.raises(SandboxError, match="absolute"):
        _start(SandboxSpec(image="x", run_id="r", extra_mounts=[Mount(tmp_path, "opt/x")]))


def test_relative_sandbox_paths_refused() -> None:
    box = DockerSandbox(SandboxSpec(image="x", run_id="r"), client=NoDocker())
    with pytest.raises(SandboxError, match="not running"):
        box.exec("true")
    from benchctl.sandbox.docker_sandbox import _abs

    with pytest.raises(ValueError, match="absolute"):
        _abs("work/report.md")
    assert _abs("/work/../work/./r.md") == "/work/r.md"


def test_provider_key_inside_a_value_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-real-secret-0123456789")
    with pytest.raises(SandboxError, match="AUTH_HEADER"):
        _start(SandboxSpec(image="x", run_id="r", env={"AUTH_HEADER": "Bearer sk-ant-real-secret-0123456789"}))


def test_exec_env_with_a_real_key_refused_before_touching_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret-abcdef123456")
    box = DockerSandbox(SandboxSpec(image="x", run_id="r"), client=NoDocker())
    with pytest.raises(SandboxError, match="refusing to pass provider keys.*OPENAI_API_KEY"):
        box.exec("true", env={"OPENAI_API_KEY": "sk-real-secret-abcdef123456"})
    # The dummy sandbox token under a provider key's name is what harnesses pass: not refused here
    # (it fails later only because this sandbox never started).
    with pytest.raises(SandboxError, match="not running"):
        box.exec("true", env={"OPENAI_API_KEY": "benchctl-sandbox-token"})


def test_stop_before_start_does_not_touch_docker() -> None:
    """A cancel or a failed validation stops a sandbox that never started: no engine call (it may be down)."""
    box = DockerSandbox(SandboxSpec(image="x", run_id="r"), client=NoDocker())
    box.stop()
    with pytest.raises(SandboxError, match="stopped before it started"):
        box.start()


@pytest.mark.parametrize(
    "limits, key", [(dict(pids=-5), "pids"), (dict(cpus=0), "cpus"), (dict(memory="lots"), "memory")]
)
def test_limits_that_docker_would_misread_are_refused(limits: dict, key: str) -> None:
    from benchctl.sandbox.base import Limits

    with pytest.raises(SandboxError, match=f"limits.{key}"):
        _start(SandboxSpec(image="x", run_id="r", limits=Limits(**limits)))


# Docker's rule for a container name (moby daemon/names: RestrictedNamePattern).
_DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")


@pytest.mark.parametrize(
    "run_id, part",
    [
        ("demo__react__scripted-x__5m__s0", "demo__react__scripted-x__5m__s0"),  # a make_run_id id, as it is
        ("naïve/run id", "na-ve-run-id"),  # layout.slug: ASCII only (str.isalnum would keep "ï", Docker refuses it)
        ("x" * 100, "x" * 60),
    ],
)
def test_container_name_is_the_layout_slug_of_the_run_id(run_id: str, part: str) -> None:
    box = DockerSandbox(SandboxSpec(image="x", run_id=run_id), client=NoDocker())
    assert re.fullmatch(rf"benchctl-{re.escape(part)}-[0-9a-f]{{8}}", box.name), box.name
    assert _DOCKER_NAME.match(box.name)
