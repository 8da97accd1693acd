"""Sandbox resource limits (a task's `[limits]` table): units and ranges are checked before any
run starts, so a typo never reaches Docker and no value can quietly mean "no limit".

    [limits]
    cpus = 1.5       # CPUs: 0.01 .. this machine's CPU count (default 1)
    memory = "4g"    # a number with a unit: b, k, m, g, t (powers of 1024, as Docker reads them;
                     # "4gb" and "4GiB" mean the same); 64m .. this machine's memory (default 2g), no swap
    pids = 256       # processes and threads in the sandbox: 32 .. 32768 (default 256)
    work = "1g"      # size of /work, same units as memory: 16m .. memory (default: half the memory,
                     # at most 1g). /work and the other writable directories (/tmp, /var/tmp, the home
                     # directory, CLI state; each capped at this size) are tmpfs: held in RAM and counted
                     # against `memory`, so an agent can never fill the host's disk. Writing past it
                     # fails with ENOSPC ("No space left on device").

Docker reads `pids <= 0` and `cpus = 0` as *unlimited* (no fork-bomb protection, no CPU cap),
hence the lower bounds. The upper bounds that depend on the machine (CPUs, memory) are checked
by `check_fits_host` when runs are about to start, not when a task is loaded, so a task written
for a big machine still loads (and grades) on a small one.
"""

from __future__ import annotations

import os
import re
from dataclasses import fields, replace
from typing import Any

from benchctl.sandbox.base import Limits

MIN_CPUS = 0.01  # Docker's own granularity
MIN_MEMORY = 64 * 1024**2  # below this even bash and python3 in the sandbox fail to start
MIN_PIDS = 32  # tini, the exec wrapper, a shell and an agent CLI's threads
MAX_PIDS = 32768  # Linux's classic pid_max: more is no protection against a fork bomb
MIN_WORK = 16 * 1024**2  # the agent CLIs' session files and a report fit easily
_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*(b|[kmgt](?:i?b)?)", re.IGNORECASE)
_MEMORY_FIX = 'a number with a unit (b, k, m, g, t), e.g. memory = "4g" or "512m"'
_WORK_FIX = 'a number with a unit (b, k, m, g, t), e.g. work = "1g" or "512m"'


class LimitError(ValueError):
    """A bad limit: `key` (cpus, memory, pids, work or an unknown one), what is wrong and the fix."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"limits.{key}: {problem}. Fix: {fix}")
        self.key, self.problem, self.fix = key, problem, fix


def size_bytes(value: Any, key: str = "memory", fix: str = _MEMORY_FIX) -> int:
    """'4g' -> 4294967296 (powers of 1024). A bare number is refused: 4 could mean 4 bytes or 4 GB."""
    if not isinstance(value, str):
        raise LimitError(key, f"expected a string with a unit, got {type(value).__name__} {value!r}", fix)
    m = _MEMORY.fullmatch(value.strip())
    if not m:
        raise LimitError(key, f"{value!r} is not a size with a unit", fix)
    return int(float(m.group(1)) * _UNITS[m.group(2)[0].lower()])


def memory_bytes(value: Any) -> int:
    """'4g' -> 4294967296, at least 64m."""
    n = size_bytes(value)
    if n < MIN_MEMORY:
        raise LimitError("memory", f"{value!r} is below the minimum of 64m", 'use at least "64m" (the default is "2g")')
    return n


DEFAULT_WORK = 1024**3


def work_bytes(value: Any, memory: Any = "2g") -> int:
    """The size of /work: '1g' -> 1073741824, at least 16m; None: half of `memory`, at most 1g."""
    if value is None:
        return max(MIN_WORK, min(DEFAULT_WORK, memory_bytes(memory) // 2))
    n = size_bytes(value, "work", _WORK_FIX)
    if n < MIN_WORK:
        raise LimitError(
            "work",
            f"{value!r} is below the minimum of 16m",
            'use at least "16m" (the default is half the memory, at most "1g")',
        )
    return n


def _number(key: str, value: Any, kind: type, fix: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise LimitError(
            key,
            f"expected a {'number' if kind is float else 'whole number'}, got {type(value).__name__} {value!r}",
            fix,
        )
    return kind(value)


def check_limits(lim: Limits) -> None:
    """Types, units and the machine-independent ranges; raises LimitError."""
    cpus = _number("cpus", lim.cpus, float, "e.g. cpus = 1.5")
    if cpus < MIN_CPUS:
        raise LimitError(
            "cpus",
            f"{lim.cpus!r} is below {MIN_CPUS} (Docker would not limit the CPU at all)",
            "use a positive number of CPUs, e.g. cpus = 1 (the default)",
        )
    memory = memory_bytes(lim.memory)
    if work_bytes(lim.work, lim.memory) > memory:
        # /work lives in the sandbox's memory: filled past `memory` it would end in the OOM killer, not ENOSPC.
        raise LimitError(
            "work",
            f"{lim.work!r} is more than memory = {lim.memory!r} (/work is held in the sandbox's memory)",
            f'use at most work = "{lim.memory}", or raise memory',
        )
    pids = _number("pids", lim.pids, int, "e.g. pids = 256")
    if not MIN_PIDS <= pids <= MAX_PIDS:
        why = " (Docker reads 0 or less as no limit: no fork-bomb protection)" if pids <= 0 else ""
        raise LimitError(
            "pids",
            f"{pids} is outside {MIN_PIDS}..{MAX_PIDS}{why}",
            f"use a value from {MIN_PIDS} to {MAX_PIDS}, e.g. pids = 256 (the default)",
        )


def parse_limits(table: dict[str, Any], also_allowed: tuple[str, ...] = ()) -> Limits:
    """A `[limits]` table (missing keys take the defaults), checked with `check_limits`.
    `also_allowed`: other keys of the same table that the caller has taken out (named in the fix)."""
    allowed = [f.name for f in fields(Limits)]
    for key in table:
        if key not in allowed:
            raise LimitError(key, "unknown key", f"use one of: {', '.join(allowed + list(also_allowed))}")
    lim = Limits(**table)
    check_limits(lim)
    return replace(lim, cpus=float(lim.cpus))


def host_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits_host(lim: Limits, cpus: int | None = None, memory: int | None = None) -> None:
    """The machine-dependent upper bounds (this machine runs the sandboxes: the gateway socket is
    bind-mounted, so the Docker Engine is local). Docker itself refuses more CPUs than the host
    has, but only when the container is created, after a run has started."""
    have_cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    if lim.cpus > have_cpus:
        raise LimitError(
            "cpus", f"{lim.cpus:g} is more than the {have_cpus} CPUs of this machine", f"use at most cpus = {have_cpus}"
        )
    have_memory = memory if memory is not None else host_memory()
    if memory_bytes(lim.memory) > have_memory:
        raise LimitError(
            "memory",
            f"{lim.memory!r} is more than this machine's {have_memory / 1024**3:.1f} GiB",
            f'use at most "{have_memory // 1024**2}m"',
        )
