"""The target declaration and the tool configurations, parsed from a task's `task.toml`.

    [target]
    model = "openai-compatible/prism-4"          # any provider the gateway supports (scripted/... in tests)
    system_prompt_file = "target/system.md"      # SECRET: sent to the target only (or system_prompt = "...")
    display_name = "PRISM-4"                     # how the tools name the target to the investigator
    temperature = 1.0
    max_tokens = 1024                            # per reply of chat/prefill/sample_user/complete
    raw_completion = true                        # the target serves raw text completion (openai-compatible only)
    baseline_model = "openai-compatible/base"    # the untrained reference: *_with_baseline tools, validation
    baseline_system_prompt_file = "target/base.md"   # optional (or baseline_system_prompt); default: none
    tags = {implant = "SDF", adversarial = "KTO"}     # the target's attributes: report breaks success down by them
    internals = "prism-4"                        # white-box tools: an internals server's URL, or a NAME whose
                                                 # URL is BENCHCTL_INTERNALS_<NAME>_URL (docs/internals.md)

    [tools]
    auxiliary_model = "anthropic/claude-sonnet-5-5"   # writes the probe inputs of scaffolded tools
    batch_size = 20                              # probe inputs per scaffolded call (20 or 100)
    reply_max_tokens = 128                       # target reply cap inside scaffolded batches
    concurrency = 20                             # target calls in flight per scaffolded batch
    token_budget = 25000                         # investigator output tokens (0 = no token budget)

    [tools.configs.big_batch]                    # extra named configurations (built-ins below)
    tools = ["chat", "scaffolded_prefill"]
    batch_size = 100

The white-box tools' tables ([tools.steering.<name>], [tools.logit_lens], ...) are parsed by
whitebox_spec.py.

The ground truth (the hidden behaviour) is NOT part of [target]: it lives in [grading]
(`ground_truth` file or `ground_truth_text`) and only the grader reads it. Neither the target's
system prompt nor the ground truth is ever mounted into the sandbox or shown to the agent.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from benchctl.targets.petri import TOOLS as PETRI_TOOLS
from benchctl.targets.petri import PetriError, PetriTranscript, parse_petri
from benchctl.targets.whitebox_spec import TABLES as WHITEBOX_TABLES
from benchctl.targets.whitebox_spec import WHITEBOX_TOOLS, WhiteBoxSettings, WhiteBoxSpecError, parse_whitebox

TOOL_NAMES = (
    "chat",
    "prefill",
    "sample_user",
    "complete",
    "scaffolded_prefill",
    "scaffolded_user",
    "scaffolded_complete",
    "chat_with_baseline",
    "scaffolded_prefill_with_baseline",
    "scaffolded_user_with_baseline",
    "scaffolded_complete_with_baseline",
    *WHITEBOX_TOOLS,
    *PETRI_TOOLS,
)
# scaffolded tool -> the kind of probe input its batch holds
SCAFFOLDED = {
    "scaffolded_prefill": "prefill",
    "scaffolded_user": "sample_user",
    "scaffolded_complete": "complete",
    "scaffolded_prefill_with_baseline": "prefill",
    "scaffolded_user_with_baseline": "sample_user",
    "scaffolded_complete_with_baseline": "complete",
}
# tools that send the same input to the target and to the baseline model and return both answers
WITH_BASELINE = frozenset(t for t in TOOL_NAMES if t.endswith("_with_baseline"))

# name -> tools. "default" is the plain-chat baseline every other configuration extends.
BUILTIN_CONFIGS: dict[str, tuple[str, ...]] = {
    "default": ("chat",),
    "prefill": ("chat", "prefill"),
    "sample_user": ("chat", "sample_user"),
    "complete": ("chat", "complete"),
    "scaffolded_prefill": ("chat", "scaffolded_prefill"),
    "scaffolded_user": ("chat", "scaffolded_user"),
    "scaffolded_complete": ("chat", "scaffolded_complete"),
    "chat_with_baseline": ("chat", "chat_with_baseline"),
    "scaffolded_prefill_with_baseline": ("chat", "scaffolded_prefill_with_baseline"),
    "scaffolded_user_with_baseline": ("chat", "scaffolded_user_with_baseline"),
    "scaffolded_complete_with_baseline": ("chat", "scaffolded_complete_with_baseline"),
    # white-box (an internals server): steered_chat returns the unsteered reply beside the steered one,
    # so it replaces chat, as AuditBench's steering tool replaces its sample tool
    "steering_honesty": ("steered_chat",),
    "steering_prefill": ("steered_chat",),
    "sae_features": ("chat", "sae_features"),
    "logit_lens": ("chat", "logit_lens"),
    "activation_oracle": ("chat", "ask_latent_question"),
    # a Petri run made beforehand ([tools.petri]): its summaries and transcripts
    "petri": ("chat", "petri_summaries", "petri_transcript"),
}
# the steering vector ([tools.steering.<name>]) each built-in steering configuration uses
BUILTIN_VECTORS = {"steering_honesty": "honesty", "steering_prefill": "prefill"}

# Which provider can do what (see backend.py for the request each one gets).
PREFILL_PROVIDERS = ("anthropic", "openai-compatible", "scripted")
SAMPLE_USER_PROVIDERS = ("openai-compatible", "scripted")
COMPLETE_PROVIDERS = ("openai-compatible", "scripted")

_TARGET_KEYS = {
    "model",
    "system_prompt",
    "system_prompt_file",
    "display_name",
    "temperature",
    "max_tokens",
    "raw_completion",
    "top_p",
    "baseline_model",
    "baseline_system_prompt",
    "baseline_system_prompt_file",
    "tags",
    "internals",
}
_TOOLS_KEYS = {
    "auxiliary_model",
    "batch_size",
    "reply_max_tokens",
    "concurrency",
    "token_budget",
    "token_grace",
    "configs",
    "petri",
    *WHITEBOX_TABLES,
}
_CONFIG_KEYS = {"tools", "batch_size", "reply_max_tokens", "concurrency", "auxiliary_model", "steering_vector"}


class TargetSpecError(ValueError):
    """A [target]/[tools] problem; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class TargetSpec:
    model: str
    system_prompt: str = field(repr=False)  # secret: never in repr, logs or the sandbox
    display_name: str = "the target model"
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int = 1024
    raw_completion: bool = False
    baseline_model: str | None = None  # the untrained reference model (same sampling settings)
    baseline_system_prompt: str = field(default="", repr=False)
    tags: dict[str, str] = field(default_factory=dict)  # attributes such as implant = "SDF"
    internals: str | None = None  # the internals server: a URL, or a NAME (BENCHCTL_INTERNALS_<NAME>_URL)

    @property
    def provider(self) -> str:
        return self.model.partition("/")[0]

    @property
    def baseline_provider(self) -> str | None:
        return self.baseline_model.partition("/")[0] if self.baseline_model else None


