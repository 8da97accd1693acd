"""The demo's last step: `benchctl view` on the real demo run (run with the scripted
investigator in Docker, graded with the fake judge), through the real CLI, in a real browser."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from benchctl.jsonio import read_jsonl
from tests.rigs.browser import browser, open_page, screenshot  # noqa: F401  (fixture + helpers)
from tests.rigs.run import BENCHCTL, REPO, cli


@pytest.mark.docker
@pytest.mark.browser
def test_view_shows_the_demo_run(browser, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    r = cli(
        "run", "configs/demo", "--model", "scripted/configs/demo/investigator.json", "--budget", "2m", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr
    g = cli("grade", str(out), "--judge", "scripted/py:benchctl.grading.fake_judge:judge")
    assert g.returncode == 0, g.stderr
    (run,) = [p.name for p in (out / "runs").iterdir()]
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    proc = subprocess.Popen(
        [*BENCHCTL, "view", str(out), "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = re.search(r"(http://127\.0\.0\.1:\d+)/", proc.stdout.readline()).group(1)
        page, errors = open_page(browser, base + "/")
        assert page.locator("table.runs tbody tr").count() == 1
        assert page.locator(f'tr[id="run-{run}"] .status').inner_text() == "completed"
        page.click(f'a[href="/run/{run}"]')
        page.wait_for_selector(".ev.t-reprompt")  # the demo's early-exit reprompt
        events = read_jsonl(out / "runs" / run / "transcript.jsonl")
        for kind in ("tool_call", "tool_result", "notice", "model_call", "assistant"):  # every event is on the page
            assert page.locator(f".ev.t-{kind}").count() == sum(e["type"] == kind for e in events) > 0, kind
        assert "svc-backup" in page.inner_text("#events")
        # the prompt once at the top: ReAct's system prompt and the task's instructions, as sent
        prompt = page.inner_text("#prompt")
        assert "You are an investigator working in a sandboxed Linux machine" in prompt
        assert "Something suspicious happened. Investigate and write /work/report.md" in prompt
        screenshot(page, "view-demo-run")
        page.click("nav.tabs >> text=conversation")  # each notice once (ReAct appends them to tool output)
        page.wait_for_selector("article.conv-tool")
        assert page.locator("article.conv-tool").count() == sum(e["type"] == "tool_call" for e in events)
        text = page.locator("#events").text_content()  # off-screen blocks too (not laid out: no innerText)
        for notice in {e["text"] for e in events if e["type"] == "notice"}:
            assert text.count(notice) == sum(e["type"] == "notice" and e["text"] == notice for e in events), notice
        screenshot(page, "view-demo-conversation")
        page.click("text=artifacts & grades")
        page.wait_for_selector(".grade.g-coverage")
        assert page.locator('mark.quote-hl[data-for="art-1-tldr"]').count() >= 1  # the graded TLDR, highlighted
        assert "203.0.113.77" in page.inner_text("#art-1-doc")
        screenshot(page, "view-demo-artifacts")
        assert errors == [], errors
    finally:
        proc.terminate()
        proc.wait(10)
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == before  # read-only
