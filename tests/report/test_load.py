"""The report loader: layout paths, problems reported not fatal, and the parse cache never stale."""

from __future__ import annotations

from pathlib import Path

from benchctl.report.build import build_report
from benchctl.report.load import CACHE_FILE, load_results
from tests.rigs.report import add_grade, add_run
from tests.rigs.report_main import age_all, killed_run

A = "prov/model-a"


def _scores(root: Path) -> dict[str, float | None]:
    return {r.run_id: r.score("combined") for r in load_results(root).runs}


def test_cache_hits_and_invalidation(tmp_path: Path) -> None:
    ids = [add_run(tmp_path, model=A, seed=s) for s in range(3)]
    for i, rid in enumerate(ids):
        add_grade(tmp_path, "combined", rid, 0.1 * (i + 1))
    age_all(tmp_path)
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
    age_all(tmp_path)
    (tmp_path / CACHE_FILE).write_bytes(b"garbage, not a cache")
    assert list(_scores(tmp_path).values()) == [0.4]
    assert load_results(tmp_path).stats["cache_hits"] == 2  # rewritten properly
    (tmp_path / CACHE_FILE).unlink()
    r = load_results(tmp_path, cache=False)
    assert r.stats["cache_misses"] == 2 and not (tmp_path / CACHE_FILE).exists()
    build_report(tmp_path, cache=False)
    assert not (tmp_path / CACHE_FILE).exists()


def test_unwritable_cache_still_reports(tmp_path: Path) -> None:
    # A directory where the cache file should be: it can be neither read nor replaced (works as
    # root too, unlike chmod) — the report must not care.
    add_grade(tmp_path, "combined", add_run(tmp_path, model=A), 0.4)
    age_all(tmp_path)
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
    (tmp_path / "runs" / "unfinished__run").mkdir()  # no meta.json: an unfinished run
    add_grade(tmp_path, "combined", "ghost__run", 0.9)  # grade without a run
    (tmp_path / "grades" / "combined" / f"{good}~followup-1.json").write_bytes(b"[]")
    res = load_results(tmp_path)
    assert [r.run_id for r in res.runs] == ["unfinished__run", good] and res.stats["run_dirs"] == 3
    assert res.runs[0].meta["status"] == "unfinished" and res.stats["unfinished"] == 1
    joined = " | ".join(res.problems)
    assert "unreadable runs/broken__run/meta.json" in joined
    assert "grade for unknown run: grades/combined/ghost__run.json" in joined
    assert f"unreadable grades/combined/{good}~followup-1.json" in joined
    rep = build_report(tmp_path)
    assert sum("Problem reading results" in w for w in rep.warnings) == 3
    assert next(r for r in rep.table("leaderboard").rows if r["model"] == A)["score_mean"] == 0.5


def test_values_that_are_not_numbers_are_named_and_read_as_unknown(tmp_path: Path) -> None:
    """A hand-edited or foreign file whose numbers are not numbers (a score "high", a cost "abc",
    usage as text, fallbacks as a string) is named in the report's problems and its values are read
    as unknown — never a crash halfway through the report, never a 0. Each of these crashed it."""
    import orjson

    ok = add_run(tmp_path, model=A, seed=0, cost_usd=1.0)
    add_grade(
        tmp_path,
        "coverage",
        ok,
        0.5,
        by_cluster={"c": 0.5},
        items=[{"id": "F1", "score": 0.9, "strict": 0.8, "cluster": "c"}],
    )
    odd = add_run(tmp_path, model=A, seed=1)
    meta_path = tmp_path / "runs" / odd / "meta.json"
    meta = orjson.loads(meta_path.read_bytes())
    meta.update(cost_usd="abc", elapsed_s="5m", usage={"input_tokens": "10", "output_tokens": 5}, fallbacks="yes")
    meta_path.write_bytes(orjson.dumps(meta))
    add_grade(
        tmp_path,
        "coverage",
        odd,
        0.25,
        by_cluster={"c": "x"},
        cost_usd="free",
        items=[
            {"id": "F1", "score": "high", "strict": [1], "cluster": "c"},
            {"id": "F1", "score": 0.2, "strict": "0.7", "cluster": "c"},
            {"id": "F2", "score": 0.9, "strict": 0.8, "cluster": ["not", "a", "name"]},
        ],
    )
    for _ in range(2):  # the cache written by the first load says the same
        rep = build_report(tmp_path)
        problems = [w for w in rep.warnings if "Problem reading results" in w]
        assert any(
            f"runs/{odd}/meta.json: cost_usd, elapsed_s, usage, fallbacks not as benchctl writes" in w for w in problems
        ), problems
        assert any(f"grades/coverage/{odd}.json: 6 value(s) not as benchctl writes them" in w for w in problems), (
            problems
        )
        lb = rep.table("leaderboard").rows[0]
        assert lb["n_scored"] == 2 and lb["cost_mean_usd"] == 1.0 and lb["n_priced"] == 1  # "abc" is unknown, not 0
        assert lb["elapsed_mean_s"] == 500.0 and lb["fallback_runs"] == 0
        f1 = rep.table("findings").rows[0]
        # run 0's F1 (strict 0.8); run 1: one item unscored, one whose strict comes from its score 0.2
        assert (f1["n_scored"], f1["hit_rate"]) == (2, 0.5)
        assert rep.table("findings").rows[1]["cluster"] is None  # the list is no cluster name
        assert rep.table("clusters").rows[0]["c"] == 0.5  # "x" is not averaged in
        assert rep.provenance["grades_without_cost"] == 1


