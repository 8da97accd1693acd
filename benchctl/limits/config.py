"""What a sweep may do to a provider key and to the researcher's money: the `[limits]` of a sweep.

One configuration story. Provider rate limits belong to the API key, so they are the sweep's:

    benchctl run TASK ... --max-connections 8 --max-cost 50 [--allow-unpriced]

or, in a sweep file (the flags override the file, key by key):

    [limits]
    max_cost = 50                    # USD for the whole sweep (priced spend of every run)
    allow_unpriced = false           # a cost cap refuses models without a price unless true
    max_connections = 8              # requests in flight per provider key (every provider)
    [limits.providers.anthropic]     # one provider key ...
    max_connections = 16
    tokens_per_minute = 400000
    requests_per_minute = 1000
    [limits.providers."openai/gpt-5"]   # ... or one model, inside its provider's limit
    tokens_per_minute = 150000

What one run may spend is the task's: `[limits] max_cost` in task.toml, next to its sandbox
limits (`benchctl.tasks`). A limit key is a provider (`anthropic`, `openai`, `google`,
`openai-compatible/<name>` — each of those has its own base URL and key — or `scripted`), or a
full model id; a call is limited by its provider key and, when configured, by its model's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from benchctl.gateway.upstream import PROVIDERS, ModelId, ModelIdError

LIMIT_FIELDS = ("max_connections", "tokens_per_minute", "requests_per_minute")
SWEEP_KEYS = ("max_cost", "allow_unpriced", "max_connections", "providers")


class LimitsConfigError(ValueError):
    """A bad limit; the message names where it came from, the key and the fix."""


@dataclass(frozen=True)
class ProviderLimit:
    """Limits of one key; None = no limit of that kind."""

    max_connections: int | None = None  # requests in flight at once (streams count until they end)
    tokens_per_minute: int | None = None  # uncached input + cache writes + output, on average
    requests_per_minute: int | None = None

    def any(self) -> bool:
        return any(v is not None for v in asdict(self).values())


@dataclass
class LimitsConfig:
    """A sweep's limits (picklable: it travels to Ray nodes with the limiter)."""

    max_cost: float | None = None  # USD, the whole sweep
    allow_unpriced: bool = False
    max_connections: int | None = None  # default for every provider key
    providers: dict[str, ProviderLimit] = field(default_factory=dict)  # limit key -> its limits

    def limit_for(self, key: str) -> ProviderLimit:
        """The limits of a key: its own table; a provider key without one gets `max_connections`."""
        own = self.providers.get(key)
        if "/" in key and not key.startswith("openai-compatible/"):
            return own or ProviderLimit()  # a model: only what its own table says
        if own is None:
            return ProviderLimit(max_connections=self.max_connections)
        if own.max_connections is None and self.max_connections is not None:
            return replace(own, max_connections=self.max_connections)
        return own

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_cost": self.max_cost,
            "allow_unpriced": self.allow_unpriced,
            "max_connections": self.max_connections,
            "providers": {k: {f: v for f, v in asdict(p).items() if v is not None} for k, p in self.providers.items()},
        }


def provider_key(model: ModelId) -> str:
    """The key a model's calls share: its provider, or for openai-compatible servers, the server."""
    return f"openai-compatible/{model.name}" if model.provider == "openai-compatible" else model.provider


def keys_for(model: ModelId) -> tuple[str, ...]:
    """The limit keys of one call: its provider key, then its model. The model's key carries the
    model's own limits when configured, and the holds a 429 or a spent rate-limit header puts on
    it (the vendors' limits are per model)."""
    key = provider_key(model)
    full = str(model)
    return (key,) if full == key else (key, full)


# ---- parsing -----------------------------------------------------------------------------------


