"""One SOURCE -> one task directory, or a suite: one task directory per environment.

The tournament's environment is a task (plus `~variant`), so a source holding many tasks becomes
many benchctl tasks, `OUT/<name>/` each, rather than one task with a variant per environment:
variants are find/replace rules over one data directory and cannot hold different tasks, and one
task per environment keeps each task's pin, image and tests its own. A source that is itself one
task becomes `OUT` directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchctl.task_import.images import client_or_none
from benchctl.task_import.source import open_source
from benchctl.task_import.write import (
    DEFAULT_BUDGET,
    ImportError_,
    ImportResult,
    check_target,
    check_template,
    write_task,
)

FORMATS = ("harbor", "inspect")


@dataclass
class SuiteResult:
    out: Path
    suite: bool
    results: list[ImportResult] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)  # earlier imports in OUT no longer in the source


def import_tasks(
    fmt: str,
    source: str,
    out: Path,
    *,
    ref: str | None = None,
    name: str | None = None,
    only: list[str] | None = None,
    template: Path | None = None,
    budget: str = DEFAULT_BUDGET,
    build_images: bool = False,
    with_inspect: bool = False,
) -> SuiteResult:
    if fmt not in FORMATS:
        raise ImportError_(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    from benchctl.policies import parse_duration

    try:
        parse_duration(budget)
    except ValueError as e:
        raise ImportError_(f"--budget: {e}") from None
    if with_inspect and fmt != "inspect":
        raise ImportError_("--with-inspect applies to Inspect tasks only")
    template_text = None
    if template is not None:
        try:
            template_text = template.read_text(encoding="utf-8")
        except OSError as e:
            raise ImportError_(f"--template {template}: {e.strerror or e}") from None
        check_template(template_text)
    out = out.expanduser().resolve()
    with open_source(source, ref) as src:
        if fmt == "harbor":
            from benchctl.task_import import harbor

            staged, suite = harbor.stage_all(src, name, list(only or []))
        else:
            from benchctl.task_import import inspect as inspect_import

            staged, suite = inspect_import.stage_all(src, name, list(only or []), with_inspect)
        targets = [out / s.name if suite else out for s in staged]
        for t in targets:  # every target is checked before anything is written
            check_target(t)
        result = SuiteResult(out, suite)
        client = client_or_none()  # one connection to probe every task's image
        try:
            for s, t in zip(staged, targets):
                result.results.append(
                    write_task(
                        s,
                        src,
                        t,
                        template=template_text,
                        budget=budget,
                        build_images=build_images,
                        docker_client=client,
                    )
                )
        finally:
            if client is not None:
                client.close()
    if suite and out.is_dir():
        mine = {r.task_dir.name for r in result.results}
        result.left_alone = sorted(
            p.name
            for p in out.iterdir()
            if p.is_dir() and p.name not in mine and (p / "task.toml").is_file() and not only
        )
    return result
