"""One Docker client factory: every way into the engine gives the same error, with the fix, when
the engine is not there (DOCKER_HOST pointing at a socket nobody listens on)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.sandbox.docker_client import FIX, DockerUnavailable, docker_client


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    host = f"unix://{tmp_path}/no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    return host


def _says_where_and_how(message: str, host: str) -> None:
    assert f"Docker Engine not reachable at {host} (" in message and f"Fix: {FIX}" in message, message


def test_factory_names_the_address_and_the_fix(no_engine: str) -> None:
    with pytest.raises(DockerUnavailable) as e:
        docker_client()
    _says_where_and_how(str(e.value), no_engine)
    assert e.value.host == no_engine and e.value.fix == FIX and "No such file" in e.value.reason


def test_every_entry_point_gives_the_same_message(no_engine: str) -> None:
    from benchctl.run.preflight import check_image
    from benchctl.sandbox.base import SandboxSpec
    from benchctl.sandbox.docker_sandbox import DockerSandbox, SandboxError
    from benchctl.task_import.images import probe

    with pytest.raises(SandboxError) as e:
        DockerSandbox(SandboxSpec(image="benchctl-sandbox:latest", run_id="test-no-engine")).start()
    _says_where_and_how(str(e.value), no_engine)
    _says_where_and_how(check_image("benchctl-sandbox:latest") or "", no_engine)
    _says_where_and_how(probe("some-image:1").problem or "", no_engine)
    for args in (["images", "show"], ["cleanup", "--run-id", "test-no-engine"]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2
        _says_where_and_how(" ".join(res.output.split()), no_engine)


@pytest.mark.docker
def test_a_client_that_comes_back_has_reached_the_engine() -> None:
    client = docker_client(5)
    try:
        assert client.api.timeout == 5 and client.api.api_version  # negotiated while connecting
        assert client.ping()
    finally:
        client.close()
