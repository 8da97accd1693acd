"""Load an Inspect task with inspect-ai and print its samples as JSON (the richer import path).

    python -m benchctl.task_import.inspect_load TASK_FILE FUNCTION   (run in the task file's directory)

Run as a subprocess by inspect.py when `--with-inspect` is given: loading a task runs its Python
code (and whatever its dataset loader does), so it is kept out of the importing process. Prints
{"inspect_version", "samples": [{id, input, target, choices, metadata}], "solver", "scorer",
"sandbox"}; any failure exits non-zero with the reason on stderr.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any


def _registry_name(obj: Any) -> str:
    try:
        from inspect_ai._util.registry import registry_info  # no public accessor for a solver's name

        return str(registry_info(obj).name)
    except Exception:
        return getattr(obj, "__name__", None) or type(obj).__name__


def _input(value: Any) -> Any:
    """A sample input: text, or chat messages as {"role", "content"} with the text of each."""
    if isinstance(value, str):
        return value
    return [{"role": getattr(m, "role", "?"), "content": getattr(m, "text", str(m))} for m in value]


def load(file: Path, function: str) -> dict[str, Any]:
    import inspect_ai

    sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(f"benchctl_imported_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = getattr(module, function)()
    samples = []
    for s in task.dataset:
        item: dict[str, Any] = {"input": _input(s.input), "target": s.target}
        if s.id is not None:
            item["id"] = s.id
        if s.choices:
            item["choices"] = list(s.choices)
        if s.metadata:
            item["metadata"] = s.metadata
        samples.append(item)
    scorers = task.scorer if isinstance(task.scorer, list) else [task.scorer] if task.scorer else []
    sandbox = getattr(task, "sandbox", None)
    return {
        "inspect_version": inspect_ai.__version__,
        "samples": samples,
        "solver": _registry_name(task.solver),
        "scorer": [_registry_name(s) for s in scorers],
        "sandbox": [sandbox.type, sandbox.config if isinstance(sandbox.config, str) else None] if sandbox else None,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m benchctl.task_import.inspect_load TASK_FILE FUNCTION", file=sys.stderr)
        return 2
    try:
        out = load(Path(argv[0]).resolve(), argv[1])
    except Exception as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
