"""Sweeps: models × harnesses × budgets × variants × seeds, expanded into RunSpecs.

A sweep comes from the command line (`benchctl run TASK --model M --budget 10m --seeds 3`) or
from a sweep file (`benchctl run --sweep sweep.toml`); both produce the same `SweepConfig`,
which is validated completely before any run starts and written to `sweep.json`.

Sweep file:

    task = "configs/demo"          # relative to the sweep file
    models = ["scripted/configs/demo/investigator.json"]
    harnesses = ["react"]
    budgets = ["2m"]
    seeds = 2                      # or a list, e.g. [0, 3]
    variants = []                  # names from the task's [variants]; "" or "base" = unmodified data
    concurrency = 4
    tools = ["default", "prefill"]  # tool configurations, for tasks with a [target] (benchctl.targets)
    fallback = "anthropic/claude-x"  # optional refusal fallback
    out = "results/demo"            # relative to the sweep file; --out overrides
    [harness_options]               # merged over the task's
    reasoning_effort = "high"
    [limits]                        # the sweep's: cost cap, provider rate limits (benchctl/limits/config.py)
    max_cost = 50
    max_connections = 8
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchctl.layout import make_run_id
from benchctl.limits.config import LimitsConfig, LimitsConfigError, parse_sweep_limits
from benchctl.policies import parse_duration
from benchctl.tasks import BASE_VARIANTS


class SweepError(ValueError):
    pass


@dataclass(frozen=True)
class RunSpec:
    """One run: everything that distinguishes it from the other runs of a sweep."""

    run_id: str
    task: str  # task name
    task_dir: str  # absolute path
    harness: str
    model: str
    budget: str
    budget_s: float
    seed: int
    variant: str | None
    fallback: str | None
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepConfig:
    task_dir: Path
    models: list[str]
    harnesses: list[str] = field(default_factory=lambda: ["react"])
    budgets: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=lambda: [0])
    variants: list[str | None] = field(default_factory=lambda: [None])
    concurrency: int = 1
    fallback: str | None = None
    out: Path | None = None
    harness_options: dict[str, Any] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)  # tool configurations (hidden-behaviour tasks)
    limits: LimitsConfig = field(default_factory=LimitsConfig)  # cost cap, provider rate limits

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["task_dir"] = str(self.task_dir)
        d["out"] = str(self.out) if self.out else None
        d["limits"] = self.limits.to_dict()
        return d


def seeds_list(value: int | list[int]) -> list[int]:
    """`3` means seeds 0, 1, 2; a list is taken as given."""
    if isinstance(value, bool):
        raise SweepError("seeds must be a number or a list of numbers")
    if isinstance(value, int):
        if value < 1:
            raise SweepError(f"seeds must be >= 1, got {value}")
        return list(range(value))
    if isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        if len(set(value)) != len(value):
            raise SweepError(f"seeds list has duplicates: {value}")
        return list(value)
    raise SweepError(f"seeds must be a number or a non-empty list of numbers, got {value!r}")


def normalize_variant(v: str | None) -> str | None:
    return None if v is None or v in BASE_VARIANTS else v


def expand(cfg: SweepConfig, task_name: str, budgets: list[str], options_for: Any = None) -> list[RunSpec]:
    """Every run of the sweep, in a stable order (model, harness, budget, variant, seed)."""
    specs: list[RunSpec] = []
    seen: set[str] = set()
    for model in cfg.models:
        for harness in cfg.harnesses:
            for budget in budgets:
                for variant in cfg.variants:
                    for seed in cfg.seeds:
                        rid = make_run_id(task_name, harness, model, budget, seed, variant)
                        if rid in seen:  # e.g. the same model given twice
                            continue
                        seen.add(rid)
                        opts = dict(options_for(harness)) if options_for else {}
                        opts.update(cfg.harness_options)
                        specs.append(
                            RunSpec(
                                rid,
                                task_name,
                                str(cfg.task_dir),
                                harness,
                                model,
                                budget,
                                parse_duration(budget),
                                seed,
                                variant,
                                cfg.fallback,
                                opts,
                            )
                        )
    return specs


def load_sweep_file(path: str | os.PathLike[str]) -> SweepConfig:
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise SweepError(f"{file}: sweep file not found. Fix: give the path to a sweep .toml")
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{file}: not valid TOML ({e})") from None
    allowed = {
        "task",
        "models",
        "harnesses",
        "budgets",
        "seeds",
        "variants",
        "concurrency",
        "fallback",
        "out",
        "harness_options",
        "tools",
        "limits",
    }
    for k in raw:
        if k not in allowed:
            raise SweepError(f"{file}: key `{k}`: unknown key. Fix: use one of {', '.join(sorted(allowed))}")

    def strlist(key: str, required: bool) -> list[str]:
        v = raw.get(key)
        if v is None:
            if required:
                raise SweepError(f'{file}: key `{key}`: missing. Fix: add {key} = ["..."]')
            return []
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise SweepError(f"{file}: key `{key}`: must be a list of strings")
        return v

    if not isinstance(raw.get("task"), str):
        raise SweepError(f'{file}: key `task`: missing. Fix: task = "path/to/task-dir" (relative to the sweep file)')
    try:
        seeds = seeds_list(raw.get("seeds", 1))
    except SweepError as e:
        raise SweepError(f"{file}: key `seeds`: {e}") from None
    conc = raw.get("concurrency", 1)
    if not isinstance(conc, int) or isinstance(conc, bool) or conc < 1:
        raise SweepError(f"{file}: key `concurrency`: must be a whole number >= 1")
    for key in ("fallback", "out"):
        if key in raw and not isinstance(raw[key], str):
            raise SweepError(f"{file}: key `{key}`: must be a string, got {raw[key]!r}")
    opts = raw.get("harness_options", {})
    if not isinstance(opts, dict):
        raise SweepError(f"{file}: key `harness_options`: must be a table")
    try:
        limits = parse_sweep_limits(raw.get("limits", {}), str(file))
    except LimitsConfigError as e:
        raise SweepError(str(e)) from None
    return SweepConfig(
        task_dir=(file.parent / raw["task"]).resolve(),
        models=strlist("models", True),
        harnesses=strlist("harnesses", False) or ["react"],
        budgets=strlist("budgets", False),
        seeds=seeds,
        variants=[normalize_variant(v) for v in strlist("variants", False)] or [None],
        concurrency=conc,
        fallback=raw.get("fallback"),
        out=(file.parent / raw["out"]).resolve() if isinstance(raw.get("out"), str) else None,
        harness_options=dict(opts),
        tools=strlist("tools", False),
        limits=limits,
    )