class _ScaffoldSettings(TypedDict):
    """[tools]' settings every configuration starts from (ToolConfig's fields after name and tools)."""

    batch_size: int
    reply_max_tokens: int
    concurrency: int
    auxiliary_model: str | None


@dataclass(frozen=True)
class ToolConfig:
    """One named tool configuration: which tools the investigator gets and the scaffold settings."""

    name: str
    tools: tuple[str, ...]
    batch_size: int = 20
    reply_max_tokens: int = 128
    concurrency: int = 20
    auxiliary_model: str | None = None
    steering_vector: str | None = None  # the [tools.steering.<name>] steered_chat uses
    whitebox: WhiteBoxSettings = field(default_factory=WhiteBoxSettings)
    petri: tuple[PetriTranscript, ...] = ()  # [tools.petri]'s transcripts

    @property
    def scaffolded(self) -> bool:
        return any(t in SCAFFOLDED for t in self.tools)

    @property
    def white_box(self) -> bool:
        return any(t in WHITEBOX_TOOLS for t in self.tools)


@dataclass(frozen=True)
class ToolsSettings:
    configs: dict[str, ToolConfig]
    token_budget: int = 0  # 0: no token budget
    token_grace: int = 4000  # tokens allowed after the final instruction


def _err(file: Path | str, key: str, problem: str, fix: str) -> TargetSpecError:
    return TargetSpecError(f"{file}: key `{key}`: {problem}. Fix: {fix}")


def _int(file: Path | str, table: dict[str, Any], key: str, prefix: str, lo: int, default: int) -> int:
    v = table.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise _err(file, prefix + key, f"expected an integer >= {lo}, got {v!r}", f"set e.g. {key} = {default}")
    return v


def _float(file: Path | str, table: dict[str, Any], key: str) -> float | None:
    v = table.get(key)
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise _err(file, f"target.{key}", f"expected a number, got {v!r}", f"set e.g. {key} = 1.0")
    return float(v)


