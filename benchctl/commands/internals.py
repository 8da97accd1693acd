"""`benchctl internals serve`: the reference internals server (benchctl/internals/server.py).

Only typer and the standard library at module level (see benchctl/cli.py): torch and transformers
come with the optional `internals` extra and are imported when the command runs.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import typer

internals_app = typer.Typer(
    no_args_is_help=True,
    help="White-box access to a target model: the internals server the white-box audit tools call.",
)


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg="red", err=True)
    return typer.Exit(2)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@internals_app.command("serve")
def serve(
    model: Path = typer.Option(
        ..., "--model", help="A local Hugging Face checkpoint directory (nothing is downloaded)."
    ),
    sae: Path | None = typer.Option(
        None, "--sae", help="A sparse autoencoder directory (SAELens layout: cfg.json, sae_weights.safetensors)."
    ),
    oracle: Path | None = typer.Option(
        None, "--oracle", help="An activation oracle checkpoint directory (same hidden size as the model)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8100, "--port", help="Port to listen on (0 = any free one)."),
    device: str = typer.Option("auto", "--device", help="auto (a GPU when there is one), cpu, cuda, cuda:N."),
    dtype: str = typer.Option(
        "auto", "--dtype", help="auto (the checkpoint's on GPU, float32 on CPU), float32, float16, bfloat16."
    ),
    max_batch: int = typer.Option(32, "--max-batch", min=1, help="Most sequences decoded together."),
) -> None:
    """Serve a model's internals (generation with steering, steering vectors, logit lens, SAE
    features, activation oracle) and the OpenAI-compatible chat/completions subset the black-box
    target tools use. Point `\\[target] internals` (and `model = "openai-compatible/NAME"` with its
    base URL at <url>/v1) at the printed URL."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise _fail("the internals server needs torch and transformers: pip install 'benchctl[internals]'") from None
    if not _is_loopback(host):
        typer.echo(
            f"warning: listening on {host}: anyone who can reach it can query the model and its internals "
            "(there is no login); benchctl calls it from the host only.",
            err=True,
        )
    import uvicorn

    from benchctl.internals.protocol import ProtocolError
    from benchctl.internals.runner import Runner
    from benchctl.internals.sae import SaeError
    from benchctl.internals.server import bind, create_app, url_of

    try:
        sock = bind(host, port)  # before loading the model: a busy port fails at once
    except OSError as e:
        raise _fail(f"cannot listen on {host}:{port}: {e.strerror}; pick another --port (0 = any free one)") from None
    try:
        runner = Runner.load(model, sae, oracle, device=device, dtype=dtype)
    except (ProtocolError, SaeError, OSError, ValueError) as e:
        sock.close()
        raise _fail(str(e)) from None
    app = create_app(runner, max_batch)
    info = runner.info()
    url = url_of(sock)
    extras = ", ".join(
        x
        for x in (f"SAE at layer {info['sae']['layer']}" if info["sae"] else "", "oracle" if info["oracle"] else "")
        if x
    )
    typer.echo(
        f"benchctl internals: {info['model']} ({info['layers']} layers, {info['device']}, {info['dtype']}"
        f"{', ' + extras if extras else ''}) at {url} (Ctrl-C to stop)"
    )
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)).run(sockets=[sock])
    finally:
        app.state.batcher.close()


def register(app: typer.Typer) -> None:
    app.add_typer(internals_app, name="internals")
