"""The one way benchctl opens a Docker Engine client: `docker_client(timeout)`.

    from contextlib import closing
    with closing(docker_client(CHECK_TIMEOUT)) as client:
        client.api.inspect_image(tag)

`docker.from_env` asks the engine for its API version while it connects, so a client that comes
back has reached the engine (no separate ping). An engine that cannot be reached raises
`DockerUnavailable`, whose message names the address tried and the fix; `.reason` and `.fix` are
there for callers that show them apart (`benchctl doctor`). The caller owns the client and
closes it. The docker SDK is imported here, lazily, so importing this module stays light.

`timeout` is the per-request limit docker-py applies to every API call of the client (the output
of a `docker exec` is read by DockerSandbox with select() against its own deadlines instead). It
only matters when the engine hangs; a stopped engine fails at once. Why the callers' limits differ:

- CHECK_TIMEOUT: look-ups and small changes (inspect an image, list or remove containers,
  `benchctl doctor`, the checks before a run, a Ray node's checks): a healthy engine answers in
  milliseconds; this rides out a busy one without leaving the user waiting long on a hung one.
- CLEANUP_TIMEOUT: removing this process's containers from a signal handler or at exit, where
  Ctrl-C must not hang for long; the same as CHECK_TIMEOUT today, named for the reason.
- SANDBOX_TIMEOUT: a sandbox's own calls: creating, starting and removing containers while many
  runs do the same, and `get_archive` of a large /work.
- BUILD_TIMEOUT: image builds (`benchctl images build`, a Ray node building a missing image):
  a build step or the offline path's rootfs import may stay silent for minutes.

One client per DockerSandbox, not one per process: docker-py's client is a `requests.Session`,
which requests does not promise to be thread-safe (docker/docker-py#3229), and its connection
pool holds 10 connections, which a process-wide client would overflow at `--concurrency 32` with
several threads exec-ing per sandbox. A fresh client costs one `GET /version` round trip
(`scripts/bench_sandbox.py` measures it), small next to starting the container.
"""

from __future__ import annotations

import os
from typing import Any

CHECK_TIMEOUT = 30
CLEANUP_TIMEOUT = 30
SANDBOX_TIMEOUT = 120
BUILD_TIMEOUT = 900

DEFAULT_HOST = "unix:///var/run/docker.sock"  # docker-py's default when DOCKER_HOST is unset
FIX = (
    "start the Docker Engine (e.g. `systemctl start docker`) or point DOCKER_HOST at it; the current "
    "user must be allowed to use its socket"
)


class DockerUnavailable(RuntimeError):
    """The Docker Engine could not be reached; the message says where and what to do."""

    def __init__(self, host: str, reason: str) -> None:
        self.host, self.reason, self.fix = host, reason, FIX
        super().__init__(
            f"Docker Engine not reachable at {host} ({reason}). Fix: {FIX}; then check with `benchctl doctor`"
        )


def engine_host() -> str:
    """The engine address a client will use (DOCKER_HOST, else the default socket)."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def docker_client(timeout: float = CHECK_TIMEOUT) -> Any:
    """A connected `docker.DockerClient` (the caller closes it), or DockerUnavailable."""
    import docker

    try:
        return docker.from_env(timeout=timeout)
    except Exception as e:  # DockerException wraps the connection error: the engine is not there
        raise DockerUnavailable(engine_host(), _first_line(e)) from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]