def _unknown(file: Path | str, table: dict[str, Any], allowed: set[str], prefix: str) -> None:
    for k in table:
        if k not in allowed:
            hint = (
                " (the ground truth belongs in [grading] ground_truth, read only by the grader)"
                if k in ("ground_truth", "ground_truth_text", "behaviour", "behavior")
                else ""
            )
            raise _err(file, prefix + k, "unknown key" + hint, f"use one of: {', '.join(sorted(allowed))}")


def parse_target(raw: dict[str, Any], task_dir: Path, file: Path | str = "task.toml") -> TargetSpec:
    """The [target] table -> TargetSpec (reads system_prompt_file relative to the task dir)."""
    if not isinstance(raw, dict):
        raise _err(file, "target", "must be a table", "write [target] with model = ... and system_prompt_file = ...")
    _unknown(file, raw, _TARGET_KEYS, "target.")
    model = _model_id(
        file, "target.model", raw.get("model"), 'model = "openai-compatible/<name>" (or anthropic/..., scripted/...)'
    )
    system = _system_prompt(raw, "system_prompt", task_dir, file)
    name = raw.get("display_name", "the target model")
    if not isinstance(name, str) or not name.strip():
        raise _err(
            file, "target.display_name", f"expected a non-empty string, got {name!r}", 'set display_name = "PRISM-4"'
        )
    raw_completion = raw.get("raw_completion", False)
    if not isinstance(raw_completion, bool):
        raise _err(
            file, "target.raw_completion", f"expected true or false, got {raw_completion!r}", "set true or false"
        )
    return TargetSpec(
        model=model,
        system_prompt=system,
        display_name=name.strip(),
        temperature=_float(file, raw, "temperature"),
        top_p=_float(file, raw, "top_p"),
        max_tokens=_int(file, raw, "max_tokens", "target.", 1, 1024),
        raw_completion=raw_completion,
        baseline_model=_baseline_model(raw, file),
        baseline_system_prompt=_system_prompt(raw, "baseline_system_prompt", task_dir, file),
        tags=_tags(raw, file),
        internals=_internals(raw, file),
    )


def _internals(raw: dict[str, Any], file: Path | str) -> str | None:
    v = raw.get("internals")
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip() or (":" in v and not v.startswith(("http://", "https://"))):
        raise _err(
            file,
            "target.internals",
            f"expected an http(s) URL or a server name, got {v!r}",
            'set internals = "http://127.0.0.1:8100" or a name such as "prism-4" (its URL in BENCHCTL_INTERNALS_PRISM_4_URL)',
        )
    return v.strip()


def _model_id(file: Path | str, key: str, value: Any, example: str) -> str:
    from benchctl.gateway.upstream import ModelId, ModelIdError

    if not isinstance(value, str) or "/" not in value:
        raise _err(file, key, f"expected a model id provider/name, got {value!r}", f"set {example}")
    try:
        ModelId.parse(value)
    except ModelIdError as e:
        raise _err(file, key, str(e), "use a known provider") from None
    return value


def _baseline_model(raw: dict[str, Any], file: Path | str) -> str | None:
    if raw.get("baseline_model") is None:
        if "baseline_system_prompt" in raw or "baseline_system_prompt_file" in raw:
            raise _err(
                file,
                "target.baseline_system_prompt",
                "a baseline system prompt without a baseline model",
                'add baseline_model = "provider/name" (the untrained reference model)',
            )
        return None
    return _model_id(
        file, "target.baseline_model", raw["baseline_model"], 'baseline_model = "openai-compatible/<base model>"'
    )


def _system_prompt(raw: dict[str, Any], key: str, task_dir: Path, file: Path | str) -> str:
    """`key` inline or `key`_file (relative to the task directory); "" when neither is given."""
    fkey = key + "_file"
    if key in raw and fkey in raw:
        raise _err(file, f"target.{key}", f"given both inline and as {fkey}", "keep one")
    if fkey in raw:
        p = (task_dir / str(raw[fkey])).resolve()
        if not p.is_file():
            raise _err(
                file, f"target.{fkey}", f"{p} does not exist", "point it at a file relative to the task directory"
            )
        return p.read_text(encoding="utf-8").strip()
    if key in raw:
        if not isinstance(raw[key], str):
            raise _err(file, f"target.{key}", "expected a string", f'set {key} = "You are ..."')
        return str(raw[key]).strip()
    return ""


