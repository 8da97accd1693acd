"""The limit options of `benchctl run`, `benchctl gateway` and `benchctl grade`, defined once.

Each flag has one name, type and metavar wherever it appears; its help says what it limits in
that command. Values are read by one parser (`benchctl.limits.config.apply_flags`) and a cost cap
refuses unpriced models by one check (`refuse_unpriced`): `run` through `benchctl.run.config.resolve_config`
(where a sweep file's `[limits]` meet the flags), `gateway` and `grade` through `cli_limits`.
Import-light: benchctl.limits is imported when a command runs.
"""

from __future__ import annotations

from typing import Any

import typer


def max_cost_option(scope: str) -> Any:
    """`--max-cost USD`; `scope` completes "Cost cap ..." with what it caps and where its count starts."""
    return typer.Option(None, "--max-cost", metavar="USD", help=f"Cost cap {scope}")


def max_connections_option(scope: str) -> Any:
    """`--max-connections N`; `scope` completes "... per provider key" with who shares the slots."""
    return typer.Option(
        None,
        "--max-connections",
        metavar="N",
        help=f"Model calls in flight at once per provider key (a stream holds its slot until it "
        f"ends; more calls wait their turn){scope}",
    )


def allow_unpriced_option() -> Any:
    return typer.Option(
        False,
        "--allow-unpriced",
        help="With a cost cap, allow models without a price too (their calls count $0 toward the cap).",
    )


def cli_limits(
    *, max_cost: float | None, max_connections: int | None, allow_unpriced: bool, models: list[str], prices: Any = None
) -> Any:
    """The flags as a checked `LimitsConfig` for a command without a sweep file; a bad value, or a
    cap with an unpriced model among `models` (priced by `prices`, default the price table), is
    reported and exits 2 before anything starts."""
    from benchctl.limits.config import LimitsConfig, apply_flags, refuse_unpriced

    try:
        cfg = apply_flags(
            LimitsConfig(), max_cost=max_cost, max_connections=max_connections, allow_unpriced=allow_unpriced
        )
        if cfg.max_cost is not None and not cfg.allow_unpriced:
            refuse_unpriced(models, "--max-cost", prices)
    except ValueError as e:  # LimitsConfigError, or a broken price file (BENCHCTL_PRICES, --prices)
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    return cfg
