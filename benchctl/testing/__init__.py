"""Test doubles that plug into benchctl's real seams (no mocks): FakeUpstreamServer, a
scripted vendor API over real HTTP, and FakeDocker, the Docker Engine API in memory under the
real DockerSandbox. Shipped in the package so graders' and harnesses' tests, benchmarks and
users' own tests can use them."""

from __future__ import annotations

from typing import Any

__all__ = ["FakeDocker", "FakeUpstreamServer", "RecordedRequest"]


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m benchctl.testing.fake_upstream` does not import the module twice.
    if name == "FakeDocker":
        from benchctl.testing import fake_docker

        return fake_docker.FakeDocker
    if name in __all__:
        from benchctl.testing import fake_upstream

        return getattr(fake_upstream, name)
    raise AttributeError(name)
