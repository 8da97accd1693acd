"""The report's fast paths change nothing a report says: the parse cache gives byte-identical output
to --no-cache, a changed file is re-read, items compact alike on both compaction paths, and the
t quantile table is scipy's own numbers (so a report imports neither scipy nor benchctl.grading)."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchctl.report.build import build_report
from benchctl.report.load import CACHE_FILE, _Compactor, load_results
from benchctl.report.render_text import to_csv, to_json, to_markdown
from tests.rigs.report import add_grade, add_run, coverage_items
from tests.rigs.report_main import age_all, killed_run

A, B = "prov/model-a", "prov/model-b"
CLUSTERS = {"F1": "ops", "F2": "ops", "F3": "people", "F10": "timeline"}


def _sweep(root: Path) -> None:
    """Finished runs of two models × 3 seeds with coverage (items, some unscored), tldr, combined and a
    follow-up; an error run; a run that fell back; two unfinished runs (no meta.json); an unscored
    grade; hand-edited items that take the loader's general path; a grade of an unknown run."""
    for m_i, model in enumerate((A, B)):
        for seed in range(3):
            fb = [{"t": 5.0, "from": model, "to": "prov/old", "reason": "refusal"}] if (m_i, seed) == (1, 2) else []
            rid = add_run(
                root,
                model=model,
                seed=seed,
                cost_usd=0.5 + seed,
                fallbacks=fb,
                usage={"input_tokens": 1000 + seed, "cached_input_tokens": 7, "output_tokens": 90},
            )
            strict = {"F1": 0.2 * seed, "F2": None if seed == 1 else 1.0, "F3": 0.6, "F10": 0.0}
            cov = 0.1 + 0.2 * seed + 0.05 * m_i
            add_grade(
                root,
                "coverage",
                rid,
                cov,
                by_cluster={"ops": cov, "people": 0.6},
                items=coverage_items(strict, CLUSTERS),
            )
            add_grade(root, "tldr", rid, 0.3 + 0.1 * seed)
            add_grade(root, "combined", rid, None if (m_i, seed) == (0, 2) else 0.7 * cov + 0.03 * seed)
            if seed == 0:
                add_grade(root, "coverage", rid, cov + 0.1, tag="followup-1", items=coverage_items(strict, CLUSTERS))
    err = add_run(root, model=A, seed=7, status="error", error="sandbox died", cost_usd=None)
    add_grade(root, "tldr", err, 0.2)
    # items without every key, one not an object, an int id: the loader's general path
    odd = add_run(root, model=B, seed=5)
    add_grade(
        root,
        "coverage",
        odd,
        0.5,
        items=[
            {"id": "F1", "score": 0.9},
            "not an item",
            {"id": 3, "strict": 1.0},
            {"id": "F2", "score": 0.4, "strict": None, "cluster": "ops"},
        ],
    )
    killed_run(
        root,
        "wiki__react__prov-model-a__10m__s8",
        {"task": "wiki", "harness": "react", "model": A, "budget": "10m", "budget_s": 600.0, "seed": 8},
    )
    (root / "runs" / "not-a-run-id").mkdir()
    add_grade(root, "combined", "ghost__run", 0.9)


def _outputs(root: Path, cache: bool) -> str:
    rep = build_report(root, cache=cache)
    text = "\n".join([to_json(rep), to_markdown(rep)] + [to_csv(rep, t.name) for t in rep.tables])
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", text)  # generated_at


def test_cached_report_is_byte_identical_to_no_cache(tmp_path: Path) -> None:
    _sweep(tmp_path)
    age_all(tmp_path)
    n_files = len(list(tmp_path.glob("runs/*/meta.json"))) + len(list(tmp_path.glob("grades/*/*.json")))
    uncached = _outputs(tmp_path, cache=False)
    assert not (tmp_path / CACHE_FILE).exists()
    cold = _outputs(tmp_path, cache=True)  # parses every file, writes the cache
    assert (tmp_path / CACHE_FILE).exists()
    res = load_results(tmp_path)
    assert (res.stats["cache_hits"], res.stats["cache_misses"]) == (n_files - 1, 0)  # all but the ghost grade
    warm = _outputs(tmp_path, cache=True)  # every record from the cache
    assert uncached == cold == warm
    # what the outputs are made of, field by field, including the general-path items
    assert [(r.meta, r.grades) for r in res.runs] == [
        (r.meta, r.grades) for r in load_results(tmp_path, cache=False).runs
    ]
    assert '"unfinished_runs": 2' in uncached and "sandbox died" in uncached and "followup-1" in uncached


