"""Cost of a call: normalized usage × an editable price table (USD per million tokens).

A call made through a vendor's batch API is priced with the model's batch prices
(`cost(model, usage, batch=True)`: keys batch_input, batch_cached_input, batch_cache_write,
batch_output), which the table lists model by model as the vendor publishes them; a model or token
kind without a batch price costs `None`, never the list price and never 0.

The built-in table is `prices.toml` next to this file. An override file (env
`BENCHCTL_PRICES`, or `prices_path` in the gateway config) replaces entries model by model.
Unknown price → `None` ("unknown"), never 0: a missing price must be visible in reports.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BUILTIN_PRICES = Path(__file__).with_name("prices.toml")
PRICE_KEYS = {
    "input_tokens": "input",
    "cached_input_tokens": "cached_input",
    "cache_write_tokens": "cache_write",
    "output_tokens": "output",
}
BATCH_PRICE_KEYS = {usage_key: f"batch_{price_key}" for usage_key, price_key in PRICE_KEYS.items()}
ALLOWED_KEYS = sorted([*PRICE_KEYS.values(), *BATCH_PRICE_KEYS.values()])


class PriceTableError(ValueError):
    pass


def _load(path: Path) -> dict[str, dict[str, float]]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PriceTableError(
            f"price file {path} does not exist (set BENCHCTL_PRICES to an existing TOML file)"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise PriceTableError(f"price file {path} is not valid TOML: {e}") from None
    table: dict[str, dict[str, float]] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise PriceTableError(
                f"price file {path}: [{model!r}] must be a table of input/cached_input/cache_write/output "
                f"(and their batch_ prices)"
            )
        bad = set(entry) - set(ALLOWED_KEYS)
        if bad:
            raise PriceTableError(
                f"price file {path}: [{model!r}] has unknown keys {sorted(bad)}; allowed: {ALLOWED_KEYS}"
            )
        bad_values = {k: v for k, v in entry.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0}
        if bad_values:
            raise PriceTableError(
                f"price file {path}: [{model!r}] prices must be non-negative numbers (USD per "
                f"million tokens), got {bad_values}"
            )
        table[model] = {k: float(v) for k, v in entry.items()}
    return table


class PriceTable:
    def __init__(self, override: str | os.PathLike[str] | None = None) -> None:
        self.table = _load(BUILTIN_PRICES)
        path = override or os.environ.get("BENCHCTL_PRICES")
        if path:
            self.table.update(_load(Path(path)))
        self._found: dict[str, dict[str, float] | None] = {}  # model -> its entry: the gateway asks per call

    def lookup(self, model: str) -> dict[str, float] | None:
        if model in self._found:
            return self._found[model]
        found = self.table.get(model)
        if found is None:
            best = None
            for key, entry in self.table.items():  # longest matching prefix wins
                if key.endswith("*") and model.startswith(key[:-1]) and (best is None or len(key) > len(best[0])):
                    best = (key, entry)
            found = best[1] if best else None
        if len(self._found) < 1024:  # model names come from upstream answers too: bounded
            self._found[model] = found
        return found

    def cost(self, model: str, usage: Mapping[str, Any], *, batch: bool = False) -> float | None:
        """USD for one call, or None when any token kind it used has no price (with `batch`: no
        batch price; a batch call is never priced at the list price)."""
        prices = self.lookup(model)
        if prices is None:
            return None
        total = 0.0
        for usage_key, price_key in (BATCH_PRICE_KEYS if batch else PRICE_KEYS).items():
            n = usage.get(usage_key) or 0
            if n:
                if price_key not in prices:
                    return None
                total += n * prices[price_key] / 1e6
        return round(total, 8)

    def cost_of_unknown_usage(self, model: str) -> float | None:
        """The cost of a call whose usage is unknown (cut off before the upstream reported it): 0 for
        a model whose every price is 0 (the scripted fake), else unknown (None), never a guess."""
        prices = self.lookup(model)
        if prices is not None and all(prices.get(k) == 0.0 for k in PRICE_KEYS.values()):
            return 0.0
        return None

    def cost_served(
        self, model: str, served: str | None, usage: Mapping[str, Any], *, batch: bool = False
    ) -> float | None:
        """Cost of a call to `model` (provider/name) that the upstream says `served` answered:
        priced by the served name under the same provider when the table knows it (e.g. a dated
        snapshot), else by the model that was asked for."""
        provider = model.partition("/")[0]
        cost = self.cost(f"{provider}/{served}", usage, batch=batch) if served else None
        return cost if cost is not None else self.cost(model, usage, batch=batch)
