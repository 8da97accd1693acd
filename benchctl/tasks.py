"""Tasks: a directory with a `task.toml`, loaded, validated and hashed.

A task says what the agent is asked to do (instructions), what evidence it gets (a data
directory, mounted read-only at /data), which image it runs in, which files it must leave in
/work (artifacts), the budgets and policies that apply, follow-up prompts, data variants
(declarative find/replace rules applied to a copy of the data) and a `[grading]` table that
`benchctl grade` reads (kept as a raw dict here; the graders define its keys).

Every problem in a task file is reported as a `TaskError` naming the file, the key and the fix,
before anything runs.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchctl.policies import EarlyExitPolicy, LengthPolicy, RunPolicies, parse_duration
from benchctl.sandbox.base import Limits
from benchctl.sandbox.images import DEFAULT_TAG
from benchctl.sandbox.limits import LimitError, check_fits_host, parse_limits

TASK_FILE = "task.toml"
# `--variant base` (or an empty name, or "none") means the unmodified data, so no variant may take these names
BASE_VARIANTS = ("", "base", "none")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def is_task_name(name: str) -> bool:
    """A usable task (or variant) name: letters, digits, '.', '_' or '-', not starting with a symbol."""
    return bool(_NAME.match(name))


_TOP_KEYS = {
    "name",
    "description",
    "instructions",
    "instructions_file",
    "data",
    "image",
    "artifacts",
    "budgets",
    "early_exit",
    "length",
    "notices",
    "followups",
    "variants",
    "harness_options",
    "limits",
    "grading",
    "tool_timeout",
    "pause_budget_on_rate_limit",
    "target",
    "tools",  # hidden-behaviour audits: parsed and validated by benchctl.targets.spec
    "validation",  # target validation (`benchctl targets validate`): benchctl.targets.study_config
    "pin",
    "task_tests",
}  # imported tasks: benchctl.task_import.pin / .open_book


class TaskError(ValueError):
    """A task file problem: message names the file, the key and what to do."""


@dataclass(frozen=True)
class VariantRule:
    find: str
    replace: str
    regex: bool = False
    files: tuple[str, ...] = ("*",)  # glob patterns on paths relative to the data dir


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    rules: tuple[VariantRule, ...]


@dataclass(frozen=True)
class Followup:
    prompt: str
    budget: str | None = None  # defaults to the run's budget


@dataclass
class Task:
    name: str
    task_dir: Path  # absolute
    task_file: Path
    instructions: str
    data_dir: Path | None
    image: str = DEFAULT_TAG  # $BENCHCTL_IMAGE or benchctl-sandbox:latest
    artifacts: list[str] = field(default_factory=lambda: ["report.md"])
    budgets: list[str] = field(default_factory=list)
    policies: RunPolicies = field(default_factory=RunPolicies)
    followups: list[Followup] = field(default_factory=list)
    variants: dict[str, Variant] = field(default_factory=dict)
    harness_options: dict[str, Any] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    grading: dict[str, Any] = field(default_factory=dict)
    tool_timeout: float = 120.0
    description: str = ""
    pin: Any = None  # benchctl.task_import.pin.Pin of an imported task, else None
    max_cost: float | None = None  # [limits] max_cost: USD one run may spend (benchctl/limits)
    pause_budget_on_rate_limit: bool = True  # rate-limit waits extend the run's deadline (benchctl/limits)

    def options_for(self, harness: str) -> dict[str, Any]:
        """Harness options: top-level keys, overridden by a sub-table named after the harness."""
        flat = {k: v for k, v in self.harness_options.items() if not isinstance(v, dict)}
        flat.update(
            self.harness_options.get(harness, {}) if isinstance(self.harness_options.get(harness), dict) else {}
        )
        return flat


def _err(file: Path, key: str, problem: str, fix: str) -> TaskError:
    return TaskError(f"{file}: key `{key}`: {problem}. Fix: {fix}")


def _typed(
    file: Path, table: dict[str, Any], key: str, kind: type | tuple[type, ...], fix: str, prefix: str = ""
) -> Any:
    v = table[key]
    if kind is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
        raise _err(file, prefix + key, f"expected {getattr(kind, '__name__', kind)}, got {type(v).__name__} {v!r}", fix)
    return v


def _unknown(file: Path, table: dict[str, Any], allowed: set[str], prefix: str) -> None:
    for k in table:
        if k not in allowed:
            raise _err(file, prefix + k, "unknown key", f"use one of: {', '.join(sorted(allowed))}")


def load_task(path: str | os.PathLike[str]) -> Task:
    """Load and validate a task directory (or its task.toml)."""
    p = Path(path).expanduser().resolve()
    file = p if p.is_file() else p / TASK_FILE
    if not file.exists():
        raise TaskError(
            f"{file}: no task file. Fix: pass a task directory containing {TASK_FILE}, "
            f"or start one with `benchctl tasks new NAME`"
        )
    task_dir = file.parent
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{file}: not valid TOML ({e}). Fix: correct the syntax at that line") from None
    _unknown(file, raw, _TOP_KEYS, "")

    name = raw.get("name", task_dir.name)
    if not isinstance(name, str) or not _NAME.match(name):
        raise _err(file, "name", f"{name!r} is not a usable task name", "use letters, digits, '.', '_' or '-'")

    if "instructions" in raw and "instructions_file" in raw:
        raise _err(file, "instructions", "both `instructions` and `instructions_file` are set", "keep one of them")
    if "instructions_file" in raw:
        ipath = task_dir / _typed(file, raw, "instructions_file", str, "give a path relative to the task dir")
        if not ipath.is_file():
            raise _err(file, "instructions_file", f"{ipath} does not exist", "create it or fix the path")
        instructions = ipath.read_text(encoding="utf-8")
    elif "instructions" in raw:
        instructions = _typed(file, raw, "instructions", str, 'write instructions = """..."""')
    else:
        raise _err(
            file, "instructions", "missing", 'add instructions = """what the agent must do""" or instructions_file'
        )
    if not instructions.strip():
        raise _err(file, "instructions", "empty", "write the prompt the agent receives")

    data_dir: Path | None = None
    if "data" in raw:
        d = _typed(file, raw, "data", str, 'give a directory relative to the task dir, e.g. data = "data"')
        data_dir = (task_dir / d).resolve()
        if not data_dir.is_dir():
            raise _err(
                file,
                "data",
                f"data directory {data_dir} does not exist",
                "create it, fix the path, or remove the key for a task without data",
            )

    if data_dir is not None:
        _keep_secrets_out_of_data(file, raw, task_dir, data_dir)

    image = _typed(file, raw, "image", str, 'e.g. image = "benchctl-sandbox:latest"') if "image" in raw else DEFAULT_TAG
    artifacts = ["report.md"]
    if "artifacts" in raw:
        artifacts = _typed(file, raw, "artifacts", list, 'e.g. artifacts = ["report.md"]')
        for a in artifacts:
            if not isinstance(a, str) or not a or a.startswith("/") or ".." in Path(a).parts:
                raise _err(
                    file,
                    "artifacts",
                    f"{a!r} is not a relative path inside /work",
                    'list file names relative to /work, e.g. "report.md"',
                )

    budgets: list[str] = []
    if "budgets" in raw:
        budgets = [str(b) for b in _typed(file, raw, "budgets", list, 'e.g. budgets = ["10m", "30m", "2h"]')]
        for b in budgets:
            _positive_duration(file, "budgets", b, 'use durations like "90s", "10m", "2h"')

    policies = RunPolicies(
        early_exit=_early_exit(file, raw.get("early_exit")),
        length=_length(file, raw.get("length"), artifacts),
        notify_time=_notices(file, raw.get("notices")),
    )
    followups = _followups(file, raw.get("followups", []))
    variants = _variants(file, raw.get("variants", {}))
    tool_timeout = (
        _typed(file, raw, "tool_timeout", float, "seconds, e.g. tool_timeout = 120") if "tool_timeout" in raw else 120.0
    )
    _at_least(file, "tool_timeout", tool_timeout, 1)
    for key in ("harness_options", "limits", "grading"):
        if key in raw and not isinstance(raw[key], dict):
            raise _err(file, key, "must be a table", f"write it as [{key}]")
    limits_table = dict(raw.get("limits", {}))
    max_cost = None
    if "max_cost" in limits_table:  # money, not the sandbox's: benchctl/limits enforces it
        from benchctl.limits.config import LimitsConfigError, check_max_cost

        try:
            max_cost = check_max_cost(limits_table.pop("max_cost"), str(file), "limits.max_cost")
        except LimitsConfigError as e:
            raise TaskError(str(e)) from None
    try:
        limits = parse_limits(limits_table, also_allowed=("max_cost",))
    except LimitError as e:
        raise _err(file, f"limits.{e.key}", e.problem, e.fix) from None
    pause = (
        _typed(file, raw, "pause_budget_on_rate_limit", bool, "pause_budget_on_rate_limit = true (or false)")
        if "pause_budget_on_rate_limit" in raw
        else True
    )
    pin = _pin(file, raw, data_dir)
    return Task(
        name=name,
        task_dir=task_dir,
        task_file=file,
        instructions=instructions,
        data_dir=data_dir,
        image=image,
        artifacts=list(artifacts),
        budgets=budgets,
        policies=policies,
        followups=followups,
        variants=variants,
        harness_options=dict(raw.get("harness_options", {})),
        limits=limits,
        grading=dict(raw.get("grading", {})),
        tool_timeout=tool_timeout,
        description=str(raw.get("description", "")),
        pin=pin,
        max_cost=max_cost,
        pause_budget_on_rate_limit=pause,
    )


def _pin(file: Path, raw: dict[str, Any], data_dir: Path | None) -> Any:
    """The [pin] of an imported task (what `benchctl run` verifies), or None."""
    if "pin" not in raw:
        return None
    from benchctl.task_import.pin import PinError, parse_pin

    try:
        return parse_pin(file, raw["pin"], data_dir)
    except PinError as e:
        raise TaskError(str(e)) from None


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


def _keep_secrets_out_of_data(file: Path, raw: dict[str, Any], task_dir: Path, data_dir: Path) -> None:
    """The data directory is mounted into the sandbox, so it must not hold what only the grader or
    the gateway may read: the task file itself, files named in [grading] (reference report,
    findings, ground truth), the target's (and baseline's) system prompt file, the validation files,
    the steering vectors' files and the Petri transcripts."""
    target = t if isinstance(t := raw.get("target"), dict) else {}
    named = [("grading", s) for s in _strings(raw.get("grading"))]
    named += [("validation", s) for s in _strings(raw.get("validation"))]  # scenarios are written from the truth
    for key in ("system_prompt_file", "baseline_system_prompt_file"):
        if isinstance(target.get(key), str):
            named.append((f"target.{key}", target[key]))
    tools = t if isinstance(t := raw.get("tools"), dict) else {}
    steering = s if isinstance(s := tools.get("steering"), dict) else {}
    petri = p if isinstance(p := tools.get("petri"), dict) else {}
    if isinstance(petri.get("transcripts_file"), str):  # read through the tools, not the file system
        named.append(("tools.petri.transcripts_file", petri["transcripts_file"]))
    for name, vec in steering.items():  # contrastive pairs may spell out the behaviour's confession
        for key in ("pairs_file", "vector_file"):
            if isinstance(vec, dict) and isinstance(vec.get(key), str):
                named.append((f"tools.steering.{name}.{key}", vec[key]))
    for key, rel in [("data", file.name), *named]:
        p = (task_dir / rel).resolve()
        if p.exists() and (p == data_dir or data_dir in p.parents):
            raise _err(
                file,
                key,
                f"{p} is inside the data directory {data_dir}, which the agent's sandbox mounts",
                'keep the evidence in its own subdirectory (e.g. data = "data") and grading or target files outside it',
            )


