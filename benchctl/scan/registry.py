"""Scanners by name or file: `--scanner network_attempts` or `--scanner my_scanner.toml`.

A name is a built-in scanner (`benchctl.scan.builtins`); anything that looks like a path (it ends in
`.toml`, holds a `/`, or names an existing file) is a scanner file. Names and files mix freely, but
two scanners of one session may not share a name: they would write the same results directory.
"""

from __future__ import annotations

from pathlib import Path

from benchctl.scan.spec import Scanner, ScannerError, load_scanner_file


def builtin_scanners() -> dict[str, Scanner]:
    from benchctl.scan.builtins import BUILTINS

    return dict(BUILTINS)


def resolve(ref: str) -> Scanner:
    """The scanner `ref` names (a built-in name or a TOML file); ScannerError saying what exists."""
    if ref.endswith(".toml") or "/" in ref or Path(ref).is_file():
        return load_scanner_file(Path(ref))
    known = builtin_scanners()
    if ref in known:
        return known[ref]
    raise ScannerError(
        f"--scanner {ref}: no built-in scanner of that name (built-in: {', '.join(sorted(known))}); "
        "to use your own, pass the path of its TOML file (docs/scanning.md)"
    )


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
