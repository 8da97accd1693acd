"""`benchctl view RESULTS_DIR`: a local, read-only web app over a results directory.

Only typer and the standard library at module level (see benchctl/cli.py); starlette, uvicorn
and the view package are imported inside the command.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import typer


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def view(
    results_dir: Path = typer.Argument(..., help="A results directory written by `benchctl run` (contains runs/)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8787, "--port", help="Port to listen on; 0 picks a free one."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default web browser."),
) -> None:
    """Browse runs, transcripts (live while they run), artifacts with their grades, comparisons and
    the tournament in a web browser. Read-only: nothing is written into RESULTS_DIR."""
    if not (results_dir / "runs").is_dir():
        typer.echo(
            f"error: {results_dir} is not a results directory: no runs/ inside. Pass the sweep directory "
            "that `benchctl run` wrote.",
            err=True,
        )
        raise typer.Exit(2)
    if not _is_loopback(host):
        typer.echo(
            f"warning: listening on {host}: anyone who can reach it can read every transcript and report "
            "in this results directory (there is no login).",
            err=True,
        )
    import uvicorn

    from benchctl.view.app import create_app

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))  # before loading the sweep: a busy port fails at once
    except OSError as e:
        typer.echo(
            f"error: cannot listen on {host}:{port}: {e.strerror}; pick another --port (0 = any free one)", err=True
        )
        raise typer.Exit(2) from None
    try:
        app = create_app(results_dir, host=host)
    except (FileNotFoundError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    # Listen before printing the URL: a client that reads the URL and connects at once queues in the
    # backlog until uvicorn accepts, instead of being refused while the app still starts.
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}/"
    typer.echo(f"benchctl view: serving {results_dir} at {url} (Ctrl-C to stop)")
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])


def register(app: typer.Typer) -> None:
    app.command("view")(view)