def check_limits_fit_host(task: Task) -> None:
    """The task's [limits] against this machine's CPUs and memory (checked before runs start,
    not at load: a task written for a bigger machine still loads and grades here)."""
    try:
        check_fits_host(task.limits)
    except LimitError as e:
        raise _err(task.task_file, f"limits.{e.key}", e.problem, e.fix) from None


def _positive_duration(file: Path, key: str, value: str, fix: str) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as e:
        raise _err(file, key, str(e), fix) from None
    if seconds <= 0:
        raise _err(file, key, f"{value!r} is not a positive duration", fix)
    return seconds


def _at_least(file: Path, key: str, value: Any, low: float) -> Any:
    if value < low:
        raise _err(file, key, f"{value} is below {low:g}", f"use a value >= {low:g}")
    return value


def _early_exit(file: Path, t: Any) -> EarlyExitPolicy | None:
    if t is None:
        return EarlyExitPolicy()
    if not isinstance(t, dict):
        raise _err(file, "early_exit", "must be a table", "write it as [early_exit]")
    _unknown(file, t, {"fraction", "max_reprompts", "message", "enabled"}, "early_exit.")
    d = EarlyExitPolicy()
    fraction = (
        _typed(file, t, "fraction", float, "a number between 0 and 1, e.g. 0.75", "early_exit.")
        if "fraction" in t
        else d.fraction
    )
    if not 0 <= fraction <= 1:
        raise _err(file, "early_exit.fraction", f"{fraction} is outside 0..1", "use e.g. 0.75")
    mr = (
        _typed(file, t, "max_reprompts", int, "a whole number, e.g. 3", "early_exit.")
        if "max_reprompts" in t
        else d.max_reprompts
    )
    _at_least(file, "early_exit.max_reprompts", mr, 0)
    msg = (
        _typed(file, t, "message", str, "a string; {remaining} and {budget} are filled in", "early_exit.")
        if "message" in t
        else d.message
    )
    try:
        msg.format(remaining="1m", budget="2m")
    except (KeyError, IndexError, ValueError) as e:
        raise _err(
            file, "early_exit.message", f"bad placeholder {e}", "only {remaining} and {budget} are available"
        ) from None
    enabled = _typed(file, t, "enabled", bool, "true or false", "early_exit.") if "enabled" in t else True
    return EarlyExitPolicy(fraction=fraction, max_reprompts=mr, message=msg, enabled=enabled)


