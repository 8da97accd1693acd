"""`benchctl tasks new NAME`, `benchctl tasks import harbor|inspect SOURCE -o TASK_DIR` and `benchctl tasks verify TASK_DIR ...`.

`new` writes a starter task (benchctl/starter.py).

Imports other frameworks' tasks as pinned audit tasks (benchctl/task_import/); `verify` checks
tasks against their pin, as `benchctl run` does before it starts.
"""

from __future__ import annotations

from pathlib import Path

import typer

tasks_app = typer.Typer(
    no_args_is_help=True, help="Start a new task; import tasks from other frameworks; verify their pins."
)


@tasks_app.command("new")
def new(
    task_dir: Path = typer.Argument(
        ..., metavar="NAME", help="The task directory to create; its last part is the task's name."
    ),
) -> None:
    """Write a starter task (task.toml with comments, data/, grading/ with an example rubric) that
    `benchctl run` accepts as it is."""
    from benchctl.starter import StarterError, write_starter_task
    from benchctl.tasks import TaskError

    try:
        files = write_starter_task(task_dir)
    except (StarterError, TaskError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    for f in files:
        typer.echo(f"  wrote {f}")
    typer.echo(
        f"Next: edit {task_dir / 'task.toml'}, put your evidence in {task_dir / 'data'} and your key in "
        f"{task_dir / 'grading'}; then `benchctl run {task_dir} --model PROVIDER/MODEL --out results/{task_dir.name}`."
    )


@tasks_app.command("import")
def import_(
    fmt: str = typer.Argument(..., metavar="harbor|inspect", help="The format of SOURCE."),
    source: str = typer.Argument(
        ..., help="A task directory (or Inspect task file), a directory of tasks, or a git repository (path or URL)."
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="The task directory to write; for a source of several tasks, "
        "the directory that gets one task directory each.",
    ),
    ref: str | None = typer.Option(None, "--ref", help="Import the files at this git commit, tag or branch."),
    name: str | None = typer.Option(None, "--name", help="Name of the imported task (one task only)."),
    only: list[str] = typer.Option(
        [], "--only", help="Import only this task (directory or @task function name); repeat for several."
    ),
    template: Path | None = typer.Option(
        None,
        "--template",
        help="Audit instructions template ({{name}}, "
        "{{source}}, {{commit}}, {{path}}, {{image}}, {{image_status}}, "
        "{{description}}, {{files}}, {{format}}); default: the shipped one.",
    ),
    budget: str = typer.Option("30m", "--budget", help="The audit's default time budget."),
    build_images: bool = typer.Option(
        False,
        "--build-images",
        help="docker build each task's environment/ "
        "Dockerfile (runs the task's Dockerfile) so the auditor can run its tests.",
    ),
    with_inspect: bool = typer.Option(
        False,
        "--with-inspect",
        help="Inspect: load the task with inspect-ai to "
        "render its samples exactly (runs the task file's code on this machine).",
    ),
) -> None:
    """Import Harbor or Inspect tasks as pinned audit tasks (issues.json, graded by the tournament)."""
    from benchctl.task_import.source import SourceError
    from benchctl.task_import.suite import import_tasks
    from benchctl.task_import.write import ImportError_

    try:
        res = import_tasks(
            fmt,
            source,
            out,
            ref=ref,
            name=name,
            only=only,
            template=template,
            budget=budget,
            build_images=build_images,
            with_inspect=with_inspect,
        )
    except (ImportError_, SourceError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    for r in res.results:
        p = r.pin
        image = (
            f"{p.image} ({r.image.digest[:19]})"
            if r.image.digest
            else f"{p.image or '-'} (static audit: {r.image.problem})"
        )
        typer.echo(
            f"{r.status:9} {r.task_dir}  {p.format} {p.path or '.'}"
            f"{' @ ' + p.commit[:12] if p.commit else ''}{' (dirty)' if p.dirty else ''}  "
            f"{len(p.files)} files {p.content_hash[:19]}  image {image}"
        )
        for note in r.notes:
            typer.secho(f"          note: {note}", fg="yellow", err=True)
    for name_ in res.left_alone:
        typer.secho(f"note: {res.out / name_} is not in the source any more; left in place", fg="yellow", err=True)
    first = res.results[0].task_dir if res.results else res.out
    typer.echo(
        f"next: benchctl run {'DIR' if res.suite else first} --model M --out RESULTS"
        + (f"   (for DIR in {res.out}/*/)" if res.suite else ""),
        err=True,
    )


@tasks_app.command("verify")
def verify(task_dirs: list[Path] = typer.Argument(..., help="Task directories (imported tasks).")) -> None:
    """Check imported tasks against their pin; exit 1 when any file changed."""
    from benchctl.task_import.pin import verify as verify_pin
    from benchctl.tasks import TaskError, load_task

    bad = 0
    for d in task_dirs:
        try:
            task = load_task(d)
        except TaskError as e:
            typer.secho(f"error: {e}", fg="red", err=True)
            raise typer.Exit(2) from None
        if task.pin is None or task.data_dir is None:
            typer.echo(f"{task.task_dir}: not an imported task (no [pin])")
            continue
        check = verify_pin(task.pin, task.data_dir)
        if check.ok:
            typer.echo(f"ok       {task.task_dir}  {task.pin.content_hash[:19]}")
        else:
            bad += 1
            typer.echo(f"CHANGED  {task.task_dir}  {check.describe()}")
    raise typer.Exit(1 if bad else 0)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
