"""`python -m benchctl` is the `benchctl` command (`benchctl demo` runs its steps this way)."""

from benchctl.cli import app

app(prog_name="benchctl")