def _length(file: Path, t: Any, artifacts: list[str]) -> LengthPolicy | None:
    if t is None:
        return None
    if not isinstance(t, dict):
        raise _err(file, "length", "must be a table", "write it as [length]")
    _unknown(file, t, {"file", "min_words", "max_words", "max_revisions", "revise_message"}, "length.")
    d = LengthPolicy()
    f = _typed(file, t, "file", str, 'e.g. file = "report.md"', "length.") if "file" in t else d.file
    lo = _at_least(
        file,
        "length.min_words",
        _typed(file, t, "min_words", int, "a whole number", "length.") if "min_words" in t else 0,
        0,
    )
    hi = _typed(file, t, "max_words", int, "a whole number", "length.") if "max_words" in t else None
    if hi is not None and hi < lo:
        raise _err(file, "length.max_words", f"{hi} is below min_words {lo}", "make max_words >= min_words")
    mr = _typed(file, t, "max_revisions", int, "a whole number", "length.") if "max_revisions" in t else d.max_revisions
    _at_least(file, "length.max_revisions", mr, 0)
    msg = _typed(file, t, "revise_message", str, "a string", "length.") if "revise_message" in t else d.revise_message
    try:
        msg.format(file=f, words=1, min_words=lo, max_words=hi)
    except (KeyError, IndexError, ValueError) as e:
        raise _err(
            file,
            "length.revise_message",
            f"bad placeholder {e}",
            "only {file}, {words}, {min_words}, {max_words} are available",
        ) from None
    if f not in artifacts:
        raise _err(file, "length.file", f"{f!r} is not one of the artifacts {artifacts}", "add it to `artifacts`")
    return LengthPolicy(file=f, min_words=lo, max_words=hi, max_revisions=mr, revise_message=msg)


