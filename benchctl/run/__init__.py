"""The run pipeline behind `benchctl run`: a sweep's configuration (`config`: arguments or a sweep
file -> validated `RunSpec`s), the checks made before anything starts (`preflight`), resume and the
results layout (`runner`), and execution with progress (`execution`, `progress`). Where each run's
sandbox, gateway and harness live is an executor's choice (`benchctl.executors`).

The public names below are imported lazily: lower layers (tasks.py, executors) import
`benchctl.run.sweep`, and an eager import here would make them import the whole pipeline first.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "ResolvedRun": "benchctl.run.config",
    "resolve_config": "benchctl.run.config",
    "write_sweep_json": "benchctl.run.config",
    "execute": "benchctl.run.execution",
    "RunError": "benchctl.run.preflight",
    "RunSpec": "benchctl.run.sweep",
    "SweepConfig": "benchctl.run.sweep",
    "SweepError": "benchctl.run.sweep",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'benchctl.run' has no attribute {name!r}")