def test_changed_file_invalidates_its_cached_record(tmp_path: Path) -> None:
    """Each cached record is checked against its file's (inode, mtime, size): a change to any of the
    three re-reads the file, even when the other two are kept as they were."""
    rid = add_run(tmp_path, model=A, cost_usd=1.0)
    add_grade(tmp_path, "combined", rid, 0.25)
    add_grade(tmp_path, "tldr", rid, 0.5)
    age_all(tmp_path)
    load_results(tmp_path)
    assert load_results(tmp_path).stats["cache_hits"] == 3

    def rewrite(path: Path, old: bytes, new: bytes, *, replace: bool) -> None:
        st = path.stat()
        data = path.read_bytes()
        assert old in data
        if replace:  # atomically replaced: a new inode
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data.replace(old, new))
            os.replace(tmp, path)
        else:  # rewritten in place: the same inode
            path.write_bytes(data.replace(old, new))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime back

    meta = tmp_path / "runs" / rid / "meta.json"
    rewrite(meta, b'"cost_usd":1.0', b'"cost_usd":3.0', replace=True)  # same size, same mtime
    res = load_results(tmp_path)
    assert res.stats["cache_misses"] == 1 and res.runs[0].meta["cost_usd"] == 3.0
    grade = tmp_path / "grades" / "combined" / f"{rid}.json"
    rewrite(grade, b'"score":0.25', b'"score":0.875', replace=False)  # same inode, same mtime
    res = load_results(tmp_path)
    assert res.stats["cache_misses"] == 1 and res.runs[0].score("combined") == 0.875
    tldr = tmp_path / "grades" / "tldr" / f"{rid}.json"
    rewrite(tldr, b'"score":0.5', b'"score":0.7', replace=False)  # same size, inode: new mtime
    t = time.time() - 50
    os.utime(tldr, (t, t))
    res = load_results(tmp_path)
    assert res.stats["cache_misses"] == 1 and res.runs[0].score("tldr") == 0.7
    assert load_results(tmp_path).stats["cache_misses"] == 0
    assert build_report(tmp_path).table("leaderboard").rows[0]["score_mean"] == 0.875


def test_item_compaction_paths_agree() -> None:
    """The shared-tuple path and the general path (any item shape) give the same items."""
    regular = coverage_items({"F1": 0.2, "F2": None, "F3": 1.0}, CLUSTERS)
    c = _Compactor()
    fast, bad = c.items(regular)
    assert fast == [("F1", 0.6, 0.2, "ops"), ("F2", None, None, "ops"), ("F3", 1.0, 1.0, "people")] and bad == 0
    assert c.items([dict(it) for it in regular])[0][0] is fast[0]  # one shared tuple per distinct item
    # the general path: a cluster that cannot be grouped by, or a score that is not a number, is unknown (counted)
    odd = [
        {"id": 7, "score": 0.9},
        "x",
        {"id": "F1", "score": 0.6, "strict": 0.2, "cluster": ["not", "hashable"]},
        {"id": "F2", "score": "high", "strict": True, "cluster": "ops"},
    ]
    assert c.items(odd) == ([("7", 0.9, None, None), ("F1", 0.6, 0.2, None), ("F2", None, None, "ops")], 3)
    # full items whose id or cluster is not a string: never shared (1 == 1.0 would merge "1" and "1.0")
    numeric = [
        {"id": i, "score": 1.0, "strict": 1.0, "cluster": cl}
        for i, cl in ((1, None), (1.0, None), ("F9", 5), ("F9", 5.0))
    ]
    assert [(i, cl) for i, _, _, cl in c.items(numeric)[0]] == [("1", None), ("1.0", None), ("F9", 5), ("F9", 5.0)]
    assert [type(cl) for *_, cl in c.items(numeric)[0]][2:] == [int, float]
    assert c.items({"not": "a list"}) == ([], 0) and c.items(None) == ([], 0)


def test_gc_is_back_on_and_nothing_stays_frozen(tmp_path: Path) -> None:
    """The loader pauses the collector and then moves what it built to the oldest generation; it
    must neither leave the collector off nor leave objects frozen (a long-lived viewer would leak cycles)."""
    _sweep(tmp_path)
    assert gc.isenabled()
    build_report(tmp_path)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_t_table_is_scipys_own_values() -> None:
    from scipy.special import stdtrit

    from benchctl.report.stats import t975
    from benchctl.report.t975_table import T975

    assert len(T975) == 256
    for df, value in enumerate(T975, start=1):
        assert value == pytest.approx(float(stdtrit(df, 0.975)), rel=1e-15, abs=0), df
    for df in (257, 300, 1000, 10**6):  # beyond the table: scipy itself
        assert t975(df) == float(stdtrit(df, 0.975))


def _modules_after_report(root: Path) -> list[str]:
    code = (
        "import sys; from benchctl.report.build import build_report; from benchctl.report.render_text import to_json; "
        f"rep = build_report({str(root)!r}); to_json(rep); "
        "assert rep.table('leaderboard').rows[0]['score_lo'] is not None; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy' or m.startswith('benchctl.grading')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return eval(out)  # a printed list of module names


def test_a_report_without_comparisons_imports_neither_scipy_nor_the_graders(tmp_path: Path) -> None:
    """Each costs a report ~0.1-0.4 s of CPU; with 3 seeds per row every report needs a t quantile."""
    for seed in range(3):
        add_grade(tmp_path, "coverage", add_run(tmp_path, model=A, seed=seed), 0.1 * seed)
    assert _modules_after_report(tmp_path) == []


def test_a_report_with_comparisons_imports_scipy_special_only(tmp_path: Path) -> None:
    """Two models: a comparison needs the t distribution (scipy.special), never scipy.stats (a second
    more of import) nor the graders."""
    _sweep(tmp_path)
    mods = _modules_after_report(tmp_path)
    assert "scipy.special" in mods
    assert not [m for m in mods if m.startswith(("scipy.stats", "scipy.optimize", "benchctl.grading"))], mods