def test_follow_up_tag_from_layout_path(tmp_path: Path) -> None:
    rid = add_run(tmp_path, model=A)
    add_grade(tmp_path, "coverage", rid, 0.3)
    add_grade(tmp_path, "coverage", rid, 0.6, tag="followup-1")
    run = load_results(tmp_path).runs[0]
    assert run.score("coverage") == 0.3 and run.score("coverage", "followup-1") == 0.6


def test_unfinished_run_is_counted_and_listed_with_its_configuration(tmp_path: Path) -> None:
    """Three ways to know a killed run's configuration: its transcript's run_start spec, else a finished
    run of the same configuration, else the run id's parts; each lands in the right leaderboard row."""
    from benchctl.layout import make_run_id
    from benchctl.report.render_text import to_markdown

    done = add_run(tmp_path, model=A, seed=0)
    add_grade(tmp_path, "combined", done, 0.5)
    # (1) transcript: the runner's spec (RunSpec.to_dict() + task fields)
    rid1 = make_run_id("wiki", "react", A, "10m", 1)
    killed_run(
        tmp_path,
        rid1,
        {
            "run_id": rid1,
            "task": "wiki",
            "harness": "react",
            "model": A,
            "budget": "10m",
            "budget_s": 600.0,
            "seed": 1,
            "variant": None,
            "fallback": None,
            "options": {},
        },
    )
    # (2) killed before run_start, a finished twin exists: the exact model id comes from the twin
    rid2 = make_run_id("wiki", "react", A, "10m", 2)
    killed_run(tmp_path, rid2, None)
    # (3) no transcript event and no twin: the run id's parts (the model slug is all that is left)
    rid3 = make_run_id("wiki", "react", "prov/model-z", "2m", 0)
    killed_run(tmp_path, rid3, None)

    res = load_results(tmp_path)
    metas = {r.run_id: r.meta for r in res.runs}
    assert metas[rid1]["status"] == "unfinished" and metas[rid1]["derived_from"] == "transcript"
    assert metas[rid1]["cost_usd"] is None and metas[rid1]["artifacts"] == ["report.md"]
    assert (metas[rid2]["model"], metas[rid2]["seed"], metas[rid2]["derived_from"]) == (A, 2, "run id")
    assert (metas[rid3]["model"], metas[rid3]["budget"], metas[rid3]["budget_s"]) == ("prov-model-z", "2m", 120.0)

    rep = build_report(tmp_path)
    rows = {(r["model"], r["budget"]): r for r in rep.table("leaderboard").rows}
    a = rows[(A, "10m")]
    assert (a["n_runs"], a["n_scored"], a["unfinished"], a["score_mean"]) == (3, 1, 2, 0.5)  # counted, never averaged
    assert a["n_priced"] == 1  # an unfinished run's cost is unknown, not 0
    assert rows[("prov-model-z", "2m")]["unfinished"] == 1
    listed = {r["run_id"]: r for r in rep.table("unscored").rows}
    assert set(listed) == {rid1, rid2, rid3}
    assert all(r["status"] == "unfinished" and "no meta.json" in r["reason"] for r in listed.values())
    assert rep.provenance["unfinished_runs"] == 3 and rep.warnings == []  # no "several versions" from missing metas
    md = to_markdown(rep)
    assert "2 unfinished" in md and "runs: 4 (3 unfinished)" in md


def test_report_before_any_grade_says_so(tmp_path: Path) -> None:
    """No grades yet: no "`None` grade" / "no  score" wording, and the grading cost line is still there."""
    from benchctl.report.render_text import to_markdown

    add_run(tmp_path, model=A, seed=0)
    add_run(tmp_path, model=A, seed=1)
    md = to_markdown(build_report(tmp_path))
    assert "None" not in md and "no  " not in md
    assert "No grades yet" in md and "2 of 2 runs have no score (no grades yet)" in md
    assert "grading cost: $0.0000 (no grades yet)" in md


def test_free_grading_cost_is_shown_in_human_formats(tmp_path: Path) -> None:
    """A judge that cost $0 (scripted, or a free model): provenance promises the grading cost, so
    the terminal, markdown and HTML outputs show it rather than dropping the line."""
    import io

    from rich.console import Console

    from benchctl.report.html import to_html
    from benchctl.report.render_terminal import print_report
    from benchctl.report.render_text import to_markdown

    rid = add_run(tmp_path, model=A)
    add_grade(tmp_path, "combined", rid, 0.5, cost_usd=0.0)
    rep = build_report(tmp_path)
    buf = io.StringIO()
    print_report(rep, Console(file=buf, width=200, no_color=True))
    for text in (buf.getvalue(), to_markdown(rep), to_html(rep)):
        assert "grading cost: $0.0000" in text
