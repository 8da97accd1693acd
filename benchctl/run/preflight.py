"""Checks `benchctl run` makes before any run starts that more than one layer needs.

run/config.py checks the sweep's models with them, targets/runs.py a hidden-behaviour task's
target and auxiliary models, and the local executor (executors/local.py) the sandbox image. They
sit below all three, so none imports another to reach a check (no import circle). A problem is
a `RunError` whose message names where the bad value came from and the fix.
"""

from __future__ import annotations

from contextlib import closing

from benchctl.sandbox.docker_client import DockerUnavailable, docker_client
from benchctl.sandbox.images import DEFAULT_TAG
from benchctl.tasks import Task


class RunError(ValueError):
    pass


def check_model(model: str, what: str = "--model") -> None:
    """`what` says where the id came from: a flag (`--model`) or a file and key."""
    from benchctl.gateway.body_limits import BodyLimits
    from benchctl.gateway.retry import RetryPolicy
    from benchctl.gateway.upstream import ModelId, ModelIdError

    label = f"{what} {model}" if what.startswith("-") else f"{what}: {model}"
    try:
        mid = ModelId.parse(model)
    except ModelIdError as e:
        raise RunError(f"{what}: {e}") from None
    try:
        RetryPolicy()  # its idle timeouts come from the environment: a bad value must stop us before any run
        BodyLimits()  # so do the gateway's body caps
    except ValueError as e:
        raise RunError(str(e)) from None
    if mid.provider == "scripted":
        if mid.name.startswith("py:"):
            return
        from benchctl.gateway.scripted import load_script

        try:
            load_script(mid.name)
        except Exception as e:
            raise RunError(f"{label}: {e}") from None
        return
    from benchctl.gateway.provider_env import PROVIDERS

    env = PROVIDERS.get(mid.provider)
    if env is not None and not env.configured():
        raise RunError(
            f"{label}: no API key; export {env.keys[0]}=... on the host "
            f"(it stays in the gateway and never reaches the sandbox)"
        )
    if mid.provider == "openai-compatible":
        try:
            from benchctl.gateway.http_upstreams import http_upstream

            http_upstream(mid)
        except Exception as e:
            raise RunError(f"{label}: {e}") from None


def image_origin(task: Task) -> str | None:
    """The task file key that chose a non-default image, for error messages (None: the default)."""
    return f"{task.task_file}: key `image`" if task.image != DEFAULT_TAG else None


def check_image(image: str, origin: str | None = None) -> str | None:
    """None when Docker is reachable and has the image, else the problem and its fix. `origin`
    names the task file key that chose a non-default image."""
    try:
        client = docker_client()
    except DockerUnavailable as e:
        return str(e)
    with closing(client):
        try:
            client.images.get(image)
        except Exception:
            if origin:
                return (
                    f"{origin}: sandbox image {image} not found; build it (`benchctl images build --tag {image}` "
                    f"builds the standard sandbox under that name), or remove the key to use {DEFAULT_TAG}"
                )
            return f"sandbox image {image} not found; build it with `benchctl images build`"
    return None
