"""The `benchctl` command line. Kept import-light so `benchctl --help` stays fast."""
import typer

from benchctl import __version__

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Benchmark harness for auditing agents.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"benchctl {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit.")) -> None:
    """Run agents in network-less sandboxes, grade their outputs, report."""
