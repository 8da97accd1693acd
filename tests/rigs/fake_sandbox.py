"""The CLI harnesses without a Docker Engine: the real DockerSandbox over an in-memory Docker API
(benchctl.testing.fake_docker), and a HarnessContext around it with a stub gateway."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from benchctl.harness import HarnessContext
from benchctl.policies import Budget, RunPolicies
from benchctl.sandbox import cleanup
from benchctl.sandbox.base import ExecResult, SandboxSpec
from benchctl.sandbox.docker_exec import EXEC_MARKER
from benchctl.sandbox.docker_sandbox import DockerSandbox
from benchctl.testing.fake_docker import FakeDocker, Process
from benchctl.transcript import TranscriptWriter


class FakeSandbox(DockerSandbox):
    """The real DockerSandbox over an in-memory Docker API (benchctl.testing.fake_docker), so the
    harness's commands take the same exec path as in a real container. `reply(argv)` says what a
    command prints and how it ends; `timed_out=True`: it prints, then runs until it is killed.
    stdout arrives in pieces that cut lines (and Docker's frames) anywhere."""

    def __init__(self, reply: Callable[[list[str]], ExecResult]) -> None:
        self.reply = reply
        self.docker = FakeDocker(self._command)
        super().__init__(SandboxSpec(image="fake", run_id="r"), client=self.docker)
        self.start()
        cleanup.unregister(self.name)  # an in-memory container: nothing for the exit-time cleanup to remove

    def _command(self, proc: Process) -> int | None:
        res = self.reply(list(proc.argv))
        out = res.stdout.encode()
        for i in range(0, len(out), 997):
            proc.out(out[i : i + 997])
        proc.err(res.stderr)
        if res.timed_out:
            proc.hang()
        return res.exit_code

    @property
    def commands(self) -> list[tuple[list[str], dict[str, str]]]:
        """The commands run as the sandbox user, with the env each was given."""
        return [
            (proc.argv, {k: v for k, v in proc.env.items() if k != EXEC_MARKER})
            for proc in self.docker.programs
            if proc.user != "root"
        ]

    @property
    def files(self) -> dict[str, bytes]:
        """Every file written into the sandbox, by path."""
        box = self.docker.containers[self.container_id or ""]
        return {path: e.data for path, e in box.files.items() if e.data is not None}


class StubGateway:
    socket_path = Path("/tmp/some-run/gateway.sock")

    def __init__(self) -> None:
        self.routes: list[str] = []

    def add_route(self, prefix: str, handler: Any) -> None:
        self.routes.append(prefix)

    def add_observer(self, observer: Any) -> None:  # the hook host's ledger (no model traffic here)
        pass

    def summary(self) -> dict[str, Any]:
        return {"fallbacks": []}

    def settle(self, timeout: float) -> bool:  # no model traffic here: nothing in flight
        return True


def stream(*events: dict[str, Any]) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


def ctx_for(tmp_path: Path, sandbox: FakeSandbox, budget_s: float = 600, start: float | None = None) -> HarnessContext:
    return HarnessContext(
        run_id="r",
        model="anthropic/claude-opus-5-5",
        instructions="Investigate.",
        sandbox=sandbox,
        gateway=StubGateway(),
        transcript=TranscriptWriter(tmp_path / "transcript.jsonl"),
        budget=Budget(start or time.time(), budget_s),
        policies=RunPolicies(),
        run_dir=tmp_path,
    )


def events(tmp_path: Path, type: str) -> list[dict[str, Any]]:
    return [
        e for e in map(orjson.loads, (tmp_path / "transcript.jsonl").read_bytes().splitlines()) if e["type"] == type
    ]
