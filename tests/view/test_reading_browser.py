"""Reading a transcript in `benchctl view`, in a real headless Chromium: reasoning inline and
collapsed only when long, the conversation mode (also live, where a tool's result joins its
call), lanes remembered across pages, previous / next run, what a live run waits for, report
rows leading to their runs, and the runs page in a mixed directory (readable, and picking up
new runs live). Agent text in reasoning neither runs nor loads anything. Waits use locators and
`expect` (the pages' CSP forbids the eval that string predicates need)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from playwright.sync_api import expect

from benchctl.layout import make_run_id
from benchctl.transcript import TranscriptWriter
from tests.rigs.browser import browser, open_page, screenshot  # noqa: F401  (fixture + helpers)
from tests.rigs.report import add_grade, add_run
from tests.rigs.view import (
    LONG_THOUGHT,
    NOTICE,
    OPAQUE_REDACTED,
    OPAQUE_SIG,
    append_events,
    build_results,
    serve,
    sweep_lock,
    write_reasoning_run,
)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("reading") / "sweep"
    ids = build_results(root)
    ids["thinker"] = write_reasoning_run(root)
    with serve(root) as base:
        yield base, ids, root


def _no_errors(errors: list[str]) -> None:
    assert errors == [], errors


def _inert(page: Any, base: str, requests: list[str]) -> None:
    assert page.evaluate("window.__pwned") is None
    assert all(u.startswith(base + "/") for u in requests), requests
    assert page.locator("main img, main iframe, main script").count() == 0
    text = page.inner_text("main")
    assert OPAQUE_SIG[:24] not in text and OPAQUE_REDACTED[:24] not in text


@pytest.mark.parametrize("mode", ["", "/conversation"])
def test_reasoning_is_inline_collapsed_only_when_long_and_inert(browser, site, mode: str) -> None:
    base, ids, _ = site
    page = browser.new_context().new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{base}/run/{ids['thinker']}{mode}")
    turn1 = page.locator("#seq-3")
    short = turn1.locator("details.reasoning").first
    expect(short).to_have_attribute("open", "")
    expect(short.locator(".reasoning-text")).to_be_visible()
    assert short.locator(".reasoning-text").inner_text().startswith("The grader probably checks the TLDR. <script>")
    expect(turn1.locator(".reasoning.redacted")).to_have_text("reasoning redacted reasoning (236 chars of opaque data)")
    long = page.locator("#seq-8 details.reasoning")
    assert long.get_attribute("open") is None and not long.locator(".reasoning-text").is_visible()
    long.locator("summary").click()  # a long one opens on a click
    expect(long.locator(".reasoning-text")).to_contain_text(LONG_THOUGHT.splitlines()[-1])
    _inert(page, base, requests)
    screenshot(page, "view-reasoning" + mode.replace("/", "-"))
    assert errors == [], errors


def test_conversation_mode_reads_as_turns_and_tool_blocks(browser, site) -> None:
    base, ids, _ = site
    page, errors = open_page(browser, f"{base}/run/{ids['thinker']}")
    page.click("nav.tabs >> text=conversation")
    page.wait_for_url("**/conversation")
    expect(page.locator("#prompt .task-prompt strong")).to_have_text("report.md")
    tool = page.locator('article.conv-tool[data-tool-id="t1"]')
    assert tool.locator(".conv-part").count() == 2  # the call and its result, one block
    expect(tool.locator(".conv-notice")).to_have_text(f"#5 notice · time: {NOTICE}")
    assert page.locator("#events").text_content().count(NOTICE) == 1  # once, not also inside the tool output
    assert page.locator("#events > article").count() == 8  # 14 events, 8 blocks
    page.goto(f"{base}/run/{ids['thinker']}/conversation#seq=10")  # a deep link into a tool block
    expect(page.locator("#seq-10")).to_have_class(re.compile(r"\btarget\b"))
    _no_errors(errors)


def test_lane_toggles_are_remembered_across_pages(browser, site) -> None:
    base, ids, _ = site
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{base}/run/{ids['main']}")
    page.uncheck('input[data-lane="model"]')
    page.uncheck('input[data-lane="notice"]')
    page.goto(f"{base}/run/{ids['seed1']}")  # another run, opened afresh
    assert not page.is_checked('input[data-lane="model"]') and not page.is_checked('input[data-lane="notice"]')
    assert page.is_checked('input[data-lane="tool"]')
    assert not page.locator("#seq-1").is_visible() and page.locator("#seq-2").is_visible()  # model call hidden
    page.check('input[data-lane="model"]')
    page.goto(f"{base}/run/{ids['main']}/conversation")
    assert page.is_checked('input[data-lane="model"]') and not page.is_checked('input[data-lane="notice"]')
    expect(page.locator(".conv-notice").first).to_be_hidden()
    context.close()


def test_previous_and_next_run_and_compare_from_the_run_page(browser, site) -> None:
    base, ids, _ = site
    order = sorted(ids.values())
    page, errors = open_page(browser, f"{base}/run/{order[1]}")
    page.click("#next-run")
    page.wait_for_url(f"**/run/{order[2]}")
    page.click("#prev-run")
    page.wait_for_url(f"**/run/{order[1]}")
    page.click("#compare-run")
    page.wait_for_url("**/compare?run=**")
    assert page.locator("h2", has_text=f"Compare {order[1]} with").count() == 1
    _no_errors(errors)


def test_live_page_shows_the_call_in_flight_and_joins_results_to_their_calls(browser, tmp_path: Path) -> None:
    root = tmp_path / "live"
    rid = build_results(root)["running"]
    path = root / "runs" / rid / "transcript.jsonl"
    with sweep_lock(root), serve(root) as base:
        page, errors = open_page(browser, f"{base}/run/{rid}/conversation")
        flight = page.locator("#in-flight")
        expect(flight).to_be_hidden()  # the model just answered
        append_events(
            path,
            [{"type": "tool_call", "source": "harness", "id": "t9", "name": "bash", "input": {"command": "sleep 5"}}],
        )
        expect(flight.locator(".label")).to_have_text("tool bash running", timeout=15_000)
        expect(flight.locator(".age")).to_have_text(re.compile(r"^for \d+s$"))
        append_events(
            path,
            [
                {"type": "notice", "source": "policy", "kind": "time", "text": "4m left", "tool_id": "t9"},
                {
                    "type": "tool_result",
                    "source": "harness",
                    "id": "t9",
                    "name": "bash",
                    "output": "done\n\n4m left",
                    "exit_code": 0,
                },
            ],
        )
        expect(flight.locator(".label")).to_have_text("model call in flight", timeout=15_000)
        # the result that arrived later sits in its call's block; its notice once
        block = page.locator('article.conv-tool[data-tool-id="t9"]')
        expect(block).to_have_count(1)
        expect(block.locator(".conv-result pre")).to_have_text("done")
        expect(block.locator(".conv-notice")).to_have_text("#4 notice · time: 4m left")
        append_events(
            path,
            [
                {
                    "type": "model_call",
                    "source": "gateway",
                    "call_id": "c2",
                    "served_model": "m",
                    "status": 200,
                    "latency_ms": 5.0,
                },
                {"type": "assistant", "source": "harness", "turn": 2, "text": "All done."},
            ],
        )
        expect(flight).to_be_hidden(timeout=15_000)
        screenshot(page, "view-live-conversation")
        _no_errors(errors)


def _mixed(root: Path) -> None:
    """A results directory mixing a demo task, a hidden-behaviour audit and an imported environment."""
    for seed in range(2):
        rid = add_run(
            root, model="scripted/configs/demo/investigator.json", task="demo", budget="2m", budget_s=120, seed=seed
        )
        add_grade(root, "coverage", rid, 0.5)
        add_run(
            root,
            model="anthropic/claude-sonnet-4-5-20250929",
            task="hidden-behaviour-flattery-audit",
            harness="claude_code",
            seed=seed,
            variant="quirk-flattery",
            tools="chat+prefill+sample",
            budget="30m",
            budget_s=1800,
        )
        add_run(
            root,
            model="openai/gpt-5-codex",
            task="env-audit-harbor-terminal-bench-hello-world",
            harness="codex",
            seed=seed,
            budget="1h",
            budget_s=3600,
            status="error",
            error="RuntimeError: the sandbox could not start: docker: Error response from daemon: pull access "
            "denied for benchctl-sandbox-other, repository does not exist or may require 'docker login'",
        )


def test_runs_page_is_readable_in_a_mixed_directory(browser, tmp_path: Path) -> None:
    root = tmp_path / "mixed"
    _mixed(root)
    with serve(root) as base:
        page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        page.goto(base + "/")
        rows = page.locator("table.runs tbody tr")
        assert rows.count() == 6
        for k in range(6):
            row = rows.nth(k)
            assert row.locator("td.rid").bounding_box()["width"] >= 240  # ~30 characters, not 3
            assert row.bounding_box()["height"] <= 80, row.inner_text()  # a few lines, not 270 px
        err = page.locator("td.rid .err").first
        assert err.get_attribute("title").endswith("'docker login'")  # the whole error on hover
        screenshot(page, "view-sweep-mixed")


def test_runs_page_picks_up_new_runs_live(browser, tmp_path: Path) -> None:
    root = tmp_path / "growing"
    ids = build_results(root)
    with sweep_lock(root), serve(root) as base:
        page, errors = open_page(browser, base + "/")
        assert page.locator("table.runs tbody tr").count() == 4
        rid = make_run_id("wiki", "react", "prov/model-aa", "10m", 0)  # sorts between model-a and model-b
        with TranscriptWriter(root / "runs" / rid / "transcript.jsonl") as tr:
            spec = {
                "run_id": rid,
                "task": "wiki",
                "harness": "react",
                "model": "prov/model-aa",
                "budget": "10m",
                "budget_s": 600.0,
                "seed": 0,
            }
            tr.emit("run_start", "runner", run_id=rid, spec=spec, budget_s=600.0)
        row = page.locator(f'tr[id="run-{rid}"]')
        expect(row).to_have_count(1, timeout=15_000)  # no reload
        expect(row.locator('[data-f="status"]')).to_have_text("running")
        order = page.locator("table.runs tbody tr").evaluate_all("rows => rows.map(r => r.id.slice(4))")
        assert order == sorted(order) and rid in order
        expect(page.locator('[data-count="running"]')).to_have_text("2", timeout=15_000)
        (root / "runs" / rid / "meta.json").write_bytes(orjson.dumps({"run_id": rid, "status": "completed"}))
        expect(row.locator('[data-f="status"]')).to_have_text("completed", timeout=15_000)
        assert ids["main"] in page.inner_text("table.runs")
        _no_errors(errors)


def test_report_rows_lead_to_their_runs(browser, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    ids = build_results(root)
    with serve(root) as base:
        page, errors = open_page(browser, base + "/report")
        board = page.locator("section#leaderboard tbody tr", has_text="prov/model-a")
        board.locator("td.runs-link a").click()
        page.wait_for_url(re.compile(r"/\?.*model=prov%2Fmodel-a"))
        shown = page.locator("table.runs tbody tr").evaluate_all("rows => rows.map(r => r.id.slice(4))")
        assert sorted(shown) == sorted([ids["main"], ids["seed1"]])
        page.go_back()
        page.locator("section#findings tbody tr", has_text="F1").locator("td.runs-link a").click()
        page.wait_for_url(re.compile(r"/\?found=F1$"))
        expect(page.locator("#other-filters")).to_contain_text("finding found = F1")
        shown = page.locator("table.runs tbody tr").evaluate_all("rows => rows.map(r => r.id.slice(4))")
        assert sorted(shown) == sorted([ids["main"], ids["seed1"], ids["hostile"]])  # F1 strict > 0 in each
        page.click("#other-filters a")  # the filter removed
        expect(page.locator("table.runs tbody tr")).to_have_count(4)
        _no_errors(errors)