def _count(value: Any, where: str, key: str, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LimitsConfigError(f"{where}: key `{key}`: {value!r} is not a whole number >= 1. Fix: {fix}")
    return value


def check_max_cost(value: Any, where: str, key: str = "max_cost") -> float:
    """A positive, finite number of USD."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise LimitsConfigError(
            f"{where}: key `{key}`: {value!r} is not a positive amount of USD. Fix: e.g. {key} = 25.0"
        )
    return float(value)


def check_limit_key(key: str, where: str) -> str:
    """`anthropic`, `openai`, `google`, `scripted`, `openai-compatible/<name>` or a model id."""
    if key in PROVIDERS and key != "openai-compatible":
        return key
    try:
        ModelId.parse(key)
    except ModelIdError:
        providers = ", ".join(p for p in PROVIDERS if p != "openai-compatible")
        raise LimitsConfigError(
            f"{where}: key `limits.providers.{key}`: not a provider key or a model id. Fix: use "
            f"one of {providers}, openai-compatible/<name>, or a model id such as "
            f"anthropic/claude-sonnet-5-5"
        ) from None
    return key


def parse_provider(table: Any, where: str, key: str) -> ProviderLimit:
    prefix = f"limits.providers.{key}"
    if not isinstance(table, dict):
        raise LimitsConfigError(
            f"{where}: key `{prefix}`: must be a table. Fix: [{prefix}] with {', '.join(LIMIT_FIELDS)}"
        )
    for k in table:
        if k not in LIMIT_FIELDS:
            raise LimitsConfigError(
                f"{where}: key `{prefix}.{k}`: unknown key. Fix: use one of {', '.join(LIMIT_FIELDS)}"
            )
    fixes = {
        "max_connections": "e.g. max_connections = 8",
        "tokens_per_minute": "e.g. tokens_per_minute = 400000",
        "requests_per_minute": "e.g. requests_per_minute = 1000",
    }
    return ProviderLimit(**{k: _count(v, where, f"{prefix}.{k}", fixes[k]) for k, v in table.items()})


def parse_sweep_limits(table: Any, where: str) -> LimitsConfig:
    """A sweep file's `[limits]` table; `where` is the file (for messages)."""
    if not isinstance(table, dict):
        raise LimitsConfigError(f"{where}: key `limits`: must be a table. Fix: write it as [limits]")
    for k in table:
        if k not in SWEEP_KEYS:
            raise LimitsConfigError(
                f"{where}: key `limits.{k}`: unknown key. Fix: use one of {', '.join(SWEEP_KEYS)} "
                f"(a run's own cost cap is the task file's [limits] max_cost)"
            )
    cfg = LimitsConfig()
    if "max_cost" in table:
        cfg.max_cost = check_max_cost(table["max_cost"], where, "limits.max_cost")
    if "allow_unpriced" in table:
        if not isinstance(table["allow_unpriced"], bool):
            raise LimitsConfigError(f"{where}: key `limits.allow_unpriced`: must be true or false")
        cfg.allow_unpriced = table["allow_unpriced"]
    if "max_connections" in table:
        cfg.max_connections = _count(
            table["max_connections"], where, "limits.max_connections", "e.g. max_connections = 8"
        )
    providers = table.get("providers", {})
    if not isinstance(providers, dict):
        raise LimitsConfigError(
            f"{where}: key `limits.providers`: must be a table of provider keys. "
            f"Fix: [limits.providers.anthropic] max_connections = 8"
        )
    cfg.providers = {check_limit_key(k, where): parse_provider(v, where, k) for k, v in providers.items()}
    return cfg


def apply_flags(
    cfg: LimitsConfig, *, max_cost: float | None, max_connections: int | None, allow_unpriced: bool
) -> LimitsConfig:
    """Command-line flags over the sweep file's values (a flag given wins)."""
    if max_cost is not None:
        if not math.isfinite(max_cost) or max_cost <= 0:
            raise LimitsConfigError(
                f"--max-cost: {max_cost!r} is not a positive amount of USD. Fix: e.g. --max-cost 25"
            )
        cfg.max_cost = float(max_cost)
    if max_connections is not None:
        if max_connections < 1:
            raise LimitsConfigError(f"--max-connections: {max_connections} must be >= 1. Fix: e.g. --max-connections 8")
        cfg.max_connections = max_connections
    if allow_unpriced:
        cfg.allow_unpriced = True
    return cfg


def refuse_unpriced(models: list[str], where: str, prices: Any = None) -> None:
    """A cost cap counts priced spend, so a model without a price would spend uncounted: raise
    LimitsConfigError naming them (`where`: the cap's flag or file key). Callers skip this check
    when unpriced models are allowed (`--allow-unpriced`: their calls count $0). A broken price
    file raises ValueError."""
    missing = unpriced_models(models, prices)
    if missing:
        raise LimitsConfigError(
            f"{where}: a cost cap cannot count what unpriced models spend: {', '.join(missing)} "
            f"(no entry in the price table). Fix: add their prices (a TOML file in "
            f"BENCHCTL_PRICES, see docs/gateway.md, Prices), or pass --allow-unpriced to count "
            f"their calls as $0"
        )


def unpriced_models(models: list[str], prices: Any = None) -> list[str]:
    """The models of `models` the price table has no price for (their spend cannot be counted)."""
    if prices is None:
        from benchctl.gateway.pricing import PriceTable

        prices = PriceTable()
    return [m for m in dict.fromkeys(models) if prices.lookup(m) is None]
