"""What a grade was judged against, on the artifacts page: each finding's rubric text beside its
score, the TLDR's and the predictions' expected text. Graded by the real graders (fake judge);
older grade records (without the text) fall back to the task's rubric only when its hash is the
grade's, and the text is escaped like everything else."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import orjson
import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from benchctl.view.app import create_app
from tests.rigs.view import FINDINGS, GROUND_TRUTH, build_graded, write_task

REF_TLDR = "svc-backup was brute-forced from 203.0.113.77, made itself admin and exported 42 pages."


@pytest.fixture()
def graded(tmp_path: Path) -> tuple[Path, Path, str]:
    return build_graded(tmp_path)


def page(results: Path, run_id: str) -> str:
    return TestClient(create_app(results), base_url="http://127.0.0.1").get(f"/run/{run_id}/artifacts").text


def rows(html_text: str) -> dict[str, str]:
    """The coverage table's rows by finding id (the row's HTML)."""
    out = {}
    for row in re.findall(r'<tr class="item[^"]*"[^>]*>(.*?)</tr>', html_text, re.DOTALL):
        m = re.search(r'<b class="fid">([^<]+)</b>', row)
        if m:
            out[m.group(1)] = row
    return out


def strip_rubric_text(results: Path, run_id: str) -> None:
    """Make the run's records look like those written before graders recorded the rubric text."""
    for grader in ("coverage", "tldr", "any_of_n"):
        path = results / "grades" / grader / f"{run_id}.json"
        rec = orjson.loads(path.read_bytes())
        rec.pop("expected", None)
        for it in rec["items"]:
            it.pop("text", None)
        path.write_bytes(orjson.dumps(rec))


def test_grade_records_carry_the_rubric_text(graded) -> None:
    results, _, rid = graded
    cov = orjson.loads((results / "grades" / "coverage" / f"{rid}.json").read_bytes())
    assert {it["id"]: it["text"] for it in cov["items"]} == {f["id"]: f["text"] for f in FINDINGS}
    assert orjson.loads((results / "grades" / "tldr" / f"{rid}.json").read_bytes())["expected"].startswith(
        REF_TLDR + "\n\n<img"
    )
    assert orjson.loads((results / "grades" / "any_of_n" / f"{rid}.json").read_bytes())["expected"] == GROUND_TRUTH


def test_each_finding_shows_its_text_beside_its_score_escaped(graded) -> None:
    results, task, rid = graded
    shutil.rmtree(task)  # the task has moved: the grade record alone is enough
    text = page(results, rid)
    by_id = rows(text)
    assert sorted(by_id) == ["F1", "F2", "F3", "F4"]
    cov = orjson.loads((results / "grades" / "coverage" / f"{rid}.json").read_bytes())
    for it, f in zip(cov["items"], FINDINGS):
        row = by_id[f["id"]]  # the text sits in the same row as the judge's score
        assert f'<span class="ftext">{escape(f["text"])}</span>' in row
        assert f'<td class="num">{it["score"]:.3f}</td>' in row
    assert '<td class="num">2.0</td>' in by_id["F2"]  # a weighted rubric shows each finding's weight
    assert "&lt;script&gt;window.__pwned = 7&lt;/script&gt;" in by_id["F4"]
    assert "<script>window" not in text and "<img src=x" not in text
    assert not re.search(r'(href|src|action)\s*=\s*"(?![/#?])', text)  # no link or resource but the server's own
    assert "&lt;img src=x onerror=&quot;window.__pwned = 9&quot;&gt;" in text  # the reference's markup, as text
    assert f'<div class="md expected-text"><p>{REF_TLDR}</p>' in text
    assert f'<div class="md expected-text"><p>{GROUND_TRUTH}</p>\n</div>' in text
    assert "rubric text not available" not in text and "rubric-src" not in text


def test_old_records_take_the_text_from_the_task_when_its_rubric_hash_matches(graded) -> None:
    results, task, rid = graded
    strip_rubric_text(results, rid)
    text = page(results, rid)
    assert text.count("(same rubric hash as this grade)") == 3  # coverage, tldr, any_of_n
    assert str(task / "task.toml") in text
    by_id = rows(text)
    for f in FINDINGS:
        assert f'<span class="ftext">{escape(f["text"])}</span>' in by_id[f["id"]]
    assert f'<div class="md expected-text"><p>{REF_TLDR}</p>' in text
    assert f'<div class="md expected-text"><p>{GROUND_TRUTH}</p>\n</div>' in text
    assert "<script>window" not in text


def test_a_changed_rubric_never_lends_its_text_to_an_old_grade(graded) -> None:
    results, task, rid = graded
    strip_rubric_text(results, rid)
    edited = [dict(f, text=f"EDITED {f['text']}") for f in FINDINGS]
    write_task(task, edited)  # same ids, new texts: the rubric hash changes
    text = page(results, rid)
    assert text.count("rubric text not available: the task&#39;s rubric has changed since this grade") == 1
    assert "EDITED" not in text and 'class="ftext"' not in text
    by_id = rows(text)
    assert sorted(by_id) == ["F1", "F2", "F3", "F4"]  # the ids alone
    # tldr and any_of_n rubrics did not change: their expected texts still show
    assert f'<div class="md expected-text"><p>{REF_TLDR}</p>' in text


def test_old_records_of_a_task_that_is_gone_say_the_text_is_not_available(graded) -> None:
    results, task, rid = graded
    strip_rubric_text(results, rid)
    shutil.rmtree(task)
    text = page(results, rid)
    assert text.count("rubric text not available: the task could not be read") == 3
    assert 'class="ftext"' not in text and "expected-text" not in text
    assert sorted(rows(text)) == ["F1", "F2", "F3", "F4"]


def test_compare_names_each_finding_by_its_text(graded) -> None:
    results, task, rid = graded
    strip_rubric_text(results, rid)  # an old record: the text comes from the task (same hash)
    text = TestClient(create_app(results), base_url="http://127.0.0.1").get(f"/compare?run={rid}&run={rid}").text
    assert "<h2>Findings (strict coverage)</h2>" in text
    for f in FINDINGS:
        assert f"<td>{f['id']}</td><td>{escape(f['text'])}</td>" in text
    assert "<script>window" not in text
