"""Scanners by name or file: `--scanner network_attempts` or `--scanner my_scanner.toml`.

A name is looked up in the entry-point group `benchctl.scanners` (benchctl/plugins.py), where
benchctl declares its built-ins (`benchctl.scan.builtins`) exactly as a plugin declares its own:

    [project.entry-points."benchctl.scanners"]
    my_scanner = "my_package:SCANNER"            # a benchctl.scan.Scanner (e.g. parse_scanner(...))

Anything that looks like a path (it ends in `.toml`, holds a `/`, or names an existing file) is a
scanner file. Names and files mix freely, but two scanners of one session may not share a name:
they would write the same results directory.
"""

from __future__ import annotations

from pathlib import Path

from benchctl.plugins import Registry, UnknownPlugin
from benchctl.scan.spec import Scanner, ScannerError, load_scanner_file

SCANNERS: Registry[Scanner] = Registry("benchctl.scanners", "scanner")


def load(name: str) -> Scanner:
    """The scanner declared as `name`; ScannerError naming the known ones, or what is wrong with it."""
    try:
        found = SCANNERS.load(name)
    except UnknownPlugin as e:
        raise ScannerError(f"--scanner {name}: {e}; or pass the path of a scanner's TOML file") from None
    if not isinstance(found, Scanner) or found.name != name:
        raise ScannerError(
            f"--scanner {name}: {SCANNERS.provider(name)} declares {found!r}, not a benchctl.scan.Scanner named "
            f"{name!r}; fix the distribution's entry point"
        )
    return found


def known_scanners() -> dict[str, Scanner]:
    """Every scanner found by name (built-in or a plugin's) that loads."""
    out = {}
    for name in SCANNERS.names():
        try:
            out[name] = load(name)
        except ScannerError:
            continue  # `benchctl doctor` says why
    return out


def resolve(ref: str) -> Scanner:
    """The scanner `ref` names (a declared name or a TOML file); ScannerError saying what exists."""
    if ref.endswith(".toml") or "/" in ref or Path(ref).is_file():
        return load_scanner_file(Path(ref))
    return load(ref)


def resolve_all(refs: list[str]) -> list[Scanner]:
    scanners = [resolve(r) for r in refs]
    seen: dict[str, str] = {}
    for ref, s in zip(refs, scanners):
        if s.name in seen:
            raise ScannerError(
                f"--scanner {ref} and --scanner {seen[s.name]} are both named {s.name!r}: they would write "
                f"the same scans/{s.name}/ directory; rename one (its `name` key)"
            )
        seen[s.name] = ref
    return scanners