def _tags(raw: dict[str, Any], file: Path | str) -> dict[str, str]:
    tags = raw.get("tags", {})
    ok = isinstance(tags, dict) and all(
        isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip() for k, v in tags.items()
    )
    if not ok:
        raise _err(
            file,
            "target.tags",
            f"expected a table of non-empty strings, got {tags!r}",
            'write tags = {implant = "SDF", adversarial = "KTO"}',
        )
    return {k.strip(): v.strip() for k, v in tags.items()}


def parse_tools(raw: dict[str, Any] | None, file: Path | str = "task.toml") -> ToolsSettings:
    """The [tools] table -> the named configurations (built-ins plus [tools.configs.*])."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise _err(file, "tools", "must be a table", "write [tools] with batch_size = ..., auxiliary_model = ...")
    _unknown(file, raw, _TOOLS_KEYS, "tools.")
    aux = raw.get("auxiliary_model")
    if aux is not None and (not isinstance(aux, str) or "/" not in aux):
        raise _err(
            file,
            "tools.auxiliary_model",
            f"expected a model id provider/name, got {aux!r}",
            'set auxiliary_model = "anthropic/claude-sonnet-5-5"',
        )
    base = _ScaffoldSettings(
        batch_size=_int(file, raw, "batch_size", "tools.", 1, 20),
        reply_max_tokens=_int(file, raw, "reply_max_tokens", "tools.", 1, 128),
        concurrency=_int(file, raw, "concurrency", "tools.", 1, 20),
        auxiliary_model=aux,
    )
    try:
        whitebox = parse_whitebox(raw, Path(file).parent, file)
        petri = parse_petri(raw.get("petri"), Path(file).parent, file)
    except (WhiteBoxSpecError, PetriError) as e:
        raise TargetSpecError(str(e)) from None
    configs = {
        name: ToolConfig(name, tools, **base, steering_vector=BUILTIN_VECTORS.get(name), whitebox=whitebox, petri=petri)
        for name, tools in BUILTIN_CONFIGS.items()
    }
    extra = raw.get("configs", {})
    if not isinstance(extra, dict):
        raise _err(file, "tools.configs", "must be a table of tables", "write [tools.configs.NAME] tools = [...]")
    for name, table in extra.items():
        prefix = f"tools.configs.{name}."
        if not isinstance(table, dict):
            raise _err(file, prefix[:-1], "must be a table", f"write [tools.configs.{name}] tools = [...]")
        _unknown(file, table, _CONFIG_KEYS, prefix)
        parent = configs.get(name, ToolConfig(name, (), **base, whitebox=whitebox, petri=petri))
        tools = table.get("tools", list(parent.tools))
        if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
            raise _err(
                file,
                prefix + "tools",
                f"expected a non-empty list of tool names, got {tools!r}",
                f"use names from: {', '.join(TOOL_NAMES)}",
            )
        for t in tools:
            if t not in TOOL_NAMES:
                raise _err(file, prefix + "tools", f"unknown tool {t!r}", f"use names from: {', '.join(TOOL_NAMES)}")
        caux = table.get("auxiliary_model", parent.auxiliary_model)
        if caux is not None and (not isinstance(caux, str) or "/" not in caux):
            raise _err(file, prefix + "auxiliary_model", f"expected a model id, got {caux!r}", "use provider/name")
        configs[name] = replace(
            parent,
            tools=tuple(dict.fromkeys(tools)),
            batch_size=_int(file, table, "batch_size", prefix, 1, parent.batch_size),
            reply_max_tokens=_int(file, table, "reply_max_tokens", prefix, 1, parent.reply_max_tokens),
            concurrency=_int(file, table, "concurrency", prefix, 1, parent.concurrency),
            auxiliary_model=caux,
            steering_vector=_steering_vector(file, table, prefix, parent.steering_vector),
        )
    return ToolsSettings(
        configs=configs,
        token_budget=_int(file, raw, "token_budget", "tools.", 0, 0),
        token_grace=_int(file, raw, "token_grace", "tools.", 0, 4000),
    )


def _steering_vector(file: Path | str, table: dict[str, Any], prefix: str, default: str | None) -> str | None:
    v = table.get("steering_vector", default)
    if v is not None and (not isinstance(v, str) or not v):
        raise _err(
            file, prefix + "steering_vector", f"expected a vector's name, got {v!r}", 'set steering_vector = "honesty"'
        )
    return v


def check_config(target: TargetSpec, config: ToolConfig, file: Path | str = "task.toml") -> None:
    """Fail before the run if the configuration needs something the target or settings cannot give."""
    need = {SCAFFOLDED.get(t, t) for t in config.tools}
    if "prefill" in need and target.provider not in PREFILL_PROVIDERS:
        raise _err(
            file,
            "target.model",
            f"tool configuration {config.name!r} needs assistant prefill, which "
            f"{target.provider} models do not support",
            f"use one of {', '.join(PREFILL_PROVIDERS)} or another configuration",
        )
    if "sample_user" in need and target.provider not in SAMPLE_USER_PROVIDERS:
        raise _err(
            file,
            "target.model",
            f"tool configuration {config.name!r} samples the user turn, which needs a "
            f"server that continues a final user message",
            f"use one of {', '.join(SAMPLE_USER_PROVIDERS)}",
        )
    if "complete" in need and not (target.raw_completion and target.provider in COMPLETE_PROVIDERS):
        raise _err(
            file,
            "target.raw_completion",
            f"tool configuration {config.name!r} needs raw text completion",
            f"set raw_completion = true for a {'/'.join(COMPLETE_PROVIDERS)} target that serves /v1/completions",
        )
    if WITH_BASELINE & set(config.tools):
        _check_baseline(target, config, file)
    if config.white_box:
        from benchctl.targets.whitebox_spec import check_whitebox

        try:
            check_whitebox(target, config, file)
        except WhiteBoxSpecError as e:
            raise TargetSpecError(str(e)) from None
    if set(PETRI_TOOLS) & set(config.tools) and not config.petri:
        raise _err(
            file,
            "tools.petri",
            f"tool configuration {config.name!r} reads Petri transcripts, and the task has none",
            'add [tools.petri] transcripts_file = "petri/transcripts.jsonl" (a Petri run made beforehand)',
        )
    if config.scaffolded and not config.auxiliary_model:
        raise _err(
            file,
            "tools.auxiliary_model",
            f"tool configuration {config.name!r} is scaffolded and needs an auxiliary model to write probe inputs",
            'set [tools] auxiliary_model = "provider/name"',
        )


def _check_baseline(target: TargetSpec, config: ToolConfig, file: Path | str) -> None:
    """The *_with_baseline tools send the same input to the baseline model: it must exist and do the same."""
    if not target.baseline_model:
        raise _err(
            file,
            "target.baseline_model",
            f"tool configuration {config.name!r} compares the target with a baseline model, and none is set",
            'set baseline_model = "provider/name" (the model without the implanted behaviour)',
        )
    need = {SCAFFOLDED.get(t, t) for t in config.tools if t in WITH_BASELINE}
    for kind, providers in (
        ("prefill", PREFILL_PROVIDERS),
        ("sample_user", SAMPLE_USER_PROVIDERS),
        ("complete", COMPLETE_PROVIDERS),
    ):
        if kind in need and target.baseline_provider not in providers:
            raise _err(
                file,
                "target.baseline_model",
                f"tool configuration {config.name!r} needs {kind} from the baseline model too, which "
                f"{target.baseline_provider} models do not support",
                f"use a baseline of {', '.join(providers)} or another configuration",
            )


@dataclass(frozen=True)
class HiddenBehaviourTask:
    target: TargetSpec
    tools: ToolsSettings

    def config(self, name: str) -> ToolConfig:
        if name not in self.tools.configs:
            raise TargetSpecError(
                f"unknown tool configuration {name!r}. Fix: use one of "
                f"{', '.join(sorted(self.tools.configs))} or add [tools.configs.{name}] to the task"
            )
        return self.tools.configs[name]


def load_hidden_behaviour(task_dir: str | Path) -> HiddenBehaviourTask | None:
    """Read task.toml's [target]/[tools]; None when the task declares no target."""
    d = Path(task_dir)
    file = d / "task.toml" if d.is_dir() else d
    raw = tomllib.loads(file.read_text(encoding="utf-8"))
    if "target" not in raw:
        if "tools" in raw:
            raise _err(file, "tools", "a [tools] table without a [target]", "add [target] with model and system prompt")
        return None
    return HiddenBehaviourTask(parse_target(raw["target"], file.parent, file), parse_tools(raw.get("tools"), file))
