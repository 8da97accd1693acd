"""Exports of runs to the ecosystem's interchange formats: `benchctl export RESULTS --to inspect|atif`.

`events.py` is the one iterator over a run's events (and `wire.py` the requests as the model saw
them); each format is written over it (`inspect.py` with `inspect_stream.py`, `atif.py`) and
knows nothing of the other. Formats are imported on use: each needs its optional extra (`benchctl[inspect]`,
`benchctl[atif]`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

FORMATS = {
    "inspect": ("benchctl.export.inspect", "inspect-ai", "inspect"),
    "atif": ("benchctl.export.atif", "atif", "atif"),
}


class MissingExtra(RuntimeError):
    pass


@dataclass
class ExportResult:
    written: list[Path]
    runs: list[str]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (run id, why)


def export(results: Path, to: str, out: Path, run_glob: str | None = None) -> ExportResult:
    """Export the finished runs of `results` (optionally only run ids matching `run_glob`) into `out`."""
    from benchctl.export.events import find_runs

    module_name, package, extra = FORMATS[to]
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise MissingExtra(
            f"--to {to} needs the {package} package ({e}); install it with pip install 'benchctl[{extra}]'"
        ) from e
    runs, unfinished, skipped = find_runs(Path(results), run_glob)
    written = module.export(runs, Path(out), unfinished) if runs else []
    return ExportResult(written, [r.run_id for r in runs], skipped)
