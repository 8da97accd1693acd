"""Importing other frameworks' tasks as benchctl audit tasks, pinned.

`benchctl tasks import harbor|inspect SOURCE -o TASK_DIR` turns a Harbor task directory or an
Inspect task file (or a directory / git repository holding many of them) into ordinary benchctl
task directories: the imported files read-only at /data, audit instructions rendered from an
editable template, `[grading] graders = ["tournament"]`, and a `[pin]` table recording where the
files came from (source, commit), what they were (a content hash and one digest per file) and the
container image the task declares.

  source.py       SOURCE (directory, git working tree, repository URL) + --ref -> files at a commit
  harbor.py       Harbor task directories -> staged audit tasks (+ the [task_tests] table)
  inspect.py      Inspect @task files -> staged audit tasks with a rendering of the dataset samples
  inspect_load.py the optional richer Inspect path: loads the task with inspect-ai in a subprocess
  images.py       the task image: digest when present locally, optional build from environment/
  write.py        staged task -> task directory (task.toml, instructions.md, data/), idempotently
  suite.py        one source -> one task, or a suite of tasks (one per tournament environment)
  pin.py          the [pin] table: parse, file digests, verify
  run_checks.py   what `benchctl run` checks before it starts (the pin) and records in meta.json
  open_book.py    the run_task_tests tool: the task's own tests in a second network-less sandbox
  templates/      the shipped audit instruction templates (copy one and pass --template to edit)

Nothing here imports Harbor or (unless asked) inspect-ai; `benchctl.tasks` only knows the pin.
"""
