"""Load a results directory (runs + grades + tournament ratings) fast, from files alone.

`benchctl report` must handle sweeps of 10,000 runs in well under two seconds, so this module
avoids per-file overhead: one `os.scandir` per directory (no `Path.iterdir` + `is_dir` stat
pairs), raw `open().read()` + `orjson.loads`, and no pathlib objects in the hot loop. The paths
it reads are exactly the ones `benchctl.layout` defines (`runs/<run_id>/meta.json`,
`grades/<grader>/<run_id>[~<tag>].json`); nothing else decides paths.

Grade items are compacted on load to the fields a report uses (id, score, strict, cluster):
judge quotes and reasons are long and would multiply memory by ten on a big sweep.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchctl.layout import GRADES, META, RUNS, grade_path

from benchctl.tournament.schema import RATINGS_FILE, TOURNAMENT as TOURNAMENT_DIR


@dataclass(slots=True)
class Item:
    """One graded item (a finding, a prediction) reduced to what reports aggregate."""
    id: str
    score: float | None
    strict: float | None
    cluster: str | None


@dataclass(slots=True)
class Grade:
    grader: str
    run_id: str
    artifact_tag: str | None
    score: float | None
    status: str
    judge: str | None
    rubric_hash: str | None
    by_cluster: dict[str, float]
    items: list[Item]
    n_unscored: int
    cost_usd: float | None
    artifact: str | None


@dataclass(slots=True)
class Run:
    run_id: str
    meta: dict[str, Any]
    # (grader, artifact_tag) -> Grade; artifact_tag None = the main artifact
    grades: dict[tuple[str, str | None], Grade] = field(default_factory=dict)

    def grade(self, grader: str, tag: str | None = None) -> Grade | None:
        return self.grades.get((grader, tag))

    def score(self, grader: str, tag: str | None = None) -> float | None:
        g = self.grades.get((grader, tag))
        return None if g is None else g.score


@dataclass
class Results:
    root: Path
    runs: list[Run]
    graders: list[str]                      # grader names seen, sorted
    ratings: dict[str, Any] | None          # grades/tournament/ratings.json, if present
    sweep: dict[str, Any] | None            # sweep.json, if present
    problems: list[str]                     # unreadable files, orphan grades: reported, not fatal
    stats: dict[str, int] = field(default_factory=dict)


def _read(path: str) -> Any:
    with open(path, "rb") as f:
        return orjson.loads(f.read())


def _compact_items(raw: Any) -> list[Item]:
    if not isinstance(raw, list):
        return []
    out = []
    for it in raw:
        if isinstance(it, dict):
            out.append(Item(str(it.get("id", "")), it.get("score"), it.get("strict"), it.get("cluster")))
    return out


def _to_grade(rec: dict[str, Any], grader: str, run_id: str, tag: str | None) -> Grade:
    score = rec.get("score")
    status = rec.get("status") or ("unscored" if score is None else "scored")
    if status == "unscored":
        score = None                                  # an unscored record never counts as a number
    return Grade(
        grader=rec.get("grader") or grader,
        run_id=rec.get("run_id") or run_id,
        artifact_tag=rec.get("artifact_tag", tag),
        score=None if score is None else float(score),
        status=status,
        judge=rec.get("judge"),
        rubric_hash=rec.get("rubric_hash"),
        by_cluster=rec.get("by_cluster") or {},
        items=_compact_items(rec.get("items")),
        n_unscored=int(rec.get("n_unscored") or 0),
        cost_usd=rec.get("cost_usd"),
        artifact=rec.get("artifact"),
    )


def load_results(results: str | os.PathLike[str]) -> Results:
    """Read every run's meta.json and every grade under `results`. Raises FileNotFoundError with
    a hint when the directory is not a results directory."""
    root = Path(results)
    runs_root = os.path.join(root, RUNS)
    grades_root = os.path.join(root, GRADES)
    if not os.path.isdir(runs_root):
        raise FileNotFoundError(
            f"{root} is not a results directory: no {RUNS}/ inside. Pass the sweep directory that "
            f"`benchctl run` wrote (it contains runs/<run_id>/meta.json).")
    problems: list[str] = []
    by_id: dict[str, Run] = {}
    n_dirs = 0
    with os.scandir(runs_root) as it:
        entries = sorted((e.name for e in it if e.is_dir()))
    for name in entries:
        n_dirs += 1
        meta_path = os.path.join(runs_root, name, META)
        try:
            meta = _read(meta_path)
        except FileNotFoundError:
            continue                                   # never finished writing meta.json: not a run yet
        except (orjson.JSONDecodeError, OSError) as e:
            problems.append(f"unreadable {os.path.relpath(meta_path, root)}: {e}")
            continue
        if not isinstance(meta, dict):
            problems.append(f"{os.path.relpath(meta_path, root)} is not a JSON object")
            continue
        by_id[name] = Run(run_id=name, meta=meta)

    graders: list[str] = []
    n_grades = 0
    if os.path.isdir(grades_root):
        with os.scandir(grades_root) as it:
            grader_dirs = sorted(e.name for e in it if e.is_dir())
        for grader in grader_dirs:
            gdir = os.path.join(grades_root, grader)
            with os.scandir(gdir) as it:
                # Only files: grades/tournament/ also holds canonical/, extracted/, judge_log/ dirs
                # and ratings.json, which is not a per-run GradeRecord.
                files = [e.name for e in it if e.name.endswith(".json") and not e.name.startswith(".")
                         and e.name != RATINGS_FILE and e.is_file()]
            if files:
                graders.append(grader)
            for fname in files:
                stem = fname[:-5]
                run_id, _, file_tag = stem.partition("~")
                run = by_id.get(run_id)
                if run is None:
                    problems.append(f"grade for unknown run: {GRADES}/{grader}/{fname}")
                    continue
                try:
                    rec = _read(os.path.join(gdir, fname))
                except (orjson.JSONDecodeError, OSError) as e:
                    problems.append(f"unreadable {GRADES}/{grader}/{fname}: {e}")
                    continue
                g = _to_grade(rec, grader, run_id, file_tag or None)
                run.grades[(grader, g.artifact_tag)] = g
                n_grades += 1

    ratings = None
    rpath = os.path.join(grades_root, TOURNAMENT_DIR, RATINGS_FILE)
    if os.path.exists(rpath):
        try:
            ratings = _read(rpath)
        except (orjson.JSONDecodeError, OSError) as e:
            problems.append(f"unreadable {GRADES}/{TOURNAMENT_DIR}/{RATINGS_FILE}: {e}")
    sweep = None
    spath = os.path.join(root, "sweep.json")
    if os.path.exists(spath):
        try:
            sweep = _read(spath)
        except (orjson.JSONDecodeError, OSError) as e:
            problems.append(f"unreadable sweep.json: {e}")
    return Results(root=root, runs=list(by_id.values()), graders=graders, ratings=ratings, sweep=sweep,
                   problems=problems, stats={"run_dirs": n_dirs, "runs": len(by_id), "grades": n_grades})


# Kept importable so tests and tools can check the loader agrees with the layout contract.
__all__ = ["Item", "Grade", "Run", "Results", "load_results", "grade_path"]
