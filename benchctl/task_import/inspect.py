"""Inspect tasks -> staged audit tasks, with a rendering of the dataset samples.

An Inspect task is a Python function decorated with `@task` returning `Task(dataset=...,
solver=..., scorer=..., sandbox=...)`. Each `@task` function found is one audit task (one
tournament environment). Its data:

    data/source/      the directory holding the task file, as packaged (solver, scorer, datasets)
    data/samples.md   the samples (input, target, choices, metadata) and how they were read
    data/samples.jsonl  the same samples, one JSON object per line

Samples are read **statically** by default: the task file is parsed (never run), `json_dataset` /
`csv_dataset` / `file_dataset` files are read with the literal `FieldSpec(...)` mapping, and
literal `Sample(...)` lists are evaluated as literals. A dataset built by code (a
`record_to_sample` function, `hf_dataset`, a loop) is shown as raw records or noted as not
rendered. With `--with-inspect` the task is loaded by inspect-ai itself (inspect_load.py, in a
subprocess: this runs the task file's code on this machine) and the samples are exactly the ones
Inspect would run; the static reading is the fallback when that fails.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchctl.layout import slug
from benchctl.task_import.source import Source, ignore_skipped, skipped
from benchctl.task_import.write import ImportError_, StagedTask

MAX_DEPTH = 6
MAX_SOURCE_BYTES = 200_000_000
MD_SAMPLES = 500  # samples written out in full in samples.md (all go to samples.jsonl)
DATASET_FUNCS = ("json_dataset", "csv_dataset", "file_dataset")
FIELDS = ("input", "target", "id", "choices", "metadata")
LOAD_TIMEOUT_S = 300


@dataclass
class InspectTask:
    file: Path
    function: str
    code: str
    tree: ast.Module
    node: ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Samples:
    samples: list[dict[str, Any]] = field(default_factory=list)
    how: str = ""  # how they were read, shown at the top of samples.md
    complete: bool = True  # False when some dataset could not be rendered


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _task_functions(file: Path) -> list[InspectTask]:
    try:
        code = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    if not re.search(r"@\s*(\w+\.)*task\b", code):
        return []
    try:
        tree = ast.parse(code, filename=str(file))
    except SyntaxError as e:
        raise ImportError_(f"{file}: not valid Python ({e.msg}, line {e.lineno}); fix the task file") from None
    return [
        InspectTask(file, n.name, code, tree, n)
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_name(d) == "task" for d in n.decorator_list)
    ]


def find_tasks(root: Path) -> list[InspectTask]:
    if root.is_file():
        return _task_functions(root)
    out: list[InspectTask] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not skipped(d))
        if len(here.relative_to(root).parts) >= MAX_DEPTH:
            dirnames[:] = []
        for f in sorted(filenames):
            if f.endswith(".py"):
                out.extend(_task_functions(here / f))
    return out


# ---- static reading of the task ------------------------------------------------------------


def _task_call(t: InspectTask) -> ast.Call | None:
    for n in ast.walk(t.node):
        if isinstance(n, ast.Call) and _name(n) == "Task":
            return n
    return None


def _kw(call: ast.Call, key: str, pos: int | None = None) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == key:
            return k.value
    if pos is not None and len(call.args) > pos:
        return call.args[pos]
    return None


def _assigned(t: InspectTask, name: str) -> ast.expr | None:
    """The last value assigned to `name` in the task function, else at module level."""
    for scope in (t.node.body, t.tree.body):
        found = None
        for n in scope:
            if isinstance(n, ast.Assign) and any(isinstance(x, ast.Name) and x.id == name for x in n.targets):
                found = n.value
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
                found = n.value
        if found is not None:
            return found
    return None


def _deref(t: InspectTask, expr: ast.expr | None) -> ast.expr | None:
    if isinstance(expr, ast.Name):
        return _assigned(t, expr.id) or expr
    return expr


def _strings(t: InspectTask, expr: ast.expr) -> list[str]:
    out = []
    for n in ast.walk(expr):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
        elif isinstance(n, ast.Name):
            v = _assigned(t, n.id)
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append(v.value)
    return out


def _dataset_file(t: InspectTask, arg: ast.expr) -> Path | None:
    """The dataset path: a string literal (or a constant, or the parts of a path expression such as
    Path(__file__).parent / "data" / "x.jsonl"), resolved against the task file's directory."""
    parts = [s for s in _strings(t, arg) if s]
    base = t.file.parent
    for cand in [*reversed(parts), os.path.join(*parts) if parts else ""]:
        if cand and (base / cand).is_file():
            return (base / cand).resolve()
    return None


def _literal(expr: ast.expr | None) -> Any:
    if expr is None:
        return None
    try:
        return ast.literal_eval(expr)
    except (ValueError, SyntaxError, TypeError):
        return None


