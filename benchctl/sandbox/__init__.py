"""Sandboxes: where an agent's tools run. See base.py for the protocol.

`DockerSandbox` (docker_sandbox.py) is imported lazily so that importing this package never
pulls in the docker SDK.
"""

from __future__ import annotations

from typing import Any

from benchctl.sandbox.base import (
    CollectReport,
    ExecResult,
    Limits,
    Mount,
    Sandbox,
    SandboxError,
    SandboxSpec,
    StreamResult,
)

__all__ = [
    "CollectReport",
    "DockerSandbox",
    "ExecResult",
    "Limits",
    "Mount",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "StreamResult",
    "install_signal_handlers",
]


def __getattr__(name: str) -> Any:
    if name == "DockerSandbox":
        from benchctl.sandbox import docker_sandbox

        return getattr(docker_sandbox, name)
    if name == "install_signal_handlers":
        from benchctl.sandbox.cleanup import install_signal_handlers

        return install_signal_handlers
    raise AttributeError(name)
