"""`benchctl view` in a real headless Chromium: every page loads without console errors and shows
what it should, the timeline's controls work, a run in progress is followed live as lines are
appended to its transcript, judge quotes are highlighted in the report, and hostile agent text
neither runs nor loads anything. Screenshots go to $BENCHCTL_TEST_ARTIFACTS.

Waits use locators and `expect`, not `wait_for_function`: the pages' Content-Security-Policy
forbids eval, which playwright's string predicates need."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
from playwright.sync_api import expect

from tests.rigs.browser import browser, open_page, screenshot  # noqa: F401  (fixture + helpers)
from tests.rigs.view import (
    FINDINGS,
    GROUND_TRUTH,
    HOSTILE_EVENT_TEXT,
    append_events,
    build_graded,
    build_results,
    indexing_paused,
    serve,
    sweep_lock,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("view") / "sweep"
    ids = build_results(root)
    # a longer transcript: 1,000 more events, so deep links leave the first window
    append_events(
        root / "runs" / ids["seed1"] / "transcript.jsonl",
        [{"type": "tool_result", "source": "harness", "name": "bash", "output": f"row {i}"} for i in range(1000)],
    )
    with serve(root) as base:
        yield base, ids, root


def _no_errors(errors: list[str]) -> None:
    assert errors == [], errors


def test_sweep_page_lists_filters_and_picks_two_runs_to_compare(browser, site) -> None:
    base, ids, _ = site
    page, errors = open_page(browser, base + "/")
    assert page.locator("table.runs tbody tr").count() == 4
    assert page.locator('[data-count="completed"]').inner_text() == "3"
    screenshot(page, "view-sweep")
    page.click("a.chip.st-completed")
    page.wait_for_url("**status=completed**")
    assert page.locator("table.runs tbody tr").count() == 3
    page.check(f'input[value="{ids["main"]}"]')
    page.check(f'input[value="{ids["seed1"]}"]')
    page.click("#compare-btn")
    page.wait_for_url("**/compare?**")
    assert f"A: {ids['main']}" in page.inner_text("table.compare") and f"B: {ids['seed1']}" in page.inner_text(
        "table.compare"
    )
    screenshot(page, "view-compare")
    _no_errors(errors)


def test_run_page_timeline_controls(browser, site) -> None:
    base, ids, _ = site
    page, errors = open_page(browser, f"{base}/run/{ids['main']}")
    assert page.locator("#seq-2 .md strong").inner_text() == "grep"  # markdown rendered
    clip = page.locator("#seq-9 .clip")
    assert "show all 60 lines" in clip.inner_text()
    page.click("#seq-9 .expand")
    assert "open" in (clip.get_attribute("class") or "")
    # off screen, so not laid out yet (content-visibility): its text, not its innerText
    expect(page.locator("#seq-20 .head")).to_have_text("fallback: prov/model-a → prov/fallback-model (refusal)")
    assert page.locator("svg rect.cat-assistant").count() >= 4  # the minimap
    page.uncheck('input[data-lane="model"]')
    assert not page.locator("#seq-1").is_visible() and page.locator("#seq-2").is_visible()
    page.check('input[data-lane="model"]')
    page.click('.phases a:text("follow-up 1")')  # phases are separated and linked
    page.wait_for_url("**#seq=26")
    expect(page.locator("#seq-26")).to_have_class(re.compile(r"\btarget\b"))
    screenshot(page, "view-run")
    page.fill('input[name="q"]', "flaxseed")
    page.press('input[name="q"]', "Enter")
    page.wait_for_selector("#search-results")
    page.click('#search-results a[href="#seq=23"]')
    expect(page.locator("#seq-23")).to_have_class(re.compile(r"\btarget\b"))
    _no_errors(errors)


def test_deep_link_outside_the_window_and_loading_on_scroll(browser, site) -> None:
    base, ids, _ = site
    page, errors = open_page(browser, f"{base}/run/{ids['seed1']}#seq=700")
    page.wait_for_selector("#seq-700.target")  # the page asked for the window around it
    assert "at=700" in page.url
    # the window starts 20 events before the target: the earlier ones load as they come near, no click
    page.wait_for_selector("#seq-679", state="attached")
    assert page.locator("button").count() == 1  # the search button: nothing to click to read on
    total = int(page.locator("#timeline").get_attribute("data-total"))
    for _ in range(20):  # the reader scrolls down to the end
        page.keyboard.press("End")
        if page.locator(f"#seq-{total - 1}").count():
            break
        page.wait_for_timeout(150)
    page.wait_for_selector(f"#seq-{total - 1}", state="attached")
    seqs = [int(s) for s in page.locator("#events article").evaluate_all("els => els.map(e => e.dataset.seq)")]
    assert seqs == list(range(480, total))  # 480 .. the end, in order, nothing twice
    expect(page.locator("#load-later")).to_be_hidden()
    page.goto(f"{base}/run/{ids['seed1']}?at=5000#seq=5000")  # no such event: said, no reload loop
    page.wait_for_selector("#missing-seq:not([hidden])")
    _no_errors(errors)


def test_events_loaded_above_keep_the_reader_in_place(browser, site) -> None:
    base, ids, _ = site
    page, errors = open_page(browser, f"{base}/run/{ids['seed1']}?at=700")  # the window 680..879, at its top
    y = page.locator("#seq-680").bounding_box()["y"]
    page.wait_for_selector("#seq-679", state="attached")  # 480..679 loaded above it
    expect(page.locator("#load-earlier")).to_have_text("480 earlier events: scroll up to load them")
    assert abs(page.locator("#seq-680").bounding_box()["y"] - y) < 2  # what the reader saw did not move
    _no_errors(errors)


def test_artifacts_page_highlights_the_judges_quotes(browser, site) -> None:
    base, ids, _ = site
    page, errors = open_page(browser, f"{base}/run/{ids['main']}/artifacts")
    marks = page.locator('mark.quote-hl[data-for="art-1-F1"]')
    assert " ".join(marks.all_inner_texts()) in (
        "brute-forced  the account svc-backup",
        "brute-forced the account svc-backup",
    )
    assert "brute-forced" in marks.first.inner_text()  # found across the bold span
    assert page.locator('mark.quote-hl[data-for="art-1-tldr"]').count() >= 1  # the graded TLDR
    assert "quote-missing" in (page.locator('tr[data-id="art-1-F3"]').get_attribute("class") or "")
    page.click('tr[data-id="art-1-F2"]')
    assert page.locator("mark.quote-hl.on").inner_text() == "granted itself the admin role"
    assert page.locator("#art-2 > h2").inner_text().startswith("report.followup-1.md")
    assert page.locator("#art-2 .grade.g-coverage").count() == 1
    screenshot(page, "view-artifacts")
    _no_errors(errors)


def test_each_finding_shows_its_rubric_text_beside_the_judges_score(browser, tmp_path: Path) -> None:
    with ThreadPoolExecutor(1) as pool:  # its own thread: playwright's sync API keeps an event loop in this one
        results, _, rid = pool.submit(build_graded, tmp_path).result()
    scores = {
        it["id"]: it["score"]
        for it in orjson.loads((results / "grades" / "coverage" / f"{rid}.json").read_bytes())["items"]
    }
    with serve(results) as base:
        page, errors = open_page(browser, f"{base}/run/{rid}/artifacts")
        table = page.locator(".grade.g-coverage table.items")
        assert table.locator("thead th").all_inner_texts() == [
            "finding",
            "cluster",
            "weight",
            "s",
            "strict",
            "reason and quote",
        ]
        for f in FINDINGS:
            cells = table.locator("tr.item", has=page.locator("b.fid", has_text=f["id"])).locator("td")
            assert cells.nth(0).inner_text() == f"{f['id']} {f['text']}"  # markup in a finding shows as text
            assert cells.nth(2).inner_text() == str(float(f.get("weight", 1)))
            assert cells.nth(3).inner_text() == f"{scores[f['id']]:.3f}"
            box, score_box = cells.nth(0).bounding_box(), cells.nth(3).bounding_box()
            assert abs(box["y"] - score_box["y"]) < 1 and box["x"] < score_box["x"]  # one row: text, then score
        assert page.locator(".grade.g-tldr div.expected-text").inner_text().startswith("svc-backup was brute-forced")
        assert page.locator(".grade.g-any_of_n div.expected-text").inner_text() == GROUND_TRUTH
        assert (
            page.evaluate("window.__pwned") is None
            and page.locator(".grades img, .grades a[href^='javascript:']").count() == 0
        )
        screenshot(page, "view-artifacts-rubric")
        _no_errors(errors)


def test_hostile_text_never_runs_or_loads_anything(browser, site) -> None:
    base, ids, _ = site
    for path in (
        f"/run/{ids['hostile']}/artifacts",
        f"/run/{ids['hostile']}",
        f"/run/{ids['hostile']}/conversation",
        f"/compare?run={ids['hostile']}&run={ids['main']}",
    ):
        page = browser.new_context().new_page()
        requests: list[str] = []
        dialogs: list[str] = []
        errors: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        resp = page.goto(base + path)
        assert "script-src 'self'" in resp.headers["content-security-policy"]
        page.wait_for_timeout(300)
        assert page.evaluate("window.__pwned") is None and dialogs == []
        assert all(u.startswith(base + "/") for u in requests), requests
        assert page.locator('a[href^="javascript:"], img, iframe').count() == 0
        assert page.locator("a[href^='http']").count() == 0
        assert "window.__pwned" in page.inner_text("main")  # shown as text, not run
        assert errors == [], errors
        # and were anything to slip through escaping, the CSP would still stop it running
        ran = page.evaluate("""() => { const s = document.createElement('script');
            s.textContent = 'window.__csp_test = 1'; document.body.appendChild(s); return window.__csp_test; }""")
        assert ran is None
        screenshot(page, "view-hostile-" + path.split("/")[-1].split("?")[0])


def test_tournament_and_report_pages(browser, tmp_path: Path) -> None:
    from benchctl.tournament.grader import grade_tournament
    from tests.rigs.tournament import TITLE_JUDGE, reported_issue, tournament_run

    root = tmp_path / "tour"
    hack, typo = reported_issue("Reward hack", "high"), reported_issue("Typo in prompt", "low")
    tournament_run(root, "envA", "m1", issues=[hack, typo])
    tournament_run(root, "envA", "m2", issues=[hack])
    tournament_run(root, "envB", "m1", issues=[reported_issue("Leaky answer file", "high")])
    tournament_run(
        root, "envB", "m2", issues=[reported_issue("Leaky answer file", "high"), reported_issue("Slow reset", "medium")]
    )
    with ThreadPoolExecutor(1) as pool:  # its own thread: playwright's sync API keeps an event loop in this one
        pool.submit(grade_tournament, root, TITLE_JUDGE, rounds=50).result()
    ratings = orjson.loads((root / "grades" / "tournament" / "ratings.json").read_bytes())
    with serve(root) as base:
        page, errors = open_page(browser, base + "/tournament")
        board = page.locator("h2#leaderboard + table tbody tr")
        assert board.count() == 2
        top = ratings["leaderboard"][0]
        assert top["auditor"] in board.first.inner_text() and f"{top['elo']:.0f}" in board.first.inner_text()
        assert page.locator("svg.ci circle").count() == 2  # interval bars
        assert page.locator("table.matrix td.h5, table.matrix td.h10, table.matrix td[class^=h]").count() >= 2
        env_a = page.locator("section.env", has_text="envA")
        assert "Typo in prompt" in env_a.inner_text() and "m1" in env_a.locator("tr", has_text="Typo").inner_text()
        env_a.locator("summary").click()
        assert env_a.locator("a", has_text="compare").count() == 1
        screenshot(page, "view-tournament")
        page.click("text=report tables")
        page.wait_for_url("**/report")
        assert page.locator("section#tournament, section#leaderboard").count() >= 1
        _no_errors(errors)


def test_live_run_is_followed_as_its_transcript_grows(browser, tmp_path: Path) -> None:
    root = tmp_path / "live"
    ids = build_results(root)
    rid = ids["running"]
    path = root / "runs" / rid / "transcript.jsonl"
    with sweep_lock(root), serve(root) as base:
        sweep, sweep_errors = open_page(browser, base + "/")
        assert sweep.locator(f'tr[data-live="{rid}"] [data-f="turns"]').inner_text() == "1"
        page, errors = open_page(browser, f"{base}/run/{rid}")
        assert page.locator("#live-note").is_visible()
        assert page.locator("#events article").count() == 3
        append_events(
            path,
            [
                {
                    "type": "model_call",
                    "source": "gateway",
                    "call_id": "call-2",
                    "served_model": "prov/model-c",
                    "status": 200,
                    "latency_ms": 7.0,
                    "usage": {"input_tokens": 400, "output_tokens": 30},
                    "cost_usd": 0.25,
                },
                {"type": "assistant", "source": "harness", "turn": 2, "text": "Now I *look* at auth.log."},
                {
                    "type": "tool_call",
                    "source": "harness",
                    "id": "t2",
                    "name": "bash",
                    "input": {"command": "tail /data/auth.log"},
                },
            ],
        )
        page.wait_for_selector("#seq-5", timeout=15_000)  # appended without a reload
        assert page.locator("#seq-4 .md em").inner_text() == "look"
        expect(page.locator('#facts [data-f="turns"]')).to_have_text("2")
        assert page.locator('#facts [data-f="cost"]').inner_text() == "$0.7500"
        expect(sweep.locator(f'tr[data-live="{rid}"] [data-f="turns"]')).to_have_text("2", timeout=15_000)
        append_events(path, [{"type": "assistant", "source": "harness", "turn": 3, "text": HOSTILE_EVENT_TEXT}])
        page.wait_for_selector("#seq-6")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#run-status").inner_text() == "running"  # the forged "end" did nothing
        screenshot(page, "view-live")
        append_events(path, [{"type": "run_end", "source": "runner", "status": "completed"}])
        (root / "runs" / rid / "meta.json").write_bytes(orjson.dumps({"run_id": rid, "status": "completed"}))
        expect(page.locator("#run-status")).to_have_text("completed", timeout=15_000)
        assert page.locator("#seq-7").count() == 1
        _no_errors(errors)
        _no_errors(sweep_errors)


def test_live_run_minimap_grows_with_each_new_event(browser, tmp_path: Path) -> None:
    root = tmp_path / "live-minimap"
    rid = build_results(root)["running"]
    path = root / "runs" / rid / "transcript.jsonl"
    t0 = orjson.loads(path.read_bytes().splitlines()[0])["t"]  # run_start; the budget is 600 s
    with sweep_lock(root), serve(root) as base:
        page, errors = open_page(browser, f"{base}/run/{rid}")
        expect(page.locator("#minimap rect.cat-model")).to_have_count(1)
        assert page.locator("#minimap rect.cat-notice, #minimap rect.cat-other").count() == 0
        # a notice half-way through the budget, and a kind with no lane of its own at three quarters
        append_events(
            path,
            [
                {"type": "notice", "source": "policy", "kind": "time", "text": "5m left", "t": t0 + 300},
                {"type": "quantum_flux", "source": "harness", "level": 7, "t": t0 + 450},
            ],
        )
        notice, other = page.locator("#minimap rect.cat-notice"), page.locator("#minimap rect.cat-other")
        expect(notice).to_have_count(1, timeout=15_000)
        expect(other).to_have_count(1, timeout=15_000)
        assert float(notice.get_attribute("x")) == 500.0 and float(other.get_attribute("x")) == 750.0
        assert page.locator("#seq-4").count() == 1  # the list grew too
        # a second notice, later: a second mark in the notice lane
        append_events(path, [{"type": "notice", "source": "policy", "kind": "time", "text": "1m left", "t": t0 + 540}])
        expect(notice).to_have_count(2, timeout=15_000)
        # each new mark links to its own event, as the marks drawn with the page do
        notice.first.click()
        page.wait_for_url("**#seq=3")
        expect(page.locator("#seq-3")).to_have_class(re.compile(r"\btarget\b"))
        _no_errors(errors)


def test_page_served_while_indexing_fills_in_its_minimap_and_then_goes_live(
    browser, tmp_path: Path, monkeypatch
) -> None:
    root = tmp_path / "big-live"
    ids = build_results(root)
    rid = ids["running"]
    path = root / "runs" / rid / "transcript.jsonl"
    append_events(
        path, [{"type": "tool_result", "source": "harness", "name": "bash", "output": f"row {i}"} for i in range(1000)]
    )
    with indexing_paused(monkeypatch, 300) as go, sweep_lock(root), serve(root) as base:
        page, errors = open_page(browser, f"{base}/run/{rid}")
        assert page.locator("#events article").count() == 200  # the first window, at once
        assert page.locator("#minimap[data-pending]").is_visible() and page.locator("#minimap rect").count() == 0
        assert "indexing the transcript" in page.inner_text("#minimap")
        assert page.locator("#load-later").inner_text() == "loading as you scroll…"  # how many: not known yet
        go.set()  # indexing ends
        expect(page.locator("#minimap rect.cat-tool").first).to_be_attached()
        assert page.locator("#minimap[data-pending]").count() == 0
        expect(page.locator("#load-later")).to_have_text("803 later events: loading as you scroll…")
        # followed live from the whole transcript's end, not from the partial count
        append_events(
            path, [{"type": "assistant", "source": "harness", "turn": 2, "text": f"more {i}"} for i in range(3)]
        )
        expect(page.locator("#new-count")).to_have_text("3 new events below", timeout=15_000)
        expect(page.locator("#load-later")).to_have_text("806 later events: loading as you scroll…")
        page.keyboard.press("End")
        page.wait_for_selector("#seq-399", state="attached")
        _no_errors(errors)
