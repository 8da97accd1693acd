"""The local executor: each run in a thread of this process, on this machine's Docker Engine."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from benchctl.executors import RunJob, RunOutcome
from benchctl.executors.run_body import LiveRuns, run_body
from benchctl.run.sweep import RunSpec
from benchctl.tasks import Task
from benchctl.transcript import TranscriptWriter

if TYPE_CHECKING:
    from benchctl.limits.config import LimitsConfig
    from benchctl.limits.local import LocalLimiter


class LocalExecutor:
    name = "local"
    retries = 0  # a local run is never lost by the executor

    def __init__(self) -> None:
        self._live: LiveRuns | None = None
        self._lock = threading.Lock()

    def check(self, task: Task, specs: list[RunSpec]) -> str | None:
        from benchctl.run.preflight import check_image, image_origin

        return check_image(task.image, image_origin(task))

    def parallelism(self, requested: int) -> int:
        return requested

    def limiter(self, config: LimitsConfig, spent: float) -> LocalLimiter:
        from benchctl.limits.local import LocalLimiter

        return LocalLimiter(config, spent)

    def _live_runs(self, cancel: threading.Event) -> LiveRuns:
        with self._lock:  # one runner (so one cancel event) per executor
            if self._live is None:
                self._live = LiveRuns(cancel)
            return self._live

    def execute(self, job: RunJob, transcript: TranscriptWriter, cancel: threading.Event) -> RunOutcome:
        return run_body(job, job.run_dir, transcript, self._live_runs(cancel))

    def stop_all(self) -> None:
        with self._lock:
            live = self._live
        if live is not None:
            live.stop_all()

    def close(self) -> None:
        pass
