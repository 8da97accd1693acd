"""Files benchctl ships beside its code: the sandbox image's build context and the demo task.

In a source checkout (or an editable install) they are the repository's own `sandboxes/` and
`configs/demo/`. An installed wheel carries copies of them inside the package, under
`benchctl/_bundled/` at the same relative paths (pyproject's force-include puts them there), so
`benchctl images build` and `benchctl demo` work without a checkout.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def root() -> Path:
    """The directory holding `sandboxes/` and `configs/demo/`: the wheel's copy, else the checkout."""
    packaged = _PACKAGE / "_bundled"
    return packaged if packaged.is_dir() else _PACKAGE.parent


def sandboxes_dir() -> Path:
    """The sandbox image's build context (Dockerfiles, package list, setup script)."""
    return root() / "sandboxes"


DEMO_TASK = "configs/demo"  # relative to root(): the demo's model ids name scripts by this path


def demo_dir() -> Path:
    """The demo task (`configs/demo`)."""
    return root() / DEMO_TASK
