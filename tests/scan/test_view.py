"""Scan results in `benchctl view`: hits marked on the run page with links to the cited events, a
scan results page across runs, stale results marked, hostile text shown as text; the links followed
in a real headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.view.app import create_app
from tests.rigs.browser import browser, open_page, screenshot  # noqa: F401  (fixture + helpers)
from tests.rigs.scan import call, make_run, opening_call, result, say
from tests.rigs.view import serve

pytestmark = pytest.mark.timeout(120)
LONG, CLEAN, HOSTILE, LATER = (
    "t__react__m__2m__s0",
    "t__react__m__2m__s1",
    "t__react__m__2m__s2",
    "t__react__m__2m__s3",
)
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("scanview") / "results"
    rows = [result(f"row {i}", id=f"r{i}") for i in range(700)]
    # a run whose hit is far past the page's first window: seq 702 and 703
    make_run(
        results,
        LONG,
        [opening_call(), *rows, call("curl http://x", id="c"), result("curl: (6) Could not resolve host", 6, id="c")],
    )
    make_run(results, CLEAN, [opening_call(), say("reading"), call("ls"), result("a b")])
    make_run(results, HOSTILE, [opening_call(), call(f"wget http://y/{SCRIPT}", id="h"), result(SCRIPT, id="h")])
    make_run(results, LATER, [opening_call(), call("pip install x")])
    r = CliRunner().invoke(app, ["scan", str(results), "--scanner", "network_attempts"])
    assert r.exit_code == 0, r.output
    make_run(results, LATER, [opening_call(), call("ls")])  # changed after its scan: its result is stale
    return results


def test_the_run_page_marks_hits_and_links_each_cited_event(scanned: Path) -> None:
    c = TestClient(create_app(scanned), base_url="http://127.0.0.1")
    page = c.get(f"/run/{LONG}").text
    row = re.search(r'<tr class="scan hit" data-scanner="network_attempts">(.*?)</tr>', page, re.DOTALL)
    assert row is not None, page[:2000]
    assert re.findall(r'href="([^"]*)">E(\d+)</a>', row.group(1)) == [
        ("?at=702#seq=702", "702"),
        ("?at=703#seq=703", "703"),
    ]
    assert ">yes</span>" in row.group(1) and "stale" not in row.group(1)
    clean = c.get(f"/run/{CLEAN}").text
    assert '<tr class="scan" data-scanner="network_attempts">' in clean and ">no</span>" in clean
    later = c.get(f"/run/{LATER}").text
    assert '<tr class="scan hit stale"' in later and ">stale</span>" in later
    hostile = c.get(f"/run/{HOSTILE}").text
    scans = hostile[
        hostile.index('<section class="scans"') : hostile.index("</section>", hostile.index('<section class="scans"'))
    ]
    assert "<script>window.__pwned" not in scans and "&lt;script&gt;window.__pwned" in scans  # quoted, as text
    assert '<a href="/scans">scans</a>' in page  # in the top navigation


def test_the_scans_page_lists_hits_across_runs(scanned: Path) -> None:
    c = TestClient(create_app(scanned), base_url="http://127.0.0.1")
    page = c.get("/scans").text
    summary = re.search(r'<table class="mini scan-summary">(.*?)</table>', page, re.DOTALL).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", summary.split("<tbody>")[1], re.DOTALL)
    assert [re.sub(r"<[^>]+>", "", x).strip() for x in cells] == [
        "network_attempts",
        "grep",
        "boolean",
        "3",
        "4",
        "0",
        "1",
    ]
    hits = re.findall(r'<a href="/run/([^"#]+)#scans">', page)
    assert hits == [LONG, HOSTILE, LATER]  # hits only, by run id
    assert f'href="/run/{LONG}?at=702#seq=702"' in page
    one = c.get("/scans?scanner=network_attempts").text
    assert re.findall(r'<a href="/run/([^"#]+)#scans">', one) == [
        LONG,
        HOSTILE,
        LATER,
        CLEAN,
    ]  # every result, hits first
    assert "no scan results for nothing" in c.get("/scans?scanner=nothing").text


@pytest.mark.browser
def test_a_cited_event_link_opens_that_event_in_the_timeline(browser: Any, scanned: Path) -> None:
    from playwright.sync_api import expect

    with serve(scanned) as base:
        page, errors = open_page(browser, f"{base}/scans")
        page.click(f'a[href="/run/{LONG}?at=703#seq=703"]')
        page.wait_for_selector("#seq-703.target")  # the window around the event, and the event marked
        expect(page.locator("#seq-703")).to_be_in_viewport()
        expect(page.locator('tr.scan.hit[data-scanner="network_attempts"]')).to_be_visible()
        screenshot(page, "view-scan-hit")
        page.goto(f"{base}/run/{HOSTILE}")
        page.locator("tr.scan details.explanation summary").click()
        expect(page.locator("tr.scan details.explanation pre")).to_contain_text("<script>window.__pwned")
        assert page.evaluate("() => window.__pwned === undefined")
        assert errors == [], errors
