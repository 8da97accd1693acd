"""The lint and format gates, as tests: `ruff check .` and `ruff format --check .` with
pyproject.toml's [tool.ruff] (docs/contributing.md, Gates). Each takes well under a second."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "No module named ruff" not in res.stderr, "ruff is missing: pip install -e '.[dev]'"
    return res


def test_ruff_check_is_clean() -> None:
    res = _ruff("check", "--output-format", "concise", ".")
    assert res.returncode == 0, (
        f"ruff check found problems (`ruff check --fix .` mends many):\n{res.stdout}{res.stderr}"
    )


def test_ruff_format_is_clean() -> None:
    res = _ruff("format", "--check", ".")
    assert res.returncode == 0, f"files not formatted (run `ruff format .`):\n{res.stdout}{res.stderr}"
