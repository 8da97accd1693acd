"""`--batch` of `benchctl grade`, `benchctl scan` and `benchctl targets validate`: the option, the
check that every judge has a batch API (before any work), the progress shown while batches run,
and what an interrupted session says (grading/batches.py does the work)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from benchctl.grading.batches import BatchProgress


def batch_option() -> Any:
    return typer.Option(
        False,
        "--batch",
        help="Send the judge calls through the provider's batch API (Anthropic Message Batches, the OpenAI "
        "Batch API, Gemini batch mode) at its batch price (about half): answers may take up to 24 h. Batch "
        "ids are saved before waiting, so an interrupted or killed session resumes the same batches.",
    )


def check_batch_judges(models: list[str], *, max_cost: float | None, allow_unpriced: bool) -> None:
    """Exit 2 naming the model and the fix when one has no batch API benchctl speaks, or (under a
    cost cap) no batch price: its batch calls would spend uncounted."""
    from benchctl.gateway.batch import BatchUnsupported
    from benchctl.gateway.complete import ModelCallError
    from benchctl.gateway.upstream import ModelId
    from benchctl.grading.batches import default_client_for

    for model in models:
        try:
            default_client_for(ModelId.parse(model))
        except (BatchUnsupported, ModelCallError) as e:  # no batch API; no key
            typer.echo(f"error: --batch: {e}", err=True)
            raise typer.Exit(2) from None
    if max_cost is None or allow_unpriced:
        return
    from benchctl.gateway.pricing import PriceTable

    prices = PriceTable()
    # a batch call is priced at the batch price alone (never the list price): every token kind of a judge call
    usage = {"input_tokens": 1, "output_tokens": 1}
    missing = [m for m in dict.fromkeys(models) if prices.cost(m, usage, batch=True) is None]
    if missing:
        typer.echo(
            f"error: --max-cost with --batch: a cost cap cannot count what {', '.join(missing)} spend in batches "
            f"(no batch_input / batch_output price in the price table). Fix: add their batch prices (a TOML file "
            f"in BENCHCTL_PRICES, see docs/gateway.md, Prices), or pass --allow-unpriced to count them as $0",
            err=True,
        )
        raise typer.Exit(2)


def interrupted(where: str) -> typer.Exit:
    """Ctrl-C while batches run: they keep running at the vendor, and the next run resumes them."""
    typer.echo(
        f"interrupted: the submitted batches keep running at the vendor (their ids are in {where}); "
        f"run the same command again to resume them without paying twice",
        err=True,
    )
    return typer.Exit(130)


class BatchProgressView:
    """Requests done / total of each batch: a progress bar per batch on a terminal, else a line
    whenever a batch's count or state changes (a batch may take hours: a log should show it)."""

    def __init__(self, progress: Any, console: Any) -> None:
        self.progress, self.console = progress, console
        self._bars: dict[str, Any] = {}
        self._last: dict[str, tuple[int, str]] = {}

    def __call__(self, p: BatchProgress) -> None:
        from benchctl.grading.batches import status_line

        if self.console.is_terminal:
            bar = self._bars.get(p.batch_id)
            label = f"batch {p.batch_id[:24]} ({p.model})"
            if bar is None:
                self._bars[p.batch_id] = bar = self.progress.add_task(label, total=p.total)
            self.progress.update(bar, completed=p.done, total=p.total)
        elif self._last.get(p.batch_id) != (p.done, p.state):
            self._last[p.batch_id] = (p.done, p.state)
            typer.echo(status_line(p), err=True)
