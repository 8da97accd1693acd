"""A third-party plugin distribution for the tests: tests/plugins/tiny (a harness `tiny`, a grader
`nonempty`), built into a wheel here and installed by pip into a directory of its own, the layout
`pip install` gives site-packages. A process with that directory on its PYTHONPATH has the plugin
installed; one without it has not."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "plugins" / "tiny"
# stands for PyPI's `harnesses` distribution: a top-level package named like benchctl's built-in one
CLASH = REPO / "tests" / "plugins" / "harnesses-clash"


def entry_points_txt(groups: dict[str, dict[str, str]]) -> str:
    return "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for g, eps in groups.items())


def build_wheel(src: Path, dest: Path) -> Path:
    """A pure-Python wheel of the project in `src` (its pyproject's name, version, dependencies and
    entry points; its *.py files), as a build backend would make it."""
    project = tomllib.loads((src / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dist, version = project["name"].replace("-", "_"), project["version"]
    info = f"{dist}-{version}.dist-info"
    files = {str(p.relative_to(src)): p.read_bytes() for p in sorted(src.rglob("*.py"))}
    requires = "".join(f"Requires-Dist: {d}\n" for d in project.get("dependencies", []))
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n{requires}".encode()
    )
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: benchctl-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/entry_points.txt"] = entry_points_txt(project.get("entry-points", {})).encode()
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in files.items()
    ]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = dest / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


def install(src: Path, dest: Path) -> Path:
    """pip-install the project in `src` into `dest`/site (no index, no dependencies: benchctl is this checkout)."""
    dest.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(src, dest)
    site = dest / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "--quiet"]
        + ["--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return site


def install_tiny(dest: Path) -> Path:
    return install(TINY, dest)


def env_with(site: Path, first: bool = False) -> dict[str, str]:
    """The environment of a process that has the distributions in `site` installed: after this
    checkout's benchctl, or `first`, before it (as site-packages comes before an editable install's finder)."""
    paths = [str(site), os.environ["PYTHONPATH"]] if first else [os.environ["PYTHONPATH"], str(site)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