def _notices(file: Path, t: Any) -> bool:
    if t is None:
        return True
    if not isinstance(t, dict):
        raise _err(file, "notices", "must be a table", "write it as [notices] with time = true|false")
    _unknown(file, t, {"time"}, "notices.")
    return _typed(file, t, "time", bool, "true or false", "notices.") if "time" in t else True


def _followups(file: Path, t: Any) -> list[Followup]:
    if not isinstance(t, list):
        raise _err(file, "followups", "must be an array of tables", 'write [[followups]] with prompt = "..."')
    out = []
    for i, f in enumerate(t):
        key = f"followups[{i}]"
        if not isinstance(f, dict) or not isinstance(f.get("prompt"), str) or not f["prompt"].strip():
            raise _err(
                file,
                key + ".prompt",
                "missing or empty",
                'write [[followups]] with prompt = "now expand to 5,000 words"',
            )
        _unknown(file, f, {"prompt", "budget"}, key + ".")
        budget = f.get("budget")
        if budget is not None:
            _positive_duration(
                file, key + ".budget", str(budget), 'use e.g. "10m", or leave it out for the run\'s budget'
            )
        out.append(Followup(prompt=f["prompt"], budget=None if budget is None else str(budget)))
    return out


def _variants(file: Path, t: Any) -> dict[str, Variant]:
    if not isinstance(t, dict):
        raise _err(
            file, "variants", "must be a table of variants", "write [variants.NAME] with [[variants.NAME.rules]]"
        )
    out = {}
    for name, v in t.items():
        key = f"variants.{name}"
        if not _NAME.match(name):
            raise _err(file, key, "bad variant name", "use letters, digits, '.', '_' or '-'")
        if name in BASE_VARIANTS:  # `--variant base` means the unmodified data, so this could never run
            raise _err(file, key, f"{name!r} is reserved for the unmodified data", "give the variant another name")
        if not isinstance(v, dict) or not isinstance(v.get("rules"), list) or not v["rules"]:
            raise _err(
                file, key + ".rules", "missing or empty", f'add [[{key}.rules]] with find = "..." and replace = "..."'
            )
        _unknown(file, v, {"description", "rules"}, key + ".")
        rules = []
        for i, r in enumerate(v["rules"]):
            rk = f"{key}.rules[{i}]"
            if (
                not isinstance(r, dict)
                or not isinstance(r.get("find"), str)
                or not r["find"]
                or not isinstance(r.get("replace"), str)
            ):
                raise _err(
                    file,
                    rk,
                    "each rule needs string `find` (non-empty) and `replace`",
                    'e.g. find = "10.1." and replace = "10.9."',
                )
            _unknown(file, r, {"find", "replace", "regex", "files"}, rk + ".")
            is_re = bool(r.get("regex", False))
            if is_re:
                try:
                    re.compile(r["find"])
                except re.error as e:
                    raise _err(
                        file, rk + ".find", f"bad regular expression ({e})", "fix the pattern or set regex = false"
                    ) from None
            files = r.get("files", ["*"])
            if isinstance(files, str):
                files = [files]
            if not isinstance(files, list) or not all(isinstance(x, str) for x in files):
                raise _err(file, rk + ".files", "must be a list of glob patterns", 'e.g. files = ["*.log"]')
            rules.append(VariantRule(r["find"], r["replace"], is_re, tuple(files)))
        out[name] = Variant(name, str(v.get("description", "")), tuple(rules))
    return out


