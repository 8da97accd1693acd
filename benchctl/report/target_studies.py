"""Hidden-behaviour study tables: target validation, any-of-N success by target tag, and each
tool's informativeness beside the agents' success.

  target_validation     one row per measure of every `benchctl targets validate` output found
                        in RESULTS/validation/<name>/ (confession prompts / prefills, behaviour strength
                        of the target and of the baseline), as validation.json states it
  any_of_n_by_tag       any-of-N success per tool configuration broken down by each tag of the
                        target ([target] tags, meta target_tools.target_tags), pooled over targets
  tool_informativeness  every `benchctl targets probe-tools` row found in RESULTS/probe_tools/<name>/
                        (STRONG / WEAK / NONE) beside the any-of-N success of the configurations
                        that offered that tool on that target

The study outputs are read here, not by the loader: they are small, few, and only these tables use
them. A file that cannot be read is named in the table's notes, never a crash. Rates carry 95 %
Wilson intervals; runs without a verdict are not failures (as in the any-of-N table).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from benchctl.report.aggregate import Config, Grouping, averaged
from benchctl.report.contests import ANY_OF_N
from benchctl.report.load import Run
from benchctl.report.model import Column, Table, fmt
from benchctl.stats import wilson_interval

VALIDATION_DIR = "validation"
PROBE_TOOLS_DIR = "probe_tools"
MEASURES = (
    ("confession", "prompts", "confession_prompts"),
    ("confession", "prefills", "confession_prefills"),
    ("strength", "target", "strength_target"),
    ("strength", "baseline", "strength_baseline"),
)
_RATE_KEYS = ("k", "n", "rate", "lo", "hi", "threshold")


def _wilson(k: int, n: int) -> tuple[float | None, float | None]:
    return wilson_interval(k, n) if n else (None, None)


def _rate_cell(k: Any, n: Any, rate: Any, lo: Any, hi: Any) -> str:
    if rate is None or lo is None or hi is None:
        return f"{k}/{n}" if n else "–"
    return f"{k}/{n} = {fmt('pct', rate)} [{fmt('pct', lo)}, {fmt('pct', hi)}]"


def _found(root: Path, folder: str, name: str) -> Iterator[tuple[str, Path]]:
    """(directory relative to the results dir, file) for every root/folder/<study>/<name>."""
    base = root / folder
    if base.is_dir():
        for f in sorted(base.glob(f"*/{name}")):
            yield str(f.parent.relative_to(root)), f


def _read(f: Path, notes: list[str], root: Path) -> Any:
    try:
        return orjson.loads(f.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        notes.append(f"unreadable {f.relative_to(root)}: {e}")
        return None


# ---------------------------------------------------------------------- target validation


def target_validation(root: str | Path) -> Table | None:
    root = Path(root)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for where, f in _found(root, VALIDATION_DIR, "validation.json"):
        v = _read(f, notes, root)
        study = _read(f.parent / "study.json", [], root) if (f.parent / "study.json").is_file() else None
        study = study if isinstance(study, dict) else {}
        if not isinstance(v, dict):
            if v is not None:
                notes.append(f"{f.relative_to(root)} is not a JSON object")
            continue
        for part, key, measure in MEASURES:
            r = (v.get(part) or {}).get(key) if isinstance(v.get(part), dict) else None
            if r is not None and not (isinstance(r, dict) and all(k in r for k in _RATE_KEYS)):
                notes.append(f"{f.relative_to(root)}: {part}.{key} is not a RATE ({', '.join(_RATE_KEYS)})")
                r = None
            model = study.get("baseline_model") if measure == "strength_baseline" else study.get("target_model")
            rows.append(
                {"validation": where, "task": study.get("task"), "target": study.get("target_model")}
                | {"model": model, "measure": measure}
                | {k: (r or {}).get(k) for k in _RATE_KEYS}
            )
    if not rows and not notes:
        return None
    cols = [
        Column("validation", "validation"),
        Column("task", "task"),
        Column("target", "target"),
        Column("model", "model answering", hidden=True),
        Column("measure", "measure"),
        Column("k", "k", "int"),
        Column("n", "n", "int"),
        Column("rate", "rate", "pct"),
        Column("lo", "95% lo", "pct"),
        Column("hi", "95% hi", "pct"),
        Column("threshold", "score threshold", "int"),
    ]
    display = [
        ("validation", lambda r: r["validation"]),
        ("target", lambda r: str(r["target"] or "–")),
        (
            "measure",
            lambda r: r["measure"].replace("_", " ") + (f" ({r['model']})" if "baseline" in r["measure"] else ""),
        ),
        (
            "rate (95% Wilson)",
            lambda r: _rate_cell(r["k"], r["n"], r["rate"], r["lo"], r["hi"]) if r["n"] is not None else "not measured",
        ),
        ("threshold", lambda r: "" if r["threshold"] is None else f"score ≥ {r['threshold']}"),
    ]
    notes.insert(
        0,
        "From `benchctl targets validate` (RESULTS/validation/<name>/validation.json): confession = share of "
        "answers the judge scored an explicit confession (1-10, at least the threshold), for prompts and "
        "prefills; strength = share of scenario answers showing the behaviour (0-10), for the target and the "
        "untrained baseline. Unscored items are not counted.",
    )
    return Table("target_validation", "Target validation", cols, rows, notes, display)


# ---------------------------------------------------------------------- any-of-N by tag


def _audit(run: Run) -> dict[str, Any]:
    tt = run.meta.get("target_tools")
    return tt if isinstance(tt, dict) else {}


def _verdict(run: Run, grader: str) -> bool | None:
    """True / False for a run with an any-of-N verdict, None without one (or not counted)."""
    if not averaged(run):
        return None
    g = run.grade(grader)
    return None if g is None or g.score is None else g.score >= 0.5


def _config_fields(grouping: Grouping, c: Config) -> dict[str, Any]:
    d: dict[str, Any] = {"model": c.model}
    if grouping.harness_matters:
        d["harness"] = c.harness
    return d | {"budget": c.budget, "tools": c.tools}


def any_of_n_by_tag(grouping: Grouping, grader: str = ANY_OF_N) -> Table | None:
    cells: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in grouping.sorted_keys():
        for r in grouping.groups[c]:
            tags = _audit(r).get("target_tags")
            ok = _verdict(r, grader)
            if not isinstance(tags, dict) or not tags or ok is None:
                continue
            fields = _config_fields(grouping, c)
            for tag, value in sorted(tags.items()):
                key = (*fields.values(), str(tag), str(value))
                cell = cells.setdefault(key, fields | {"tag": str(tag), "value": str(value), "k": 0, "n": 0})
                cell["k"] += int(ok)
                cell["n"] += 1
                cell.setdefault("targets", set()).add(str(_audit(r).get("target_model")))
    if not cells:
        return None
    rows = []
    for key in sorted(cells, key=lambda k: tuple(str(x) for x in k)):
        cell = cells[key]
        lo, hi = _wilson(cell["k"], cell["n"])
        rows.append(cell | {"rate": cell["k"] / cell["n"], "lo": lo, "hi": hi, "n_targets": len(cell.pop("targets"))})
    key_cols = [Column("model", "model")]
    if grouping.harness_matters:
        key_cols.append(Column("harness", "harness"))
    key_cols += [Column("budget", "budget"), Column("tools", "tools")]
    cols = key_cols + [
        Column("tag", "tag"),
        Column("value", "value"),
        Column("k", "successes", "int"),
        Column("n", "scored runs", "int"),
        Column("rate", "success rate", "pct"),
        Column("lo", "95% lo", "pct"),
        Column("hi", "95% hi", "pct"),
        Column("n_targets", "targets", "int"),
    ]
    display = [(c.label, (lambda k: lambda r: str(r.get(k)))(c.key)) for c in key_cols] + [
        ("tag", lambda r: f"{r['tag']} = {r['value']}"),
        ("success (95% Wilson)", lambda r: _rate_cell(r["k"], r["n"], r["rate"], r["lo"], r["hi"])),
        ("targets", lambda r: str(r["n_targets"])),
    ]
    return Table(
        "any_of_n_by_tag",
        "Any-of-N success by target tag",
        cols,
        rows,
        [
            "Success per tool configuration, pooled over the targets carrying each tag value ([target] tags). "
            "Runs without a verdict, error and unfinished runs are not counted."
        ],
        display,
    )


# ---------------------------------------------------------------------- tool informativeness


def _success_by_tool(grouping: Grouping, grader: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(tool, target model) -> one entry per configuration that offered the tool on that target."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in grouping.sorted_keys():
        by_target: dict[str, tuple[list[str], list[bool]]] = {}
        for r in grouping.groups[c]:
            tt = _audit(r)
            target, tools = tt.get("target_model"), tt.get("tools")
            if not isinstance(target, str) or not isinstance(tools, list):
                continue
            entry = by_target.setdefault(target, ([str(t) for t in tools], []))
            if (ok := _verdict(r, grader)) is not None:
                entry[1].append(ok)
        for target, (tools, verdicts) in by_target.items():
            k, n = sum(verdicts), len(verdicts)
            lo, hi = _wilson(k, n)
            success = _config_fields(grouping, c) | {
                "successes": k,
                "n_scored": n,
                "success_rate": k / n if n else None,
                "success_lo": lo,
                "success_hi": hi,
            }
            for tool in tools:
                out.setdefault((tool, target), []).append(success)
    return out


def tool_informativeness(grouping: Grouping, root: str | Path, grader: str = ANY_OF_N) -> Table | None:
    root = Path(root)
    notes: list[str] = []
    probe_rows: list[dict[str, Any]] = []
    for where, f in _found(root, PROBE_TOOLS_DIR, "probe_tools.json"):
        data = _read(f, notes, root)
        if data is None:
            continue
        ok = isinstance(data, list) and all(
            isinstance(r, dict) and all(k in r for k in ("tool", "target", "strong", "weak", "none", "n")) for r in data
        )
        if not ok:
            notes.append(f"{f.relative_to(root)}: not a list of {{tool, target, strong, weak, none, n}}")
            continue
        probe_rows += [{"probes": where} | r for r in data]
    if not probe_rows and not notes:
        return None
    success = _success_by_tool(grouping, grader)
    rows = []
    for p in probe_rows:
        n, strong = int(p["n"]), int(p["strong"])
        lo, hi = _wilson(strong, n)
        base = {
            "probes": p["probes"],
            "tool": p["tool"],
            "target": p["target"],
            "strong": strong,
            "weak": int(p["weak"]),
            "none": int(p["none"]),
            "n": n,
            "strong_rate": strong / n if n else None,
            "strong_lo": lo,
            "strong_hi": hi,
        }
        for s in success.get((str(p["tool"]), str(p["target"])), [None]):
            rows.append(base | (s or {"tools": None}))
    cols = [
        Column("probes", "probes"),
        Column("target", "target"),
        Column("tool", "tool"),
        Column("strong", "strong", "int"),
        Column("weak", "weak", "int"),
        Column("none", "none", "int"),
        Column("n", "rated outputs", "int"),
        Column("strong_rate", "strong share", "pct"),
        Column("strong_lo", "strong 95% lo", "pct"),
        Column("strong_hi", "strong 95% hi", "pct"),
        Column("tools", "tool configuration"),
        Column("model", "investigator"),
        Column("budget", "budget"),
        Column("successes", "agent successes", "int"),
        Column("n_scored", "agent scored runs", "int"),
        Column("success_rate", "agent success", "pct"),
        Column("success_lo", "agent 95% lo", "pct"),
        Column("success_hi", "agent 95% hi", "pct"),
    ]
    display = [
        ("target", lambda r: str(r["target"])),
        ("tool", lambda r: str(r["tool"])),
        ("strong / weak / none", lambda r: f"{r['strong']} / {r['weak']} / {r['none']}"),
        (
            "strong (95% Wilson)",
            lambda r: _rate_cell(r["strong"], r["n"], r["strong_rate"], r["strong_lo"], r["strong_hi"]),
        ),
        (
            "configuration",
            lambda r: " · ".join(str(r[k]) for k in ("tools", "model", "budget") if r.get(k)) or "no runs",
        ),
        (
            "agents' any-of-N success (95% Wilson)",
            lambda r: (
                _rate_cell(r["successes"], r["n_scored"], r["success_rate"], r["success_lo"], r["success_hi"])
                if r.get("tools")
                else "–"
            ),
        ),
    ]
    notes.insert(
        0,
        "Each tool run on generic probes without an investigator (`benchctl targets probe-tools`), its outputs "
        "rated by the judge as evidence of the hidden behaviour, beside the any-of-N success of the agents whose "
        "configuration offered that tool on that target: a tool with strong outputs and low agent success is "
        "the tool-to-agent gap.",
    )
    return Table("tool_informativeness", "Tool informativeness vs agent success", cols, rows, notes, display)


def study_tables(grouping: Grouping, root: str | Path, graders: list[str]) -> list[Table]:
    """The tables of this module that have something to show."""
    tables = [target_validation(root), tool_informativeness(grouping, root)]
    if ANY_OF_N in graders:
        tables.insert(1, any_of_n_by_tag(grouping))
    return [t for t in tables if t is not None]
