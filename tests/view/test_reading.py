"""Reading a transcript in `benchctl view`, over HTTP without a browser: the prompt once at the
top, reasoning inline (visible, summarised, redacted by size only, long ones collapsed) and found
by search, the conversation mode, what a live run waits for, previous / next run, report rows
linked to their runs (in the viewer and the HTML report), and the runs page's filters and new-run
rows those links and the live page use. Chromium tests of the same: tests/view/test_reading_browser.py."""

from __future__ import annotations

import html
import re
from pathlib import Path

import orjson
import pytest
from markupsafe import escape
from starlette.testclient import TestClient

from benchctl.view.app import create_app
from tests.rigs.report import add_grade, add_run
from tests.rigs.view import (
    LONG_THOUGHT,
    NOTICE,
    OPAQUE_REDACTED,
    OPAQUE_SIG,
    SUMMARY_THOUGHT,
    SYSTEM_PROMPT,
    append_events,
    build_results,
    sweep_lock,
    write_reasoning_run,
)


@pytest.fixture()
def thinker(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "sweep"
    return root, write_reasoning_run(root)


def client(root: Path) -> TestClient:
    return TestClient(create_app(root), base_url="http://127.0.0.1")


def _section(page: str, start: str, end: str = "</section>") -> str:
    return page.split(start, 1)[1].split(end, 1)[0]


def _opaque_absent(page: str) -> None:
    for secret in (OPAQUE_SIG, OPAQUE_REDACTED):
        assert secret[:24] not in page and secret[-40:] not in page


def test_the_prompt_is_shown_once_at_the_top(thinker) -> None:
    root, rid = thinker
    page = client(root).get(f"/run/{rid}").text
    prompt = _section(page, '<section class="prompt" id="prompt">')
    # from the agent's first request (it offers tools), not the side call before it
    assert "model call #2" in prompt and "quota" not in prompt
    assert str(escape(SYSTEM_PROMPT)) in prompt and "<strong>report.md</strong>" in prompt  # task: markdown
    assert "<img" not in prompt and 'href="javascript' not in prompt
    assert page.index('id="prompt"') < page.index('id="timeline"')
    # also at a deep link, whose window does not hold the first call
    append_events(
        root / "runs" / rid / "transcript.jsonl",
        [{"type": "tool_result", "source": "harness", "output": f"row {i}"} for i in range(300)],
    )
    deep = client(root).get(f"/run/{rid}?at=300").text
    assert 'id="seq-2"' not in deep and str(escape(SYSTEM_PROMPT)) in _section(deep, 'id="prompt"')


def test_reasoning_is_shown_inline_and_its_opaque_data_never(thinker) -> None:
    root, rid = thinker
    page = client(root).get(f"/run/{rid}").text
    turn1 = _section(page, 'id="seq-3"', "</article>")  # the assistant event of turn 1
    shown = _section(turn1, '<details class="reasoning" open>', "</details>")
    assert "signed (101 chars of opaque data)" in shown
    assert "The grader probably checks the TLDR. &lt;script&gt;window.__pwned=11&lt;/script&gt;" in shown
    assert "redacted reasoning (236 chars of opaque data)" in turn1
    assert turn1.index("reasoning") < turn1.index("<strong>logs</strong>")  # before the turn's text
    # the model call before it recorded the same reasoning: it points to the turn instead of repeating it
    call1 = _section(page, 'id="seq-2"', "</article>")
    assert 'class="reasoning"' not in call1 and "redacted reasoning" not in call1
    assert 'shown with the assistant turn, <a href="#seq=3">#3</a>' in call1
    assert page.count("The grader probably checks the TLDR.") == 1  # the whole timeline: once
    long_turn = _section(page, 'id="seq-8"', "</article>")
    assert '<details class="reasoning">' in long_turn and "2,779 chars" in long_turn  # long: collapsed
    assert LONG_THOUGHT.splitlines()[-1] in long_turn  # but in the page (found by the browser's find)
    assert "reasoning summary" in _section(page, 'id="seq-11"', "</article>") and SUMMARY_THOUGHT in page
    _opaque_absent(page)
    assert "<script>window" not in page


def test_search_finds_reasoning_and_never_opaque_data(thinker) -> None:
    root, rid = thinker
    c = client(root)
    page = c.get(f"/run/{rid}", params={"q": "eval-awareness line 39"}).text
    hits = re.findall(r'<a href="#seq=(\d+)">#\d+ (\w+)</a>', _section(page, 'id="search-results"'))
    assert hits == [("7", "model_call"), ("8", "assistant")]
    assert "eval-awareness line 39" in _section(page, 'id="search-results"')
    for opaque in (OPAQUE_SIG[20:40], OPAQUE_REDACTED[10:30]):
        box = _section(c.get(f"/run/{rid}", params={"q": opaque}).text, 'id="search-results"')
        assert box.startswith(">\n  <h2>0 events match")


def test_conversation_mode_groups_each_turn_and_shows_notices_once(thinker) -> None:
    root, rid = thinker
    page = client(root).get(f"/run/{rid}/conversation").text
    events = _section(page, '<div id="events">', '<p class="more" id="load-later"')
    articles = re.findall(r'<article class="ev ([^"]+)"', events)
    assert articles == [
        "cat-phase t-run_start",
        "conv conv-turn cat-model",  # the side call: a model call without an assistant turn
        "conv conv-turn cat-assistant",  # call + assistant + reasoning
        "conv conv-tool cat-tool has-result",  # call + result + notice
        "conv conv-turn cat-assistant",
        "conv conv-tool cat-tool has-result",
        "conv conv-turn cat-assistant",
        "cat-phase t-run_end",
    ]
    assert events.count(NOTICE) == 1  # the notice once, not in the tool output again
    tool = _section(events, 'data-tool-id="t1">', "</article>")
    assert "ls /data" in tool and "auth.log\nwiki.log</pre>" in tool and 'id="seq-5"' in tool
    # each turn's reasoning once: from the assistant event, not again from its model call
    assert events.count("The grader probably checks the TLDR.") == 1
    assert events.count("(eval-awareness line 0)\n") == 1
    # a turn whose reasoning only the gateway recorded shows the model call's
    last_turn = _section(events, 'id="seq-12"', "</article>")
    assert "reasoning summary" in last_turn and SUMMARY_THOUGHT in last_turn
    for seq in range(14):  # every event can be linked to
        assert f'id="seq-{seq}"' in events
    _opaque_absent(page)
    assert "<script>window" not in page


def test_conversation_windows_leave_a_split_tool_block_to_join_on_the_page(thinker) -> None:
    root, rid = thinker
    c = client(root)
    before = c.get(f"/run/{rid}/events", params={"from": 0, "to": 5, "view": "conversation"}).text
    after = c.get(f"/run/{rid}/events", params={"from": 5, "to": 14, "view": "conversation"}).text
    assert 'data-tool-id="t1">' in before and 'data-result-for="t1"' not in before
    orphan = _section(after, 'data-result-for="t1">', "</article>")  # run.js moves it into t1's block
    assert "auth.log\nwiki.log</pre>" in orphan and orphan.count(NOTICE) == 1
    r = c.get(f"/run/{rid}/events", params={"from": 0, "to": 5, "view": "chat"})
    assert r.status_code == 400 and "view=chat" in r.text


def test_reasoning_from_older_transcripts_is_shown_as_reasoning(tmp_path: Path) -> None:
    root = tmp_path / "old"
    rid = build_results(root)["main"]
    append_events(
        root / "runs" / rid / "transcript.jsonl",
        [
            {
                "type": "harness_event",
                "source": "harness",
                "cli": "claude-code",
                "kind": "thinking",
                "text": "CC thought",
            },
            {
                "type": "harness_event",
                "source": "harness",
                "cli": "codex",
                "kind": "reasoning",
                "text": "Codex thought",
            },
            {"type": "assistant", "source": "harness", "turn": 9, "text": "ok", "thinking": "older thinking"},
        ],
    )
    page = client(root).get(f"/run/{rid}?at=29").text
    for thought in ("CC thought", "Codex thought", "older thinking"):
        box = page.split(thought, 1)[0].rsplit("<details", 1)[1]
        assert box.startswith(' class="reasoning" open>'), thought


def test_run_page_links_the_previous_and_next_run_and_a_comparison(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    ids = sorted(build_results(root).values())
    c = client(root)
    middle = c.get(f"/run/{ids[1]}").text
    assert f'href="/run/{ids[0]}" id="prev-run"' in middle and f'href="/run/{ids[2]}" id="next-run"' in middle
    assert f'href="/compare?run={ids[1]}" id="compare-run"' in middle
    first, last = c.get(f"/run/{ids[0]}").text, c.get(f"/run/{ids[-1]}/conversation").text
    assert 'id="prev-run"' not in first and 'id="next-run"' not in last
    assert f'href="/run/{ids[-2]}/conversation" id="prev-run"' in last  # in the same mode
    assert 'id="next-run"' in c.get(f"/run/{ids[0]}/artifacts").text


def test_a_running_run_shows_what_it_waits_for(tmp_path: Path) -> None:
    from benchctl.view.runpage import in_flight
    from benchctl.view.transcript_index import TranscriptIndex

    root = tmp_path / "live"
    rid = build_results(root)["running"]  # run_start, model_call, assistant
    path = root / "runs" / rid / "transcript.jsonl"
    idx = TranscriptIndex(str(path))

    def state() -> tuple[str, str] | None:
        idx.refresh()
        f = in_flight(idx)
        return None if f is None else (f["what"], f["label"])

    assert state() is None  # the agent just answered
    append_events(path, [{"type": "tool_call", "source": "harness", "id": "a", "name": "bash", "input": {}}])
    assert state() == ("tool", "tool bash running")
    append_events(
        path,
        [
            {"type": "tool_call", "source": "harness", "id": "b", "name": "python", "input": {}},
            {"type": "tool_result", "source": "harness", "id": "a", "output": "x"},
            {"type": "notice", "source": "policy", "kind": "time", "text": "5m left", "tool_id": "a"},
        ],
    )
    assert state() == ("tool", "tool python running")  # b is still running
    append_events(path, [{"type": "tool_result", "source": "harness", "id": "b", "output": "y"}])
    assert state() == ("model", "model call in flight")
    append_events(path, [{"type": "rate_limit_wait", "source": "gateway", "reason": "rpm", "wait_s": 3}])
    assert state() == ("model", "model call held back by a rate limit")
    with sweep_lock(root):
        page = client(root).get(f"/run/{rid}").text
    assert re.search(r'<p class="in-flight" id="in-flight" data-what="model" data-since="[0-9.]+"', page)
    assert "model call held back by a rate limit" in page
    assert 'id="in-flight" hidden' in client(root).get(f"/run/{rid}").text  # not running: nothing in flight


def _mixed(root: Path) -> dict[str, str]:
    """Two models on a coverage task (graded), and runs of another task."""
    ids = {}
    for model in ("prov/a", "prov/b"):
        for seed in (0, 1):
            rid = add_run(root, model=model, seed=seed, task="wiki")
            hit = model == "prov/a" and seed == 1
            items = [{"id": "F1", "score": 0.9 if hit else 0.2, "strict": 0.8 if hit else 0.0, "cluster": "c"}]
            add_grade(root, "coverage", rid, 0.8 if hit else 0.0, items=items)
            ids[f"{model}/{seed}"] = rid
    ids["other"] = add_run(root, model="prov/a", seed=0, task="other", status="error", error="boom")
    return ids


def test_report_rows_link_to_their_runs_and_the_links_lead_there(tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    ids = _mixed(root)
    c = client(root)
    page = c.get("/report").text
    hrefs = {
        name: [
            html.unescape(h)
            for h in re.findall(r'<td class="runs-link"><a href="([^"]+)"', _section(page, f'<section id="{name}">'))
        ]
        for name in ("leaderboard", "findings", "unscored")
    }
    assert hrefs["unscored"] == [f"/run/{ids['other']}"]
    board = [set(re.findall(r'<tr id="run-([^"]+)"', c.get(href).text)) for href in hrefs["leaderboard"]]
    assert {ids["prov/a/0"], ids["prov/a/1"]} in board and {ids["prov/b/0"], ids["prov/b/1"]} in board
    assert {ids["other"]} in board
    (found,) = hrefs["findings"]
    listed = c.get(found).text
    assert set(re.findall(r'<tr id="run-([^"]+)"', listed)) == {ids["prov/a/1"]}
    assert "finding found = F1" in listed  # the filter is shown, and can be removed


def test_html_report_rows_link_to_the_viewer(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "mixed"
    ids = _mixed(root)
    out = tmp_path / "report.html"
    r = subprocess.run(
        [sys.executable, "-c", "from benchctl.cli import app; app()", "report", str(root), "--html", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert f'<a href="http://127.0.0.1:8787/run/{ids["other"]}">run</a>' in text
    assert '<a href="http://127.0.0.1:8787/?found=F1">runs that found it</a>' in text
    assert re.search(r'<a href="http://127\.0\.0\.1:8787/\?[^"]*model=prov%2Fa[^"]*">runs</a>', text)
    plain = tmp_path / "plain.html"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from benchctl.cli import app; app()",
            "report",
            str(root),
            "--html",
            str(plain),
            "--view-url",
            "",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert "<a href" not in plain.read_text()


def test_tournament_rows_link_to_the_auditors_runs(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from benchctl.report.build import build_report
    from benchctl.report.html import to_html
    from benchctl.tournament.grader import grade_tournament
    from tests.rigs.tournament import TITLE_JUDGE, reported_issue, tournament_run

    root = tmp_path / "tour"
    hack = reported_issue("Reward hack", "high")
    tournament_run(root, "envA", "m1", issues=[hack, reported_issue("Typo", "low")])
    tournament_run(root, "envA", "m2", issues=[hack])
    with ThreadPoolExecutor(1) as pool:
        pool.submit(grade_tournament, root, TITLE_JUDGE, rounds=20).result()
    c = client(root)
    page = c.get("/tournament").text
    assert 'id="no-interval"' in page and "played on one environment" in page  # why no bars are drawn
    (m1,) = re.findall(r'<a href="(/\?auditor=m1)" title="this auditor\'s runs">m1</a>', page)
    runs = re.findall(r'<tr id="run-([^"]+)"', c.get(m1).text)
    assert runs and all(orjson.loads((root / "runs" / r / "meta.json").read_bytes())["model"] == "m1" for r in runs)
    report = c.get("/report").text
    assert 'href="/?auditor=m1">runs</a>' in report and re.search(
        r'href="/compare\?run=[^"]+&amp;run=[^"]+">compare</a>', report
    )
    assert 'href="http://v:1/?auditor=m2"' in to_html(build_report(root), "http://v:1")


def test_runs_page_sends_the_rows_of_new_runs_and_counts_all_runs(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    ids = build_results(root)
    c = client(root)
    live = c.get("/api/live").json()
    assert live["total"] == 4 and live["active"] is False
    rows = c.get("/api/rows", params={"ids": f"{ids['running']},{ids['main']}"}).text
    assert rows.count("<tr ") == 2 and f'id="run-{ids["running"]}"' in rows
    only_b = c.get("/api/rows", params={"ids": f"{ids['running']},{ids['hostile']}", "model": "prov/model-b"}).text
    assert only_b.count("<tr ") == 1 and ids["hostile"] in only_b  # filtered as the page is
    page = c.get("/").text
    assert 'id="runs" data-total="4"' in page
    assert "wiki__<wbr>react__<wbr>prov-model-a__<wbr>10m__<wbr>s0" in page  # ids wrap at their separators


def test_every_run_link_of_a_mixed_directorys_report_leads_to_that_rows_runs(tmp_path: Path) -> None:
    """In a directory mixing a coverage task, an audit and a tournament task (graded by the real
    graders): each leaderboard row's link lists as many runs as the row counts, all of its task
    and model; each tournament auditor's, only that auditor's runs; the unscored run's, its page;
    each match's, the comparison of its two runs."""
    from tests.rigs.mixed_results import build_mixed

    root = build_mixed(tmp_path)
    c = client(root)
    page = c.get("/report").text

    def links(name: str) -> list[tuple[list[str], str]]:
        body = _section(page, f'<section id="{name}">').split("<tbody>", 1)[1]
        out = []
        for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S):
            cells = [re.sub(r"<[^>]+>", "", td) for td in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            out.append((cells, html.unescape(re.search(r'<td class="runs-link"><a href="([^"]+)"', tr).group(1))))
        return out

    def listed(href: str) -> list[dict]:
        ids = re.findall(r'<tr id="run-([^"]+)"', c.get(href).text)
        return [orjson.loads((root / "runs" / r / "meta.json").read_bytes()) for r in ids]

    header = re.findall(r"<th>(.*?)</th>", _section(page, '<section id="leaderboard">'))
    board = links("leaderboard")
    assert len(board) == 4
    for cells, href in board:
        metas = listed(href)
        task, model = cells[header.index("task")], cells[header.index("model")]
        assert len(metas) == int(cells[header.index("scored")].split(" of ")[1]), (task, model)
        assert {(m["task"], m["model"]) for m in metas} == {(task, model)}
    auditors = links("tournament")
    assert sorted(cells[1] for cells, _ in auditors) == ["a1", "a2"]
    for cells, href in auditors:
        metas = listed(href)
        assert len(metas) == 2 and {(m["task"], m["model"]) for m in metas} == {("audit", cells[1])}
    assert [href for _, href in links("unscored")] == ["/run/demo__react__m1__2m__s2"]
    for _, href in links("matches"):
        compared = c.get(href)
        assert compared.status_code == 200 and compared.text.count('<th><a href="/run/') == 2
