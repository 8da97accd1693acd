"""Shared test fixtures.

Docker tests are marked `@pytest.mark.docker`. Without a Docker Engine (or without the
sandbox image) they are skipped on a developer machine, but FAIL when
BENCHCTL_REQUIRE_DOCKER=1 (set by .ci/run), so CI can never go green by skipping them.
Browser tests (`@pytest.mark.browser`, fixtures in tests/rigs/browser.py) follow the same rule
with BENCHCTL_REQUIRE_BROWSER=1 and Debian's `chromium`, and Ray cluster tests (`@pytest.mark.ray`:
root, unshare, ray) with BENCHCTL_REQUIRE_RAY=1.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from benchctl.run.preflight import check_image
from benchctl.sandbox.docker_client import SANDBOX_TIMEOUT, docker_client
from benchctl.sandbox.images import DEFAULT_TAG as SANDBOX_IMAGE  # $BENCHCTL_IMAGE or benchctl-sandbox:latest


def checkout_metadata(repo: str) -> str:
    """A directory holding a `benchctl-VERSION.dist-info` made from this checkout's pyproject.toml: its
    entry points (the built-in harnesses and graders, benchctl/plugins.py) are this checkout's, not
    those an earlier `pip install -e` of whichever checkout recorded. First on the path, it is the
    `benchctl` distribution importlib.metadata finds (it keeps the first of a name)."""
    from benchctl import __version__  # the version's one home

    project = tomllib.loads(Path(repo, "pyproject.toml").read_text(encoding="utf-8"))["project"]
    root = tempfile.mkdtemp(prefix="benchctl-checkout-meta-")
    info = Path(root) / f"benchctl-{__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: benchctl\nVersion: {__version__}\n")
    groups = project.get("entry-points", {})
    (info / "entry_points.txt").write_text(
        "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for g, eps in groups.items())
    )
    atexit.register(shutil.rmtree, root, True)
    return root


# The processes tests start (the CLI, fake upstreams, Ray nodes) import this checkout's code too, not
# whichever checkout an editable install points at (pyproject's pythonpath covers this process), and
# see this checkout's entry points.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METADATA = checkout_metadata(REPO)
sys.path.insert(0, METADATA)
os.environ["PYTHONPATH"] = os.pathsep.join([REPO, METADATA, *filter(None, [os.environ.get("PYTHONPATH")])])


def _docker_problem() -> str | None:
    return check_image(SANDBOX_IMAGE)  # the check `benchctl run` makes before any run


_PROBLEM: list[str | None] = []


def _browser_problem() -> str | None:
    import shutil

    if shutil.which("chromium") is None:
        return "chromium not on PATH (apt-get install chromium; scripts/test.sh does it)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright not installed (pip install -e '.[dev]')"
    return None


def _ray_problem() -> str | None:
    import shutil

    try:
        import ray  # noqa: F401
    except ImportError:
        return "ray not installed (pip install -e '.[ray]')"
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return "the Ray cluster tests need root, unshare and ip (a private network namespace)"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("ray") is not None:
        _skip_or_fail(_ray_problem(), "BENCHCTL_REQUIRE_RAY")
    if item.get_closest_marker("browser") is not None:
        _skip_or_fail(_browser_problem(), "BENCHCTL_REQUIRE_BROWSER")
    if item.get_closest_marker("docker") is None:
        return
    if not _PROBLEM:
        _PROBLEM.append(_docker_problem())
    _skip_or_fail(_PROBLEM[0], "BENCHCTL_REQUIRE_DOCKER")


def _skip_or_fail(problem: str | None, require_env: str) -> None:
    """A missing piece skips its tests on a developer machine and fails them where `require_env`=1 (CI)."""
    if problem:
        if os.environ.get(require_env) == "1":
            pytest.fail(f"{require_env}=1 but {problem}", pytrace=False)
        pytest.skip(problem)


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    return SANDBOX_IMAGE


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """One raw Docker client for the tests that look at or tidy containers themselves (benchctl's
    own code opens its clients with benchctl.sandbox.docker_client); closed at the end."""
    with closing(docker_client(SANDBOX_TIMEOUT)) as client:
        yield client
