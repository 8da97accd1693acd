"""Building and inspecting the sandbox image.

Two build paths produce the same image (packages from sandboxes/packages.txt, user and
directories from sandboxes/setup.sh):

- `dockerfile`: `sandboxes/Dockerfile`, FROM debian:bookworm-slim — needs that base image
  locally or a registry to pull it from;
- `offline`: `mmdebstrap` builds a Debian root filesystem from packages (needs a Debian mirror,
  not a container registry), which is imported as an image and finished with
  `sandboxes/Dockerfile.offline`.

`build_image(path="auto")` uses the Dockerfile when the base image is present or pullable and
falls back to the offline path otherwise; it returns which path it used. Docker is driven
through the SDK; the only subprocesses are mmdebstrap (via build-offline.sh) and apt-get.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchctl import bundled

DEFAULT_TAG = os.environ.get("BENCHCTL_IMAGE", "benchctl-sandbox:latest")
BASE_IMAGE = "debian:bookworm-slim"
ROOTFS_IMAGE = "benchctl-rootfs:bookworm"
BUILD_PATH_LABEL = "org.benchctl.build-path"

BuildPath = Literal["auto", "dockerfile", "offline"]
Log = Callable[[str], None]


class ImageBuildError(RuntimeError):
    """The image could not be built; the message says what to do."""


@dataclass
class ImageInfo:
    tag: str
    id: str  # sha256:... content digest of the image config
    repo_digests: list[str]
    build_path: str  # "offline" / "dockerfile" / "unknown"
    size_mb: float
    created: str


@dataclass
class BuildResult:
    path: str  # the build path actually used
    reason: str  # why that path
    info: ImageInfo
    seconds: float


def sandboxes_dir() -> Path:
    """The image's build context: the one benchctl ships (benchctl.bundled), or BENCHCTL_SANDBOXES_DIR."""
    override = os.environ.get("BENCHCTL_SANDBOXES_DIR")
    d = Path(override) if override else bundled.sandboxes_dir()
    if not (d / "packages.txt").is_file():
        raise ImageBuildError(
            f"sandbox image definitions not found at {d}; reinstall benchctl (its wheel carries them), "
            "or set BENCHCTL_SANDBOXES_DIR to a sandboxes/ folder of a benchctl checkout"
        )
    return d


def image_info(client: Any, tag: str = DEFAULT_TAG) -> ImageInfo | None:
    import docker.errors

    try:
        attrs = client.api.inspect_image(tag)
    except docker.errors.ImageNotFound:
        return None
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    return ImageInfo(
        tag=tag,
        id=attrs["Id"],
        repo_digests=attrs.get("RepoDigests") or [],
        build_path=labels.get(BUILD_PATH_LABEL, "unknown"),
        size_mb=round(attrs.get("Size", 0) / 1e6, 1),
        created=attrs.get("Created", ""),
    )


def base_available(client: Any, log: Log, base: str = BASE_IMAGE) -> tuple[bool, str]:
    """Is the Dockerfile's base image present, or can it be pulled? (reason either way)"""
    import docker.errors

    try:
        client.api.inspect_image(base)
        return True, f"{base} is present locally"
    except docker.errors.ImageNotFound:
        pass
    log(f"{base} not present; trying to pull it")
    repo, _, tag = base.rpartition(":")
    try:
        client.api.pull(repo, tag=tag)
        # A pull that fails after the daemon answered 200 reports it inside the (unread) output
        # instead of raising: only the image being there now means it worked.
        client.api.inspect_image(base)
        return True, f"pulled {base}"
    except Exception as e:  # no registry, DNS failure, auth, timeouts: all mean "not pullable"
        detail = (getattr(e, "explanation", None) or str(e)).strip().splitlines()[0][:200]
        return False, f"{base} is not present and could not be pulled: {detail}"


def ensure_mmdebstrap(log: Log) -> str:
    found = shutil.which("mmdebstrap")
    if found:
        return found
    if os.geteuid() != 0:
        raise ImageBuildError(
            "the offline build needs mmdebstrap: run `sudo apt-get install -y mmdebstrap` "
            "(or use --dockerfile on a machine with a registry)"
        )
    log("mmdebstrap missing; installing it with apt-get")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "mmdebstrap"]):
        done = subprocess.run(
            cmd, capture_output=True, text=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        )
        if done.returncode != 0:
            raise ImageBuildError(f"`{' '.join(cmd)}` failed: {done.stderr.strip()[-400:]}")
    found = shutil.which("mmdebstrap")
    if not found:
        raise ImageBuildError("apt-get installed mmdebstrap but it is not on PATH")
    return found


def _stream_build(client: Any, log: Log, **kwargs: Any) -> None:
    """Run a Dockerfile build through the API, logging steps (build_image then inspects the tag)."""
    for chunk in client.api.build(decode=True, rm=True, forcerm=True, **kwargs):
        if "error" in chunk:
            raise ImageBuildError(f"docker build failed: {chunk['error'].strip()}")
        line = (chunk.get("stream") or "").strip()
        if line.startswith("Step "):
            log(line)


def build_dockerfile(client: Any, tag: str, log: Log, base: str = BASE_IMAGE) -> None:
    _stream_build(
        client,
        log,
        path=str(sandboxes_dir()),
        dockerfile="Dockerfile",
        tag=tag,
        pull=False,
        buildargs={"BASE_IMAGE": base},
    )


def build_offline(client: Any, tag: str, log: Log) -> None:
    ensure_mmdebstrap(log)
    sdir = sandboxes_dir()
    with tempfile.TemporaryDirectory(prefix="benchctl-rootfs-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        log("mmdebstrap: building the Debian root filesystem (~20-60 s)")
        done = subprocess.run(
            ["sh", str(sdir / "build-offline.sh"), "--rootfs-only", str(tar)], capture_output=True, text=True
        )
        if done.returncode != 0 or not tar.is_file():
            raise ImageBuildError(
                "mmdebstrap failed (is a Debian mirror reachable? see /etc/apt/sources.list*):\n"
                + done.stderr.strip()[-1500:]
            )
        log(f"docker import {tar.stat().st_size / 1e6:.0f} MB -> {ROOTFS_IMAGE}")
        repo, rtag = ROOTFS_IMAGE.split(":")
        client.api.import_image_from_file(str(tar), repository=repo, tag=rtag)
    _stream_build(
        client,
        log,
        path=str(sdir),
        dockerfile="Dockerfile.offline",
        tag=tag,
        pull=False,
        buildargs={"ROOTFS_IMAGE": ROOTFS_IMAGE},
    )


def build_image(
    client: Any, tag: str = DEFAULT_TAG, path: BuildPath = "auto", log: Log = print, base: str = BASE_IMAGE
) -> BuildResult:
    """Build `tag` via `path`; `base` is the Dockerfile path's FROM image (any Debian bookworm)."""
    started = time.monotonic()
    if path == "auto":
        ok, reason = base_available(client, log, base)
        path = "dockerfile" if ok else "offline"
    else:
        reason = f"--{path} requested"
    log(f"building {tag} via the {path} path ({reason})")
    if path == "dockerfile":
        build_dockerfile(client, tag, log, base)
    elif path == "offline":
        build_offline(client, tag, log)
    else:
        raise ImageBuildError(f"unknown build path {path!r}; use auto, dockerfile or offline")
    info = image_info(client, tag)
    if info is None:
        raise ImageBuildError(f"build finished but {tag} is not in the image store")
    return BuildResult(path=path, reason=reason, info=info, seconds=time.monotonic() - started)
