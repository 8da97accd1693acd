"""`benchctl doctor` (is this machine ready to run benchmarks?) and `benchctl cleanup`
(remove the containers and gateway directories that dead benchctl processes left behind).

The checks themselves, in order, and what each requires, are in benchctl/doctor_checks.py; the
exit code is 1 if a required check failed. Heavy imports happen inside the commands so
`benchctl --help` stays fast.
"""

from __future__ import annotations

import json
from contextlib import closing
from dataclasses import asdict

import typer

from benchctl.doctor_checks import print_checks, run_checks


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(
        image: str = typer.Option(
            None, "--image", help="Sandbox image tag \\[default: $BENCHCTL_IMAGE or benchctl-sandbox:latest]."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
        ray: str = typer.Option(
            None,
            "--ray",
            metavar="ADDRESS",
            help="Check every node of this Ray cluster instead (Docker, image digest, "
            "agent CLIs, free benchctl_sandbox slots); needs benchctl\\[ray].",
        ),
    ) -> None:
        """Check that this machine can run benchmarks, and say how to fix what is missing."""
        from benchctl.sandbox.images import DEFAULT_TAG

        if ray is not None:
            from benchctl.commands.doctor_ray import doctor_ray

            raise typer.Exit(doctor_ray(ray, image or DEFAULT_TAG, as_json))
        checks = run_checks(image or DEFAULT_TAG)
        failed = [c for c in checks if c.required and c.status == "fail"]
        if as_json:
            typer.echo(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=2))
        else:
            print_checks(checks)
            typer.echo(
                "doctor: " + ("all required checks passed" if not failed else f"{len(failed)} required check(s) failed")
            )
        if failed:
            raise typer.Exit(1)

    @app.command("cleanup")
    def cleanup_cmd(
        all_: bool = typer.Option(
            False, "--all", help="Also remove containers whose benchctl process is still running."
        ),
        run_id: str = typer.Option(
            None, "--run-id", help="Only the containers and gateway directories of this run id."
        ),
        dry_run: bool = typer.Option(False, "--dry-run", help="List what would be removed, remove nothing."),
    ) -> None:
        """Remove what dead benchctl processes left behind: containers (label benchctl.managed=1)
        and gateway directories (/tmp/bc-gw-*)."""
        from benchctl.sandbox import gateway_dir

        verb = "would remove" if dry_run else "removed"
        # A live run's gateway directory is never removed, even with --all: its process removes it.
        dirs = gateway_dir.remove_stale(run_id=run_id, dry_run=dry_run)
        for d in dirs:
            typer.echo(f"{verb} gateway directory {d.path} (run {d.run_id or 'unknown: made by an older benchctl'})")
        typer.echo(f"cleanup: {verb} {len(dirs)} gateway director{'y' if len(dirs) == 1 else 'ies'}")
        from benchctl.sandbox.cleanup import find_managed, remove
        from benchctl.sandbox.docker_client import DockerUnavailable, docker_client

        try:
            client = docker_client()
        except DockerUnavailable as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        with closing(client):
            found = find_managed(client, run_id=run_id)
            victims = [s for s in found if all_ or not s.owner_alive]
            if not dry_run:
                remove(client, victims)
        kept = len(found) - len(victims)
        for s in victims:
            typer.echo(f"{verb} {s.name} ({s.id}, run {s.run_id}, {s.status})")
        typer.echo(
            f"cleanup: {verb} {len(victims)} container(s)"
            + (f"; kept {kept} owned by running benchctl processes (use --all)" if kept else "")
        )
