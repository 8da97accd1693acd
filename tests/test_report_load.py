"""The report loader: layout paths, problems reported not fatal, and the parse cache never stale."""
from __future__ import annotations

import os
import time
from pathlib import Path

from benchctl.report.build import build_report
from benchctl.report.load import CACHE_FILE, load_results
from tests.report_fixtures import add_grade, add_run

A = "prov/model-a"


def _age_all(root: Path, seconds: float = 100) -> None:
    """Make every file old enough to be cached (fresh files are deliberately not cached)."""
    t = time.time() - seconds
    for p in root.rglob("*.json"):
        os.utime(p, (t, t))


def _scores(root: Path) -> dict[str, float | None]:
    return {r.run_id: r.score("combined") for r in load_results(root).runs}


def test_cache_hits_and_invalidation(tmp_path: Path) -> None:
    ids = [add_run(tmp_path, model=A, seed=s) for s in range(3)]
    for i, rid in enumerate(ids):
        add_grade(tmp_path, "combined", rid, 0.1 * (i + 1))
    _age_all(tmp_path)
    first = load_results(tmp_path)
    assert first.stats["cache_misses"] == 6 and (tmp_path / CACHE_FILE).exists()
    second = load_results(tmp_path)
    assert (second.stats["cache_hits"], second.stats["cache_misses"]) == (6, 0)
    assert [r.meta for r in second.runs] == [r.meta for r in first.runs]
    assert _scores(tmp_path) == {ids[0]: 0.1, ids[1]: 0.2, ids[2]: 0.1 * 3}

    # rewrite one grade in place with the same size: a new mtime makes it a miss
    gpath = tmp_path / "grades" / "combined" / f"{ids[0]}.json"
    data = gpath.read_bytes()
    assert b'"score":0.1,' in data
    gpath.write_bytes(data.replace(b'"score":0.1,', b'"score":0.7,'))
    third = load_results(tmp_path)
    assert third.stats["cache_misses"] == 1
    assert _scores(tmp_path)[ids[0]] == 0.7
    # the just-written file is "racy": not cached until it is a few seconds old
    assert load_results(tmp_path).stats["cache_misses"] == 1

    # a deleted grade disappears, a new run appears
    gpath.unlink()
    rid = add_run(tmp_path, model=A, seed=9)
    s = _scores(tmp_path)
    assert s[ids[0]] is None and rid in s


def test_corrupt_or_disabled_cache(tmp_path: Path) -> None:
    add_grade(tmp_path, "combined", add_run(tmp_path, model=A), 0.4)
    _age_all(tmp_path)
    (tmp_path / CACHE_FILE).write_bytes(b"garbage, not a cache")
    assert list(_scores(tmp_path).values()) == [0.4]
    assert load_results(tmp_path).stats["cache_hits"] == 2          # rewritten properly
    (tmp_path / CACHE_FILE).unlink()
    r = load_results(tmp_path, cache=False)
    assert r.stats["cache_misses"] == 2 and not (tmp_path / CACHE_FILE).exists()
    build_report(tmp_path, cache=False)
    assert not (tmp_path / CACHE_FILE).exists()


def test_unwritable_cache_still_reports(tmp_path: Path) -> None:
    # A directory where the cache file should be: it can be neither read nor replaced (works as
    # root too, unlike chmod) — the report must not care.
    add_grade(tmp_path, "combined", add_run(tmp_path, model=A), 0.4)
    _age_all(tmp_path)
    (tmp_path / CACHE_FILE).mkdir()
    rep = build_report(tmp_path)
    assert rep.table("leaderboard").rows[0]["score_mean"] == 0.4
    assert (tmp_path / CACHE_FILE).is_dir() and not rep.warnings


def test_problems_are_reported_not_fatal(tmp_path: Path) -> None:
    good = add_run(tmp_path, model=A, seed=0)
    add_grade(tmp_path, "combined", good, 0.5)
    bad = tmp_path / "runs" / "broken__run" / "meta.json"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"{not json")
    (tmp_path / "runs" / "unfinished__run").mkdir()                    # no meta.json yet: not a run
    add_grade(tmp_path, "combined", "ghost__run", 0.9)                 # grade without a run
    (tmp_path / "grades" / "combined" / f"{good}~followup-1.json").write_bytes(b"[]")
    res = load_results(tmp_path)
    assert [r.run_id for r in res.runs] == [good] and res.stats["run_dirs"] == 3
    joined = " | ".join(res.problems)
    assert "unreadable runs/broken__run/meta.json" in joined
    assert "grade for unknown run: grades/combined/ghost__run.json" in joined
    assert f"unreadable grades/combined/{good}~followup-1.json" in joined
    rep = build_report(tmp_path)
    assert sum("Problem reading results" in w for w in rep.warnings) == 3
    assert rep.table("leaderboard").rows[0]["score_mean"] == 0.5


def test_follow_up_tag_from_layout_path(tmp_path: Path) -> None:
    rid = add_run(tmp_path, model=A)
    add_grade(tmp_path, "coverage", rid, 0.3)
    add_grade(tmp_path, "coverage", rid, 0.6, tag="followup-1")
    run = load_results(tmp_path).runs[0]
    assert run.score("coverage") == 0.3 and run.score("coverage", "followup-1") == 0.6
