"""The type check, as a test: `python -m mypy benchctl harnesses` with pyproject.toml's [tool.mypy]
(every module is checked). Any error fails this
test, listed. Cold (a fresh cache, as every pytest session starts) it takes ~25 s on a quiet 2-core
machine; the cache lives under pytest's tmp dir so a run never reads another checkout's results.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_benchctl_and_harnesses_type_check(tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.mktemp("mypy-cache")
    # cwd=REPO: mypy reads pyproject.toml there and resolves `benchctl` / `harnesses` to this
    # checkout (the directories named on the command line come before site-packages)
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "benchctl", "harnesses"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "No module named mypy" not in res.stderr, "mypy is missing: pip install -e '.[dev]'"
    assert res.returncode in (0, 1), res.stdout + res.stderr  # 2: mypy itself failed (bad config, crash)
    errors = [line for line in res.stdout.splitlines() if ": error: " in line]
    assert not errors, (
        f"mypy found {len(errors)} type error(s) (fix the types; see docs/contributing.md):\n" + "\n".join(errors)
    )
    assert res.returncode == 0, res.stdout + res.stderr
