"""Sandbox image: contents of the built image, the Dockerfile build path, path selection."""

from __future__ import annotations

from contextlib import closing

import pytest

from benchctl.sandbox import images
from benchctl.sandbox.docker_client import BUILD_TIMEOUT, docker_client

pytestmark = pytest.mark.docker


def _run(client, image: str, script: str) -> str:
    out = client.containers.run(image, ["bash", "-c", script], remove=True, network_mode="none")
    return out.decode()


def test_image_contents(docker_engine, sandbox_image: str) -> None:
    out = _run(
        docker_engine,
        sandbox_image,
        "id -u; id -un; echo $HOME; stat -c %U /work /home/agent; "
        "for t in bash python3 jq grep sed gawk less ps find rg file tini timeout; do "
        "command -v $t >/dev/null || echo MISSING $t; done; "
        "ldd --version | head -1; test -s /etc/ssl/certs/ca-certificates.crt && echo certs",
    )
    lines = out.splitlines()
    assert lines[:5] == ["1000", "agent", "/home/agent", "agent", "agent"], out
    assert "MISSING" not in out, out
    glibc = float(lines[5].split()[-1])
    assert glibc >= 2.26, lines[5]  # Claude Code's binary needs glibc >= 2.26
    assert lines[6] == "certs"


def test_image_info_reports_digest_and_build_path(docker_engine, sandbox_image: str) -> None:
    info = images.image_info(docker_engine, sandbox_image)
    assert info is not None and info.id.startswith("sha256:") and info.build_path in ("offline", "dockerfile")
    assert images.image_info(docker_engine, "benchctl-no-such-image:x") is None


def test_unpullable_base_falls_back_with_reason(docker_engine) -> None:
    ok, reason = images.base_available(docker_engine, lambda m: None, base="benchctl-no-such/base:none")
    assert not ok and "could not be pulled" in reason


def test_dockerfile_path_builds_same_contents(docker_engine, sandbox_image: str) -> None:
    """The registry path, with the offline rootfs standing in for debian:bookworm-slim
    (there is no registry here; apt-get inside the build still needs a Debian mirror)."""
    if images.image_info(docker_engine, images.ROOTFS_IMAGE) is None:
        pytest.skip(f"{images.ROOTFS_IMAGE} absent (built by the offline path)")
    tag = "benchctl-sandbox:test-dockerfile"
    try:
        with closing(docker_client(BUILD_TIMEOUT)) as builder:  # a build step may stay silent for minutes
            result = images.build_image(
                builder, tag=tag, path="dockerfile", log=lambda m: None, base=images.ROOTFS_IMAGE
            )
        assert result.path == "dockerfile" and result.info.build_path == "dockerfile"
        out = _run(docker_engine, tag, "id -un; command -v jq rg tini python3 | wc -l")
        assert out.split() == ["agent", "4"]
    finally:
        try:
            docker_engine.api.remove_image(tag, force=True)
        except Exception:
            pass
