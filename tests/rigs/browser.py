"""A real headless Chromium for page tests: Debian's `chromium` driven by playwright, which is
told where the browser is (no browser download). Mark tests `@pytest.mark.browser`.

    from tests.rigs.browser import browser, open_page  # noqa: F401  (fixture + helper)

`open_page(browser, url)` returns a page plus the list of console errors and page errors it
collects; `screenshot(page, name)` saves a PNG under $BENCHCTL_TEST_ARTIFACTS (default
/tmp/benchctl-test-artifacts) so a failing CI run leaves something to look at.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(os.environ.get("BENCHCTL_TEST_ARTIFACTS", "/tmp/benchctl-test-artifacts"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope, not session: while playwright's sync API is started it keeps an asyncio loop
    # running in this thread, so any later test calling asyncio.run() (the grade CLI, ...) would
    # fail; it is stopped after each module that uses it.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's own sandbox refuses to start.
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def open_page(browser: Any, url: str) -> tuple[Any, list[str]]:
    """Open `url` in a fresh context; the returned list fills with console and page errors."""
    page = browser.new_context().new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.goto(url)
    return page, errors


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