def _read_records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            return [dict(r) for r in csv.DictReader(f)]
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl" or not text.lstrip().startswith(("[", "{")):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), [data])
    return [r for r in data if isinstance(r, dict)]


def _map(record: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A record -> sample fields, as Inspect's FieldSpec maps them (default names input, target, id,
    choices; metadata = the listed fields, else the record's own `metadata` field)."""
    out: dict[str, Any] = {}
    for f in ("input", "target", "id", "choices"):
        key = spec.get(f, f)
        if isinstance(key, str) and record.get(key) is not None:
            out[f] = record[key]
    keys = spec.get("metadata")
    meta = {k: record.get(k) for k in keys} if isinstance(keys, list) else record.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            pass
    if meta:
        out["metadata"] = meta
    return out


def _static_samples(t: InspectTask) -> Samples:
    call = _task_call(t)
    if call is None:
        return Samples(how=f"no Task(...) call found in {t.function}; samples not rendered", complete=False)
    ds = _deref(t, _kw(call, "dataset", 0))
    rel = t.file.name
    if ds is None:
        return Samples(how="Task(...) has no dataset argument; samples not rendered", complete=False)
    if isinstance(ds, ast.Call) and _name(ds) in DATASET_FUNCS:
        arg = _kw(ds, "json_file") or _kw(ds, "csv_file") or _kw(ds, "file") or _kw(ds, "path", 0)
        path = _dataset_file(t, arg) if arg is not None else None
        if path is None:
            return Samples(
                how=f"{_name(ds)}(...) in {rel}: the dataset file could not be found from the source "
                f"text; samples not rendered",
                complete=False,
            )
        fields_expr = _deref(t, _kw(ds, "sample_fields", 1))
        spec: dict[str, Any] = {}
        where = path.relative_to(t.file.parent).as_posix() if t.file.parent in path.parents else path.name
        if isinstance(fields_expr, ast.Call) and _name(fields_expr) == "FieldSpec":
            spec = {k.arg: _literal(k.value) for k in fields_expr.keywords if k.arg}
            how = f"read statically from {where} with FieldSpec({', '.join(f'{k}={v!r}' for k, v in spec.items())})"
        elif fields_expr is None:
            how = f"read statically from {where} with the default fields (input, target, id, choices)"
        else:
            how = (
                f"read statically from {where}: records are converted by "
                f"{ast.get_source_segment(t.code, fields_expr) or 'code'}, which was not run, so raw "
                f"records are shown (use --with-inspect to see them as Inspect does)"
            )
            return Samples([{"record": r} for r in _read_records(path)], how, complete=False)
        try:
            return Samples([_map(r, spec) for r in _read_records(path)], how)
        except (ValueError, UnicodeDecodeError) as e:
            return Samples(how=f"{where} could not be read ({e}); samples not rendered", complete=False)
    items = _deref(t, ds.args[0] if isinstance(ds, ast.Call) and _name(ds) == "MemoryDataset" and ds.args else ds)
    if isinstance(items, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Call) and _name(e) == "Sample" for e in items.elts
    ):
        samples = []
        for sample in items.elts:
            assert isinstance(sample, ast.Call)  # checked just above
            s = {k.arg: _literal(k.value) for k in sample.keywords if k.arg in FIELDS}
            for i, f in enumerate(("input", "target")[: len(sample.args)]):
                s[f] = _literal(sample.args[i])
            samples.append({k: v for k, v in s.items() if v is not None})
        return Samples(samples, f"literal Sample(...) list in {rel}, read statically")
    src = ast.get_source_segment(t.code, ds) or "?"
    return Samples(
        how=f"the dataset is built by code ({src[:200]}), which was not run; samples not rendered "
        f"(use --with-inspect to load it with inspect-ai)",
        complete=False,
    )


def _loaded_samples(t: InspectTask) -> tuple[Samples | None, str]:
    """The richer path: inspect-ai loads the task in a subprocess (inspect_load.py)."""
    cmd = [sys.executable, "-m", "benchctl.task_import.inspect_load", str(t.file), t.function]
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    try:
        r = subprocess.run(cmd, cwd=t.file.parent, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return None, f"inspect-ai did not load the task in {LOAD_TIMEOUT_S} s"
    if r.returncode != 0:
        return None, f"inspect-ai could not load the task: {(r.stderr.strip().splitlines() or ['?'])[-1][:300]}"
    out = json.loads(r.stdout)
    how = (
        f"loaded with inspect-ai {out['inspect_version']}: Task.dataset exactly as Inspect runs it "
        f"(solver: {out.get('solver')}; scorer: {', '.join(out.get('scorer') or []) or '-'})"
    )
    return Samples(out["samples"], how), ""


# ---- rendering -----------------------------------------------------------------------------


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    one_line = json.dumps(v, ensure_ascii=False)
    return one_line if len(one_line) <= 100 else json.dumps(v, ensure_ascii=False, indent=1)


def render_samples(t: InspectTask, s: Samples) -> str:
    fn = ast.get_source_segment(t.code, t.node) or ""
    lines = [
        f"# Dataset samples of `{t.function}` ({len(s.samples)} samples)",
        "",
        f"How they were read: {s.how}.",
        "",
        f"## The task function ({t.file.name})",
        "",
        "```python",
        fn,
        "```",
        "",
        "## Samples",
        "",
    ]
    for i, sample in enumerate(s.samples[:MD_SAMPLES], 1):
        sid = sample.get("id")
        lines.append(f"### {i}" + (f" (id: {sid})" if sid is not None else ""))
        for f in ("input", "record", "target", "choices", "metadata"):
            if f in sample:
                val = _text(sample[f])
                if "\n" in val or "`" in val or len(val) > 100:
                    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", val)), default=0))
                    lines += [f"**{f}**:", "", fence, val, fence, ""]  # a fence no sample text can close
                else:
                    lines += [f"**{f}**: `{val}`", ""]
    if len(s.samples) > MD_SAMPLES:
        lines.append(f"... and {len(s.samples) - MD_SAMPLES} more in samples.jsonl")
    return "\n".join(lines) + "\n"


def _declared_image(t: InspectTask) -> tuple[str | None, str, str | None]:
    """(image, image_from, build context relative to the task directory) from Task(sandbox=...)."""
    call = _task_call(t)
    sb = _literal(_deref(t, _kw(call, "sandbox"))) if call is not None else None
    if isinstance(sb, (list, tuple)) and sb:
        kind, config = str(sb[0]), (str(sb[1]) if len(sb) > 1 else None)
    elif isinstance(sb, str):
        kind, config = sb, None
    else:
        return None, "none", None
    if kind != "docker":
        return None, "none", None
    base = t.file.parent
    names = [config] if config else ["compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"]
    for n in names:
        p = base / n
        if p.is_file() and p.suffix in (".yaml", ".yml"):
            m = re.search(r"^\s+image:\s*['\"]?([^\s'\"#]+)", p.read_text(encoding="utf-8", errors="replace"), re.M)
            if m:
                return m.group(1), "inspect_sandbox", None
    dockerfile = base / (config if config and not config.endswith((".yaml", ".yml")) else "Dockerfile")
    if dockerfile.is_file() and dockerfile.name == "Dockerfile":
        return None, "dockerfile", dockerfile.parent.relative_to(base).as_posix()
    return None, "inspect_sandbox", None  # Inspect's default image; nothing local to pin


def _size(root: Path) -> int:
    return sum(
        p.stat().st_size
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and not any(skipped(x) for x in p.relative_to(root).parts)
    )


def stage(t: InspectTask, source: Source, name: str | None, with_inspect: bool) -> StagedTask:
    notes: list[str] = []
    samples: Samples | None = None
    if with_inspect:
        samples, problem = _loaded_samples(t)
        if samples is None:
            notes.append(f"{t.function}: {problem}; falling back to the static reading")
    if samples is None:
        samples = _static_samples(t)
        if not samples.complete:
            notes.append(f"{t.function}: {samples.how}")
    task_root = t.file.parent
    if _size(task_root) > MAX_SOURCE_BYTES:
        raise ImportError_(
            f"{task_root} holds over {MAX_SOURCE_BYTES // 1_000_000} MB; put the task in a directory "
            f"of its own and import that"
        )
    image, image_from, context = _declared_image(t)
    md, jsonl = (
        render_samples(t, samples),
        "".join(json.dumps(s, ensure_ascii=False, sort_keys=True) + "\n" for s in samples.samples),
    )

    def fill(data: Path) -> None:
        shutil.copytree(task_root, data / "source", symlinks=True, ignore=ignore_skipped)
        (data / "samples.md").write_text(md, encoding="utf-8")
        (data / "samples.jsonl").write_text(jsonl, encoding="utf-8")

    doc = ast.get_docstring(t.node) or ""
    return StagedTask(
        name=slug(name or t.function),
        format="inspect",
        source_path=source.relative(t.file),
        description=f"Audit of the Inspect task {t.function}" + (f": {doc.splitlines()[0]}" if doc else ""),
        fill_data=fill,
        image=image,
        image_from=image_from,
        build_context=f"source/{context}".rstrip("/.") if context is not None else None,
        notes=notes,
    )


def stage_all(
    source: Source, name: str | None, only: list[str], with_inspect: bool = False
) -> tuple[list[StagedTask], bool]:
    tasks = find_tasks(source.path)
    if not tasks:
        raise ImportError_(f"{source.origin}: no Inspect task found (a Python function decorated with @task)")
    suite = len(tasks) > 1  # several tasks in the source: one directory each under -o
    if only:
        tasks = [t for t in tasks if t.function in only]
        missing = sorted(set(only) - {t.function for t in tasks})
        if missing:
            raise ImportError_(f"--only {', '.join(missing)}: no such @task function in {source.origin}")
    if len(tasks) > 1 and name:
        raise ImportError_(
            "--name renames one task; pick it with --only (a suite's tasks are named after their @task functions)"
        )
    staged = [stage(t, source, name, with_inspect) for t in tasks]
    names = [s.name for s in staged]
    if len(set(names)) != len(names):
        raise ImportError_(
            f"two @task functions share a name ({sorted(names)}); import them separately with --only and --name"
        )
    return staged, suite
