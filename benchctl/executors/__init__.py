"""The Executor seam: "run this spec somewhere and stream its events back".

The runner (benchctl/run/runner.py) keeps resume, locking and the results layout; an executor only
decides where a run's gateway + harness + sandbox live:

- `local` (benchctl/executors/local.py): in a thread of this process, on this machine's Docker;
- `ray` (benchctl/executors/ray_driver.py): on a node of a Ray cluster with a free
  `benchctl_sandbox` slot; events stream back to the driver's transcript, files come back at
  the end.

Both execute the same run body (benchctl/executors/run_body.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from benchctl.harness import HarnessResult
from benchctl.layout import RunMeta
from benchctl.run.sweep import RunSpec
from benchctl.tasks import Task
from benchctl.transcript import TranscriptWriter

if TYPE_CHECKING:  # the limits are imported when a sweep makes its limiter
    from benchctl.limits import Limiter
    from benchctl.limits.config import LimitsConfig
    from benchctl.limits.run import LimitsPlan


@dataclass
class PreparedData:
    """The data directory a run mounts (the task's, or a variant's copy), its hash and rule counts."""

    path: Path | None
    task_hash: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class RunJob:
    """Everything one run needs, wherever it executes."""

    spec: RunSpec
    task: Task
    data: PreparedData
    run_dir: Path  # the run's directory in the driver's results dir
    meta: RunMeta  # the base meta the runner made; the run body fills in the rest
    limits: LimitsPlan | None = None  # the sweep's shared limiter and caps (None: none)


@dataclass
class RunOutcome:
    result: HarnessResult
    meta: RunMeta  # job.meta, filled in by the run body
    # The executor lost the run through no fault of the run itself (a Ray node died): the runner
    # records this attempt as `error`, moves it to attempts/ and runs it again elsewhere.
    retryable: bool = False


class Executor(Protocol):
    name: str
    retries: int  # how often a run this executor lost (RunOutcome.retryable) is redone

    def check(self, task: Task, specs: list[RunSpec]) -> str | None:
        """Before anything is written: the problem (with its fix) that stops these runs, else None."""
        ...

    def parallelism(self, requested: int) -> int:
        """How many runs to keep in flight when `requested` (--concurrency) were asked for."""
        ...

    def limiter(self, config: LimitsConfig, spent: float) -> Limiter:
        """The sweep's one limiter for `config`, its spend starting at `spent` USD, shared by every
        run wherever it executes."""
        ...

    def execute(self, job: RunJob, transcript: TranscriptWriter, cancel: threading.Event) -> RunOutcome:
        """Run one job to its end (blocking). Events go to `transcript` as they happen; files go
        into `job.run_dir` (artifacts/, harness/). Never writes meta.json: the runner does."""
        ...

    def stop_all(self) -> None:
        """Cancel: stop every live run's sandbox and gateway now (called from a signal's thread)."""
        ...

    def close(self) -> None: ...
