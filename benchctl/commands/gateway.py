"""`benchctl gateway`: run the model gateway by itself, in the foreground.

For pointing an agent CLI at it by hand (to debug a harness) and for benchmarks. Heavy
imports happen inside the command so `benchctl --help` stays fast. Its limit options are
`benchctl run`'s (commands/limit_options.py), for one gateway: its own limiter, its spend.
"""

from __future__ import annotations

from pathlib import Path

import typer

from benchctl.commands.limit_options import allow_unpriced_option, max_connections_option, max_cost_option


def register(app: typer.Typer) -> None:
    app.command("gateway")(gateway)


def gateway(
    model: str = typer.Option(
        ...,
        "--model",
        "-m",
        help="Model serving every call: provider/name, e.g. "
        "anthropic/claude-sonnet-5-5, openai/gpt-5, google/gemini-2.5-pro, scripted/script.json.",
    ),
    socket: Path | None = typer.Option(None, "--socket", help="Listen on this unix socket path."),
    listen: str | None = typer.Option(None, "--listen", help="Listen on TCP instead, e.g. 127.0.0.1:8765."),
    fallback: str | None = typer.Option(None, "--fallback", help="Model to switch to after a refusal."),
    refusal_policy: str = typer.Option(
        "auto", "--refusal-policy", help="none | retry | fallback | auto (fallback if --fallback, else none)."
    ),
    refusal_retries: int = typer.Option(
        1, "--refusal-retries", help="Extra tries per call under --refusal-policy retry."
    ),
    transcript: Path | None = typer.Option(None, "--transcript", help="Append model_call events to this JSONL file."),
    prices: Path | None = typer.Option(None, "--prices", help="Price table override (TOML); default $BENCHCTL_PRICES."),
    max_connections: int | None = max_connections_option(", the model's and the fallback's alike."),
    max_cost: float | None = max_cost_option(
        "for this gateway: once its priced calls reach it, it refuses new calls. With --transcript, the calls "
        "already in that file count too (a restart continues the count)."
    ),
    allow_unpriced: bool = allow_unpriced_option(),
) -> None:
    """Run the model gateway in the foreground (Ctrl-C stops it and prints the run summary)."""
    import json
    import signal
    import threading

    from benchctl.commands.limit_options import cli_limits
    from benchctl.gateway import SANDBOX_TOKEN, Gateway, GatewayConfig
    from benchctl.gateway.pricing import PriceTable
    from benchctl.limits.local import LocalLimiter
    from benchctl.limits.run import LimitsPlan, RunLimits
    from benchctl.limits.spend import transcript_spend
    from benchctl.transcript import TranscriptWriter

    if (socket is None) == (listen is None):
        raise typer.BadParameter("give exactly one of --socket PATH or --listen 127.0.0.1:PORT")
    try:
        price_table = PriceTable(prices)
    except ValueError as e:  # a broken --prices / $BENCHCTL_PRICES file
        typer.echo(f"benchctl gateway: {e}", err=True)
        raise typer.Exit(2) from None
    cfg = cli_limits(
        max_cost=max_cost,
        max_connections=max_connections,
        allow_unpriced=allow_unpriced,
        models=[model, *([fallback] if fallback else [])],
        prices=price_table,
    )
    # one writer even without --transcript: the cost cap counts spend from its events
    writer = TranscriptWriter(transcript)
    # the gateway's own limiter; its spend continues from the transcript it appends to
    spent = transcript_spend(transcript) if transcript and cfg.max_cost is not None else 0.0
    limits = RunLimits(LimitsPlan(LocalLimiter(cfg, spent), cfg, scope="gateway"), writer, holder="gateway")
    writer.listeners.append(limits.on_event)
    config = GatewayConfig(
        model=model,
        fallback=fallback,
        refusal_policy=refusal_policy,
        refusal_retries=refusal_retries,
        socket_path=socket,
        listen=listen,
        prices_path=prices,
        limits=limits,
    )
    try:
        gw = Gateway(config, writer)
        gw.start()
    except Exception as e:  # bad model id, missing base URL, socket in use: say what and exit non-zero
        typer.echo(f"benchctl gateway: {e}", err=True)
        raise typer.Exit(2) from None
    where = f"unix socket {gw.socket_path}" if gw.socket_path else gw.url
    typer.echo(f"benchctl gateway listening on {where}")
    typer.echo(f"serving model {model}" + (f" (fallback {fallback})" if fallback else ""))
    if cfg.max_cost is not None:
        typer.echo(
            f"cost cap ${cfg.max_cost:.2f}: ${spent:.4f} spent before this start"
            + (f" (the priced calls in {transcript})" if transcript else "")
        )
    typer.echo(
        f"clients must use the token {SANDBOX_TOKEN}; e.g. "
        + (
            f"ANTHROPIC_UNIX_SOCKET={gw.socket_path} ANTHROPIC_BASE_URL=http://gateway"
            if gw.socket_path
            else f"ANTHROPIC_BASE_URL={gw.url} OPENAI_BASE_URL={gw.url}/v1"
        ),
        err=False,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        gw.close()
        limits.close()
        writer.close()
        typer.echo(json.dumps(gw.summary(), indent=2))
