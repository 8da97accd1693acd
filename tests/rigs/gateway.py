"""Shared helpers for the gateway tests: a fake upstream wired to the gateway through the
vendors' base-URL variables, a gateway with fast retries, and transcript reading."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchctl.gateway import Gateway, GatewayConfig, RetryPolicy
from benchctl.testing.fake_upstream import FakeUpstreamServer
from benchctl.transcript import TranscriptWriter

REAL_KEY = "sk-real-SECRET-key-0123456789abcdef"
FAST_RETRY = RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.5, jitter=0.01)

TOOL_TURN = {
    "text": "Let me look.",
    "tool_calls": [{"name": "bash", "input": {"command": "ls /data"}}],
    "chunks": 4,
    "usage": {"input_tokens": 120, "output_tokens": 30},
}


def point_env_at(monkeypatch: pytest.MonkeyPatch, up: FakeUpstreamServer) -> None:
    """Make the gateway's real HTTP upstreams talk to the fake server, with a 'real' key."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", up.url)
    monkeypatch.setenv("OPENAI_BASE_URL", up.url + "/v1")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", up.url)
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(var, REAL_KEY)


def events(path: Path, type: str | None = None) -> list[dict[str, Any]]:
    out = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return [e for e in out if type is None or e["type"] == type]


class Rig:
    """A fake upstream + a started gateway on a unix socket + its transcript."""

    def __init__(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        script: Any = None,
        *,
        model: str = "anthropic/claude-haiku-4-5",
        by_model: dict[str, Any] | None = None,
        **config: Any,
    ) -> None:
        self.up = FakeUpstreamServer(script or {"turns": [TOOL_TURN, {"text": "Done."}]}, by_model=by_model).start()
        point_env_at(monkeypatch, self.up)
        self.transcript_path = tmp_path / "transcript.jsonl"
        self.transcript = TranscriptWriter(self.transcript_path)
        config.setdefault("retry", FAST_RETRY)
        self.gw = Gateway(GatewayConfig(model=model, socket_path=tmp_path / "gw.sock", **config), self.transcript)
        self.gw.start()

    def events(self, type: str | None = None, settle: float = 5.0) -> list[dict[str, Any]]:
        """The transcript's events once the calls in flight now are recorded (at most `settle` s). An
        SDK has a stream's last event before the gateway records the call, at the upstream's end of
        body (the terminating chunk may come in a read of its own), so reading at once could miss it
        — the race Gateway.settle exists for. `settle=0`: read now (a call is deliberately held)."""
        if settle:
            self.gw.settle(settle)
        return events(self.transcript_path, type)

    def wait_for(self, type: str, n: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Events of `type` once there are n (a client that aborts mid-stream does not wait for the record)."""
        deadline = time.monotonic() + timeout
        while len(found := self.events(type, settle=0)) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return found

    def close(self) -> None:
        self.gw.close()
        self.transcript.close()
        self.up.close()


def make_rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: Any, **kwargs: Any) -> Iterator[Rig]:
    rig = Rig(tmp_path, monkeypatch, *args, **kwargs)
    try:
        yield rig
    finally:
        rig.close()
