"""The local executor: each run in a thread of this process, on this machine's Docker Engine."""

from __future__ import annotations

import threading
from typing import Any

from benchctl.executors import RunJob, RunOutcome
from benchctl.executors.run_body import GatewayFactory, LiveRuns, SandboxFactory, docker_sandbox, real_gateway, run_body
from benchctl.run.sweep import RunSpec
from benchctl.tasks import Task
from benchctl.transcript import TranscriptWriter


class LocalExecutor:
    name = "local"
    retries = 0  # a local run is never lost by the executor

    def __init__(
        self, sandbox_factory: SandboxFactory | None = None, gateway_factory: GatewayFactory | None = None
    ) -> None:
        self.sandbox_factory = sandbox_factory or docker_sandbox
        self.gateway_factory = gateway_factory or real_gateway
        self.uses_docker = sandbox_factory is None
        self._live: LiveRuns | None = None
        self._lock = threading.Lock()

    def check(self, task: Task, specs: list[RunSpec]) -> str | None:
        if not self.uses_docker:
            return None
        from benchctl.run.preflight import check_image, image_origin

        return check_image(task.image, image_origin(task))

    def parallelism(self, requested: int) -> int:
        return requested

    def limiter(self, config: Any, spent: float) -> Any:
        from benchctl.limits.local import LocalLimiter

        return LocalLimiter(config, spent)

    def _live_runs(self, cancel: threading.Event) -> LiveRuns:
        with self._lock:  # one runner (so one cancel event) per executor
            if self._live is None:
                self._live = LiveRuns(cancel)
            return self._live

    def execute(self, job: RunJob, transcript: TranscriptWriter, cancel: threading.Event) -> RunOutcome:
        return run_body(
            job,
            job.run_dir,
            transcript,
            self._live_runs(cancel),
            sandbox_factory=self.sandbox_factory,
            gateway_factory=self.gateway_factory,
        )

    def stop_all(self) -> None:
        with self._lock:
            live = self._live
        if live is not None:
            live.stop_all()

    def close(self) -> None:
        pass
