"""The image an imported task declares: its digest when present locally, and an optional build.

A Harbor task either names a prebuilt image (`[environment] docker_image`) or builds one from
`environment/Dockerfile`. benchctl never pulls (there may be no registry); a Dockerfile image is
built only when asked (`--build-images`), from the *imported* copy of environment/, under a tag
derived from its content (`benchctl-task-<name>:<hash12>`), so the same files always give the
same tag and a re-import does not rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl.sandbox.docker_client import DockerUnavailable, docker_client
from benchctl.task_import.pin import content_hash, file_digests

TAG_PREFIX = "benchctl-task-"


@dataclass
class ImageProbe:
    """What the local Docker Engine knows about an image."""

    name: str
    digest: str | None = None  # the image id (sha256:…), None when absent
    workdir: str = ""  # Config.WorkingDir: where Harbor runs the agent and the tests
    problem: str | None = None  # why it is absent / unknown


def local_tag(name: str, context: Path) -> str:
    """The tag a Dockerfile image gets: the task name and a hash of the build context's files."""
    return f"{TAG_PREFIX}{name.lower()}:{content_hash(file_digests(context)).split(':', 1)[1][:12]}"


def client_or_none() -> Any:
    """One Docker client to probe many images with (None without a reachable engine)."""
    try:
        return docker_client()
    except DockerUnavailable:
        return None


def probe(name: str | None, client: Any = None) -> ImageProbe:
    """The image's digest and working directory, or the reason it cannot be used."""
    if not name:
        return ImageProbe("", problem="the task declares no image")
    try:
        import docker.errors

        own = client is None
        client = client or docker_client()
    except DockerUnavailable as e:
        return ImageProbe(name, problem=str(e))
    try:
        info = client.api.inspect_image(name)
    except docker.errors.ImageNotFound:
        return ImageProbe(name, problem=f"image {name} is not present locally")
    except Exception as e:
        return ImageProbe(name, problem=f"could not inspect image {name}: {e}")
    finally:
        if own:
            client.close()
    return ImageProbe(name, digest=info.get("Id"), workdir=(info.get("Config") or {}).get("WorkingDir") or "")


class ImageBuildError(RuntimeError):
    pass


def build(context: Path, tag: str, *, timeout: float = 600, labels: dict[str, str] | None = None) -> ImageProbe:
    """`docker build` the context (its Dockerfile) as `tag`, unless the tag already exists."""
    existing = probe(tag)
    if existing.digest:
        return existing
    if not (context / "Dockerfile").is_file():
        raise ImageBuildError(f"{context}/Dockerfile does not exist")
    import docker.errors

    try:
        client = docker_client(timeout)  # the build's own limit: a build step may stay silent for long
    except DockerUnavailable as e:
        raise ImageBuildError(str(e)) from None
    try:
        client.images.build(
            path=str(context), tag=tag, rm=True, forcerm=True, labels=labels or {}, timeout=int(timeout)
        )
    except docker.errors.BuildError as e:
        tail = "".join(str(x.get("stream") or x.get("error") or "") for x in list(e.build_log)[-8:]).strip()
        raise ImageBuildError(f"docker build of {context} failed: {e.msg}\n{tail[-1500:]}") from None
    except Exception as e:
        raise ImageBuildError(f"docker build of {context} failed: {type(e).__name__}: {e}") from None
    finally:
        client.close()
    built = probe(tag)
    if not built.digest:
        raise ImageBuildError(f"docker build of {context} reported success but {tag} is missing")
    return built
