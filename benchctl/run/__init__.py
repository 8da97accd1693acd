"""The run pipeline behind `benchctl run`: a sweep's configuration (`config`: arguments or a sweep
file -> validated `RunSpec`s), the checks made before anything starts (`preflight`), resume and the
results layout (`runner`), and execution with progress (`execute`, `progress`). Where each run's
sandbox, gateway and harness live is an executor's choice (`benchctl.executors`).
"""

from benchctl.run.config import ResolvedRun, resolve_config, write_sweep_json
from benchctl.run.execute import execute
from benchctl.run.preflight import RunError
from benchctl.run.sweep import RunSpec, SweepConfig, SweepError

__all__ = [
    "ResolvedRun",
    "RunError",
    "RunSpec",
    "SweepConfig",
    "SweepError",
    "execute",
    "resolve_config",
    "write_sweep_json",
]
