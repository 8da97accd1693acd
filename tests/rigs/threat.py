"""A real gateway, a fake upstream holding a "real" key, and a real network-less sandbox that
reaches the gateway only through its socket: the ground the threat-model tests
(tests/test_threat_*.py) attack from inside, as an agent would.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchctl.gateway import Gateway, GatewayConfig
from benchctl.sandbox.base import ExecResult, Limits, SandboxSpec
from benchctl.sandbox.docker_sandbox import DockerSandbox
from benchctl.testing.fake_upstream import FakeUpstreamServer
from benchctl.transcript import TranscriptWriter
from tests.rigs.gateway import FAST_RETRY, REAL_KEY, events, point_env_at

SOCKET = "/gateway/gw.sock"  # the gateway's socket as the sandbox sees it


@dataclass
class ThreatRig:
    up: FakeUpstreamServer
    gw: Gateway
    sandbox: DockerSandbox
    transcript_path: Path

    def events(self, type: str | None = None) -> list[dict[str, Any]]:
        return events(self.transcript_path, type)

    def python(self, code: str, timeout: float = 120, user: str | None = None) -> ExecResult:
        """Run a python3 program inside the sandbox (as the agent, unless `user`)."""
        self.sandbox.put_file("/tmp/attack.py", code.encode())
        return self.sandbox.exec(["python3", "/tmp/attack.py"], timeout=timeout, user=user)

    def python_live(self, code: str, on_line: Callable[[str], None], timeout: float = 120) -> str:
        """Like `python`, with each stdout line handed to `on_line` as it arrives; returns stdout."""
        import time

        self.sandbox.put_file("/tmp/attack.py", code.encode())
        lines: list[str] = []

        def line(text: str) -> None:
            lines.append(text)
            on_line(text)

        res = self.sandbox.exec_stream(
            ["python3", "/tmp/attack.py"], line, deadline=time.time() + timeout, env={}, workdir="/tmp"
        )
        assert res.exit_code == 0, res.stderr
        return "\n".join(lines)


@contextmanager
def threat_rig(
    monkeypatch: pytest.MonkeyPatch,
    image: str,
    script: Any = None,
    *,
    limits: Limits | None = None,
    model: str = "anthropic/claude-haiku-4-5",
    **config: Any,
) -> Iterator[ThreatRig]:
    base = Path(tempfile.mkdtemp(prefix="bthr-", dir="/tmp"))  # short: unix socket paths
    gw_dir = base / "gw"
    gw_dir.mkdir()
    up = FakeUpstreamServer(script or {"turns": [{"text": "ok"}]}).start()
    point_env_at(monkeypatch, up)
    transcript_path = base / "transcript.jsonl"
    transcript = TranscriptWriter(transcript_path)
    config.setdefault("retry", FAST_RETRY)
    gw = Gateway(GatewayConfig(model=model, socket_path=gw_dir / "gw.sock", **config), transcript).start()
    sandbox = DockerSandbox(
        SandboxSpec(image=image, run_id="threat-test", gateway_dir=gw_dir, limits=limits or Limits())
    )
    try:
        sandbox.start()
        yield ThreatRig(up, gw, sandbox, transcript_path)
    finally:
        sandbox.stop()
        gw.close()
        up.close()
        transcript.close()
        shutil.rmtree(base, ignore_errors=True)


__all__ = ["REAL_KEY", "SOCKET", "ThreatRig", "threat_rig"]
