"""`benchctl doctor` and `benchctl cleanup` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from typer.testing import CliRunner

from benchctl.cli import app

runner = CliRunner()


def _doctor(*args: str) -> tuple[int, dict]:
    res = runner.invoke(app, ["doctor", "--json", *args])
    return res.exit_code, json.loads(res.stdout)


def _by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_unreachable_engine_fails_with_fix_and_keys_never_printed(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret-0123456789")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = runner.invoke(app, ["doctor"])
    assert res.exit_code == 1
    assert "sk-ant-test-secret" not in res.stdout
    assert "FAIL] docker engine" in res.stdout and "fix: start the Docker Engine" in res.stdout
    code, report = _doctor()
    checks = _by_name(report)
    assert code == 1 and report["ok"] is False
    assert checks["docker engine"]["status"] == "fail" and checks["sandbox image"]["status"] == "skip"
    assert checks["key: anthropic"] == {
        "name": "key: anthropic",
        "status": "ok",
        "detail": "ANTHROPIC_API_KEY is set",
        "fix": "",
        "required": False,
    }
    assert checks["key: openai"]["status"] == "warn" and "OPENAI_API_KEY" in checks["key: openai"]["fix"]


def test_cleanup_without_engine_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    # --run-id keeps this test away from what other processes on this machine left behind
    res = runner.invoke(app, ["cleanup", "--run-id", f"test-no-engine-{uuid.uuid4().hex[:8]}"])
    assert res.exit_code == 2 and "not reachable" in res.output


@pytest.mark.docker
def test_doctor_passes_with_image(sandbox_image: str) -> None:
    code, report = _doctor("--image", sandbox_image)
    checks = _by_name(report)
    assert code == 0 and report["ok"] is True, report
    assert checks["sandbox image"]["detail"].split()[1].startswith("sha256:")
    assert checks["sandbox start"]["status"] == "ok"
    assert any(name.startswith("agent cli") for name in checks)


@pytest.mark.docker
def test_doctor_missing_image_fails_with_build_hint() -> None:
    code, report = _doctor("--image", "benchctl-no-such-image:x")
    checks = _by_name(report)
    assert code == 1
    assert checks["sandbox image"]["status"] == "fail" and "benchctl images build" in checks["sandbox image"]["fix"]
    assert checks["sandbox start"]["status"] == "skip"


@pytest.mark.docker
def test_strays_reported_then_cleaned(sandbox_image: str, docker_engine) -> None:
    import docker

    from benchctl.sandbox import cleanup

    client = docker_engine
    run_id = f"test-doctor-{uuid.uuid4().hex[:8]}"
    finished = subprocess.Popen(["true"])
    finished.wait()
    labels = {**cleanup.owner_labels(run_id), cleanup.LABEL_OWNER_PID: str(finished.pid)}
    cid = client.api.create_container(sandbox_image, command=["true"], labels=labels)["Id"]
    try:
        _, report = _doctor("--image", sandbox_image)
        stray = _by_name(report)["stray containers"]
        assert stray["status"] == "warn" and stray["fix"] == "remove them with `benchctl cleanup`"
        dry = runner.invoke(app, ["cleanup", "--dry-run", "--run-id", run_id])
        assert dry.exit_code == 0 and "would remove 1 container" in dry.stdout
        assert client.api.inspect_container(cid)
        res = runner.invoke(app, ["cleanup", "--run-id", run_id])
        assert res.exit_code == 0 and "removed 1 container" in res.stdout
        with pytest.raises(docker.errors.NotFound):
            client.api.inspect_container(cid)
    finally:
        try:
            client.api.remove_container(cid, force=True)
        except docker.errors.NotFound:
            pass
