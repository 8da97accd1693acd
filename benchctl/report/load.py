"""Load a results directory (runs + grades + tournament ratings) fast, from files alone.

`benchctl report` must handle sweeps of 10,000 runs in well under two seconds, so this module
avoids per-file overhead: one `os.scandir` per directory (no `Path.iterdir` + `is_dir` stat
pairs), raw reads (`cache.read_bytes`) + `orjson.loads`, and no pathlib objects in the hot loop. The paths
it reads are exactly the ones `benchctl.layout` defines (`runs/<run_id>/meta.json`,
`grades/<grader>/<run_id>[~<tag>].json`); nothing else decides paths.

A run directory without `meta.json` is an **unfinished** run (killed by SIGKILL or a crash, or
still running): it is loaded with status "unfinished" and what can be derived without a meta —
the spec from the transcript's `run_start` event, else the configuration of a finished run with
the same id but another seed, else the parts of the run id — and never a score or a cost.

Grade items are compacted on load to the fields a report uses (id, score, strict, cluster):
judge quotes and reasons are long and would multiply memory by ten on a big sweep.

The parse cache (`benchctl.report.cache`) keeps each file's compacted record between loads,
checked against the file on every load: a changed, added or removed file is re-read.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from benchctl.layout import ARTIFACTS, GRADES, META, RUNS, TRANSCRIPT, parse_run_id
from benchctl.report.cache import CACHE_FILE, FileCache
from benchctl.tournament.schema import RATINGS_FILE
from benchctl.tournament.schema import TOURNAMENT as TOURNAMENT_DIR

# A graded item (finding, prediction) reduced to what reports aggregate, as a plain tuple
# (id, score, strict, cluster): 400,000 of them in a 10,000-run sweep, and tuples are ~20x
# cheaper to build than objects and can be cached with `marshal`.
Item = tuple  # (id: str, score: float | None, strict: float | None, cluster: str | None)


UNFINISHED = "unfinished"  # status of a run directory without meta.json (report-level only)
RUN_START_SCAN_BYTES = 1 << 20  # how far into a transcript to look for its run_start event


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
    bad_values: int = 0  # item scores or clusters, by_cluster values, cost_usd of the wrong type: read as unknown
    judge_noise: dict[str, Any] | None = None  # judge repeats / panels (grading.panel): report.judge_noise reads it
    error: str | None = None  # why a grade has no score (or some items none), on one line: `unscored_error`


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
    graders: list[str]  # grader names seen, sorted
    ratings: dict[str, Any] | None  # grades/tournament/ratings.json, if present
    sweep: dict[str, Any] | None  # sweep.json, if present
    problems: list[str]  # unreadable files, orphan grades: reported, not fatal
    stats: dict[str, int] = field(default_factory=dict)


def _read(path: str) -> Any:
    with open(path, "rb") as f:
        return orjson.loads(f.read())


_ITEM_FIELDS = itemgetter("id", "score", "strict", "cluster")


class _Compactor:
    """Grade items reduced to `Item` tuples, one shared tuple per distinct item.

    A 10,000-run sweep has ~400,000 items but only a few hundred distinct (id, score, strict,
    cluster) tuples (38 findings × the judge's 0.1 steps), so each item is looked up in a dict of
    the tuples seen so far: a few C-level calls per item instead of a Python loop body, far less
    memory, and `marshal` writes (and loads) each shared tuple once: the items take a fifth of the
    space they did in the cache.
    Only items with a string id and a string (or no) cluster are shared, and tuples that compare
    equal are interchangeable for every use of an item: the report only compares scores and does
    arithmetic on them (a score of 1 and one of 1.0 count alike). Anything else takes the general
    path, which is the per-item code this replaced."""

    def __init__(self) -> None:
        self.seen: dict[Any, Any] = {}

    def share(self, value: Any) -> Any:
        """One shared object per distinct string (grader, status, judge, ... repeat in every grade)."""
        return self.seen.setdefault(value, value) if type(value) is str else value

    def items(self, raw: Any) -> tuple[list[Item], int]:
        """The compact items, and how many of their values were of the wrong type (a score or strict
        score that is not a number, a cluster that cannot be a name): read as None."""
        if not isinstance(raw, list):
            return [], 0
        try:
            keys = list(map(_ITEM_FIELDS, raw))  # KeyError/TypeError: an item that is not a full dict
            try:
                return list(map(self.seen.__getitem__, keys)), 0
            except KeyError:  # items not seen yet: add their compact form
                for k in keys:
                    if k not in self.seen:
                        if type(k[0]) is not str or not (k[3] is None or type(k[3]) is str):
                            raise TypeError(
                                "an id or cluster that is not a string"
                            ) from None  # 1 == 1.0: not shareable
                        if not (_is_number(k[1]) and _is_number(k[2])):
                            raise TypeError("a score that is not a number") from None
                        self.seen[k] = _compact_item(*k)
                return list(map(self.seen.__getitem__, keys)), 0
        except (KeyError, TypeError):  # incl. unhashable values: the general path
            items = [it for it in raw if isinstance(it, dict)]
            bad = sum(
                (not _is_number(it.get("score")))
                + (not _is_number(it.get("strict")))
                + (not _hashable(it.get("cluster")))
                for it in items
            )
            return [
                _compact_item(
                    it.get("id", ""),
                    _number(it.get("score")),
                    _number(it.get("strict")),
                    cl if _hashable(cl := it.get("cluster")) else None,
                )
                for it in items
            ], bad


def _is_number(v: Any) -> bool:
    """None (no value) or a JSON number; True/False are not scores (bool is an int subclass)."""
    return v is None or type(v) is float or type(v) is int


def _hashable(v: Any) -> bool:
    """A cluster name the report can group by (a list or an object cannot be one: read as no cluster)."""
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _number(v: Any) -> float | int | None:
    """A JSON number as it is; anything else (a string, a list, true) as None: unknown, never a crash
    in the middle of a report and never a 0."""
    return v if _is_number(v) else None


def _compact_item(fid: Any, score: Any, strict: Any, cluster: Any) -> Item:
    # sys.intern: finding ids and clusters repeat in every run; one shared string each.
    return (sys.intern(str(fid)), score, strict, sys.intern(cluster) if isinstance(cluster, str) else cluster)


def _grade_fields(rec: Any, grader: str, run_id: str, tag: str | None, compact: _Compactor) -> list[Any]:
    """A grade record reduced to Grade's fields, in order (a plain list, so it caches as JSON)."""
    if not isinstance(rec, dict):
        raise ValueError("not a JSON object")
    score = rec.get("score")
    status = rec.get("status") or ("unscored" if score is None else "scored")
    if status == "unscored":
        score = None  # an unscored record never counts as a number
    share = compact.share
    items, bad = compact.items(rec.get("items"))
    by_cluster = rec.get("by_cluster") or {}
    if not isinstance(by_cluster, dict):
        by_cluster, bad = {}, bad + 1
    elif not all(map(_is_number, by_cluster.values())):
        bad += sum(not _is_number(v) for v in by_cluster.values())
        by_cluster = {k: v for k, v in by_cluster.items() if _is_number(v)}
    cost = rec.get("cost_usd")
    if not _is_number(cost):
        cost, bad = None, bad + 1  # unknown, never 0
    return [
        share(rec.get("grader") or grader),
        rec.get("run_id") or run_id,
        share(rec.get("artifact_tag", tag)),
        None if score is None else float(score),
        share(status),
        share(rec.get("judge")),
        share(rec.get("rubric_hash")),
        by_cluster,
        items,
        int(rec.get("n_unscored") or 0),
        cost,
        share(rec.get("artifact")),
        bad,
        noise if isinstance(noise := rec.get("judge_noise"), dict) else None,
        unscored_error(rec),
    ]


ERROR_CHARS = 300  # a reason is one line of a table: the grade file has the rest


def unscored_error(rec: dict[str, Any]) -> str | None:
    """Why a grade record has no score, on one line: its own `error` (combined, tournament), else its
    first unscored item's (the judge graders), with how many items are unscored. Errors may quote
    judge or agent text: callers render it as text, never as markup."""
    err = rec.get("error")
    if not (isinstance(err, str) and err.strip()):
        items = rec.get("items")
        failed = [i for i in items if isinstance(i, dict) and i.get("score") is None] if isinstance(items, list) else []
        first = next((i for i in failed if isinstance(i.get("error"), str) and i["error"].strip()), None)
        if first is None:
            return None
        more = f" (and {len(failed) - 1} more unscored items)" if len(failed) > 1 else ""
        err = f"item {first.get('id')}: {first['error']}{more}"
    line = " ".join(err.split())
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 1] + "…"


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of small containers: none of
    them form cycles, yet each allocation burst triggers full scans (measured: loading 10,000
    runs took twice as long with the collector on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # The collector counts allocations even while off, so the first allocation after
            # enable() would scan every object made meanwhile (~0.1 s after loading 10,000 runs).
            # freeze() + unfreeze() moves them to the oldest generation unscanned, as if they had
            # survived collections; they are still freed by reference counting, and scanned by
            # the next full collection like any long-lived object.
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def load_results(
    results: str | os.PathLike[str], *, cache: bool = True, memo: dict[str, tuple[Any, ...]] | None = None
) -> Results:
    """Read every run's meta.json and every grade under `results`. Raises FileNotFoundError with
    a hint when the directory is not a results directory. `cache=False` ignores and does not
    write the parse cache. `memo` (for long-running readers such as `benchctl view`, which must
    not write into a results dir): keep the cache in this dict between calls instead of the
    cache file, which is then only read, on the first call."""
    with gc_paused():
        return _load(results, cache, memo)


def _load(results: str | os.PathLike[str], cache: bool, memo: dict[str, tuple[Any, ...]] | None = None) -> Results:
    root = Path(results)
    sroot = str(root)
    runs_root = os.path.join(sroot, RUNS)
    grades_root = os.path.join(sroot, GRADES)
    if not os.path.isdir(runs_root):
        raise FileNotFoundError(
            f"{root} is not a results directory: no {RUNS}/ inside. Pass the sweep directory that "
            f"`benchctl run` wrote (it contains runs/<run_id>/meta.json)."
        )
    fc = FileCache(sroot, cache, memo)
    problems: list[str] = []
    by_id: dict[str, Run] = {}
    with os.scandir(runs_root) as it:
        names = sorted(e.name for e in it if e.is_dir() and not e.name.startswith("."))
    unfinished: list[str] = []
    for name in names:
        rel = f"{RUNS}/{name}/{META}"
        path = f"{runs_root}/{name}/{META}"
        try:
            meta = fc.get(rel, path, orjson.loads)
        except FileNotFoundError:
            unfinished.append(name)  # never wrote meta.json: counted and listed, not averaged
            continue
        except (orjson.JSONDecodeError, OSError) as e:
            problems.append(f"unreadable {rel}: {e}")
            continue
        if not isinstance(meta, dict):
            problems.append(f"{rel} is not a JSON object")
            continue
        meta, bad = _checked_meta(meta)
        if bad:
            problems.append(f"{rel}: {', '.join(bad)} not as benchctl writes them (read as unknown)")
        by_id[name] = Run(run_id=name, meta=meta)
    if unfinished:
        # a finished run of the same configuration: same id up to the seed
        twins = {rid.rpartition("__")[0]: r for rid, r in by_id.items()}
        for name in unfinished:
            by_id[name] = Run(run_id=name, meta=unfinished_meta(os.path.join(runs_root, name), name, twins))
    by_id = dict(sorted(by_id.items()))

    graders: list[str] = []
    n_grades = 0
    compact = _Compactor()
    if os.path.isdir(grades_root):
        with os.scandir(grades_root) as it:
            grader_dirs = sorted(e.name for e in it if e.is_dir())
        for grader in grader_dirs:
            gdir = os.path.join(grades_root, grader)
            with os.scandir(gdir) as it:
                # Only files: grades/tournament/ also holds canonical/, extracted/, judge_log/ dirs
                # and ratings.json, which is not a per-run GradeRecord.
                files = [
                    name
                    for e in it
                    if (name := e.name).endswith(".json") and name[0] != "." and name != RATINGS_FILE and e.is_file()
                ]
            if files:
                graders.append(grader)
            for fname in files:
                run_id, _, file_tag = fname[:-5].partition("~")
                rel = f"{GRADES}/{grader}/{fname}"
                run = by_id.get(run_id)
                if run is None:
                    problems.append(f"grade for unknown run: {rel}")
                    continue
                try:
                    fields = fc.get(
                        rel,
                        f"{gdir}/{fname}",
                        lambda data: _grade_fields(orjson.loads(data), grader, run_id, file_tag or None, compact),
                    )
                except (orjson.JSONDecodeError, OSError, ValueError, TypeError) as err:
                    problems.append(f"unreadable {rel}: {err}")
                    continue
                g = Grade(*fields)
                if g.bad_values:
                    problems.append(
                        f"{rel}: {g.bad_values} value(s) not as benchctl writes them (item scores and "
                        f"clusters, by_cluster, cost_usd) read as unknown"
                    )
                run.grades[(grader, g.artifact_tag)] = g
                n_grades += 1
    fc.save()

    ratings = None
    rpath = os.path.join(grades_root, TOURNAMENT_DIR, RATINGS_FILE)
    if os.path.exists(rpath):
        try:
            ratings = _read(rpath)
        except (orjson.JSONDecodeError, OSError) as e:
            problems.append(f"unreadable {GRADES}/{TOURNAMENT_DIR}/{RATINGS_FILE}: {e}")
    sweep = None
    spath = os.path.join(sroot, "sweep.json")
    if os.path.exists(spath):
        try:
            sweep = _read(spath)
        except (orjson.JSONDecodeError, OSError) as e:
            problems.append(f"unreadable sweep.json: {e}")
    return Results(
        root=root,
        runs=list(by_id.values()),
        graders=graders,
        ratings=ratings,
        sweep=sweep,
        problems=problems,
        stats={
            "run_dirs": len(names),
            "runs": len(by_id),
            "grades": n_grades,
            "unfinished": len(unfinished),
            "cache_hits": fc.hits,
            "cache_misses": fc.misses,
        },
    )


_META_NUMBERS = ("cost_usd", "elapsed_s")


def _checked_meta(meta: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`meta` and the fields the report does arithmetic or lookups on that hold something else than
    benchctl writes (a hand edit, another tool). With none, `meta` itself (a few type checks per run,
    ~1 µs); else a copy with those values unknown — a number that is not one is None (never 0),
    usage keeps its numbers, fallbacks its entries that are objects — so that they are named in the
    report's problems rather than crash it halfway. The cached record stays as read."""
    fixed: dict[str, Any] = {k: None for k in _META_NUMBERS if not _is_number(meta.get(k))}
    usage = meta.get("usage")
    if usage is not None and not (isinstance(usage, dict) and all(map(_is_number, usage.values()))):
        fixed["usage"] = {k: v for k, v in usage.items() if _is_number(v)} if isinstance(usage, dict) else {}
    fallbacks = meta.get("fallbacks")
    if fallbacks is not None and not (isinstance(fallbacks, list) and all(isinstance(f, dict) for f in fallbacks)):
        fixed["fallbacks"] = [f for f in fallbacks if isinstance(f, dict)] if isinstance(fallbacks, list) else []
    return ({**meta, **fixed} if fixed else meta), list(fixed)


def unfinished_meta(run_path: str, run_id: str, twins: dict[str, Run]) -> dict[str, Any]:
    """A stand-in meta.json for a run that never wrote one: status "unfinished", no cost, no usage,
    and the configuration from (1) the transcript's run_start event (the exact spec), else (2) a
    finished run of the same configuration (`twins`: run id without its seed part -> run), else
    (3) the run id's parts."""
    meta: dict[str, Any] = {"run_id": run_id, "status": UNFINISHED, "cost_usd": None, "usage": {}, "fallbacks": []}
    start = _run_start(os.path.join(run_path, TRANSCRIPT))
    parsed = parse_run_id(run_id)
    if start is not None and isinstance(spec := start.get("spec"), dict):
        meta.update(
            {k: spec.get(k) for k in ("task", "harness", "model", "budget", "budget_s", "seed", "variant")},
            spec=spec,
            task_hash=start.get("task_hash"),
            started_at=start.get("t"),
            derived_from="transcript",
        )
    elif parsed is not None:
        twin = twins.get(run_id.rpartition("__")[0])
        if twin is not None:
            keys = ("task", "harness", "model", "budget", "budget_s", "variant", "tools", "task_hash")
            meta.update(
                {k: twin.meta[k] for k in keys if k in twin.meta},
                seed=parsed["seed"],
                spec={**(twin.meta.get("spec") or {}), "seed": parsed["seed"], "run_id": run_id},
                derived_from="run id",
            )
        else:
            meta.update({k: parsed[k] for k in ("task", "harness", "model", "budget", "seed")}, derived_from="run id")
            if len(parsed["extra"]) == 2:
                meta["variant"], meta["tools"] = parsed["extra"]
            from benchctl.policies import parse_duration  # rare path; not imported by every report

            try:
                meta["budget_s"] = parse_duration(parsed["budget"])
            except ValueError:
                pass  # a token budget or a foreign id: no seconds
    else:
        meta["derived_from"] = "nothing (the directory name is not a run id)"
    art = os.path.join(run_path, ARTIFACTS)
    meta["artifacts"] = sorted(os.path.relpath(os.path.join(d, f), art) for d, _, fs in os.walk(art) for f in fs)
    meta["transcript"] = os.path.exists(os.path.join(run_path, TRANSCRIPT))
    return meta


def _run_start(path: str) -> dict[str, Any] | None:
    """The transcript's run_start event (written right after the sandbox starts), or None."""
    try:
        with open(path, "rb") as f:
            seen = 0
            for line in f:
                seen += len(line)
                if b'"run_start"' in line:
                    try:
                        ev = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue  # a torn line
                    if isinstance(ev, dict) and ev.get("type") == "run_start":
                        return ev
                if seen > RUN_START_SCAN_BYTES:
                    break
    except OSError:
        pass
    return None


__all__ = ["Item", "Grade", "Run", "Results", "load_results", "gc_paused", "CACHE_FILE", "UNFINISHED"]
