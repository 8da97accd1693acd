"""Sandbox image: contents of the built image, the Dockerfile build path, path selection."""
from __future__ import annotations

import pytest

from benchctl import images

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client():
    import docker
    return docker.from_env(timeout=900)


def _run(client, image: str, script: str) -> str:
    out = client.containers.run(image, ["bash", "-c", script], remove=True, network_mode="none")
    return out.decode()


def test_image_contents(client, sandbox_image: str) -> None:
    out = _run(client, sandbox_image,
               "id -u; id -un; echo $HOME; stat -c %U /work /home/agent; "
               "for t in bash python3 jq grep sed gawk less ps find rg file tini timeout; do "
               "command -v $t >/dev/null || echo MISSING $t; done; "
               "ldd --version | head -1; test -s /etc/ssl/certs/ca-certificates.crt && echo certs")
    lines = out.splitlines()
    assert lines[:5] == ["1000", "agent", "/home/agent", "agent", "agent"], out
    assert "MISSING" not in out, out
    glibc = float(lines[5].split()[-1])
    assert glibc >= 2.26, lines[5]  # Claude Code's binary needs glibc >= 2.26
    assert lines[6] == "certs"


def test_image_info_reports_digest_and_build_path(client, sandbox_image: str) -> None:
    info = images.image_info(client, sandbox_image)
    assert info is not None and info.id.startswith("sha256:") and info.build_path in ("offline", "dockerfile")
    assert images.image_info(client, "benchctl-no-such-image:x") is None


def test_unpullable_base_falls_back_with_reason(client) -> None:
    ok, reason = images.base_available(client, lambda m: None, base="benchctl-no-such/base:none")
    assert not ok and "could not be pulled" in reason


def test_dockerfile_path_builds_same_contents(client, sandbox_image: str) -> None:
    """The registry path, with the offline rootfs standing in for debian:bookworm-slim
    (there is no registry here; apt-get inside the build still needs a Debian mirror)."""
    if images.image_info(client, images.ROOTFS_IMAGE) is None:
        pytest.skip(f"{images.ROOTFS_IMAGE} absent (built by the offline path)")
    tag = "benchctl-sandbox:test-dockerfile"
    try:
        result = images.build_image(client, tag=tag, path="dockerfile", log=lambda m: None, base=images.ROOTFS_IMAGE)
        assert result.path == "dockerfile" and result.info.build_path == "dockerfile"
        out = _run(client, tag, "id -un; command -v jq rg tini python3 | wc -l")
        assert out.split() == ["agent", "4"]
    finally:
        try:
            client.api.remove_image(tag, force=True)
        except Exception:
            pass