# ---- content hashes and variant materialisation ------------------------------------------


def _iter_files(root: Path) -> list[Path]:
    return sorted((p for p in root.rglob("*") if p.is_file() and not p.is_symlink()), key=lambda p: p.as_posix())


def hash_tree(root: Path | None, h: hashlib._Hash | None = None) -> str:
    """sha256 over (relative path, size, bytes) of every regular file, in path order."""
    h = h or hashlib.sha256()
    if root is not None:
        for p in _iter_files(root):
            rel = p.relative_to(root).as_posix().encode()
            data = p.read_bytes()
            h.update(len(rel).to_bytes(4, "big") + rel + len(data).to_bytes(8, "big"))
            h.update(data)
    return h.hexdigest()


def task_hash(task: Task, data_dir: Path | None = None) -> str:
    """Content hash of the task file, instructions and data (pass the variant's copy as data_dir)."""
    h = hashlib.sha256()
    h.update(task.task_file.read_bytes())
    h.update(task.instructions.encode())
    return "sha256:" + hash_tree(data_dir if data_dir is not None else task.data_dir, h)


def _rule_applies(rule: VariantRule, rel: str) -> bool:
    return any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(Path(rel).name, pat) for pat in rule.files)


def apply_variant(task: Task, variant: Variant, dest: Path) -> dict[str, int]:
    """Copy the task's data to `dest` and apply the variant's rules to its text files, in order.

    Returns the number of replacements per rule (key: rule index and find text) so a rule that
    never matched is visible. Binary (non-UTF-8) files are copied unchanged; symlinks are copied
    as symlinks and not rewritten.
    """
    if task.data_dir is None:
        raise TaskError(
            f"{task.task_file}: key `variants.{variant.name}`: the task has no data to vary. "
            f'Fix: add data = "data" or remove the variant'
        )
    if dest.exists():
        shutil.rmtree(dest)
    # Links stay links, as in the read-only mount of the original data: following them would copy
    # whatever they point at (e.g. ../grading/reference.md) into the data the sandbox mounts.
    shutil.copytree(task.data_dir, dest, symlinks=True)
    counts = {f"{i}:{r.find}": 0 for i, r in enumerate(variant.rules)}
    for p in _iter_files(dest):
        rel = p.relative_to(dest).as_posix()
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = text
        for i, r in enumerate(variant.rules):
            if not _rule_applies(r, rel):
                continue
            if r.regex:
                new, n = re.subn(r.find, r.replace, new)
            else:
                n = new.count(r.find)
                new = new.replace(r.find, r.replace)
            counts[f"{i}:{r.find}"] += n
        if new != text:
            p.write_text(new, encoding="utf-8")
    return counts


def prepare_data(task: Task, variant: str | None, cache_dir: Path) -> tuple[Path | None, str, dict[str, int]]:
    """The data directory a run mounts, its task hash, and the variant's rule counts.

    Without a variant the task's own data is mounted. A variant's copy is written once under
    `cache_dir/<variant>` (rebuilt each sweep invocation, so edits to the rules take effect).
    """
    if variant is None:
        return task.data_dir, task_hash(task), {}
    if variant not in task.variants:
        known = ", ".join(sorted(task.variants)) or "(none defined)"
        raise TaskError(
            f"{task.task_file}: key `variants`: no variant named {variant!r}. "
            f"Fix: use one of {known} or define [variants.{variant}]"
        )
    dest = cache_dir / variant
    counts = apply_variant(task, task.variants[variant], dest)
    return dest, task_hash(task, dest), counts
