"""`benchctl images build` / `benchctl images show`: the sandbox image.

Heavy imports (docker, benchctl.sandbox.images) happen inside the commands so `benchctl --help` stays fast.
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

import typer

images_app = typer.Typer(no_args_is_help=True, help="Build and inspect the sandbox image.")


def _client(build: bool = False) -> Any:
    from benchctl.sandbox.docker_client import BUILD_TIMEOUT, CHECK_TIMEOUT, DockerUnavailable, docker_client

    try:
        return docker_client(BUILD_TIMEOUT if build else CHECK_TIMEOUT)
    except DockerUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


@images_app.command("build")
def build(
    offline: bool = typer.Option(
        False, "--offline", help="Build from Debian packages (mmdebstrap); no registry needed."
    ),
    dockerfile: bool = typer.Option(
        False, "--dockerfile", help="Build from sandboxes/Dockerfile (needs debian:bookworm-slim)."
    ),
    tag: str = typer.Option(None, "--tag", help="Image tag \\[default: $BENCHCTL_IMAGE or benchctl-sandbox:latest]."),
    if_missing: bool = typer.Option(False, "--if-missing", help="Do nothing if the tag already exists."),
) -> None:
    """Build the sandbox image, via the Dockerfile if its base image is available, else offline."""
    from benchctl.sandbox import images

    if offline and dockerfile:
        typer.echo("error: choose one of --offline and --dockerfile (or neither, to pick automatically)", err=True)
        raise typer.Exit(2)
    tag = tag or images.DEFAULT_TAG
    client = _client(build=True)
    existing = images.image_info(client, tag)
    if if_missing and existing is not None:
        typer.echo(f"{tag} already present ({existing.id[:19]}, {existing.build_path} build); nothing to do")
        return
    path: images.BuildPath = "offline" if offline else "dockerfile" if dockerfile else "auto"
    try:
        result = images.build_image(client, tag=tag, path=path, log=lambda m: typer.echo(f"  {m}"))
    except images.ImageBuildError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"built {tag} via the {result.path} path in {result.seconds:.0f} s: {result.info.id} "
        f"({result.info.size_mb:.0f} MB)"
    )


@images_app.command("show")
def show(tag: str = typer.Option(None, "--tag", help="Image tag to inspect.")) -> None:
    """Print the sandbox image's id (content digest), build path and size."""
    from benchctl.sandbox import images

    tag = tag or images.DEFAULT_TAG
    with closing(_client()) as client:
        info = images.image_info(client, tag)
    if info is None:
        typer.echo(f"{tag} not found; build it with `benchctl images build`", err=True)
        raise typer.Exit(1)
    typer.echo(
        f"{info.tag}\n  id: {info.id}\n  build path: {info.build_path}\n  size: {info.size_mb:.0f} MB\n"
        f"  created: {info.created}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(images_app, name="images")
