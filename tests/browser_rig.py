"""A real headless Chromium for page tests: Debian's `chromium` driven by playwright, which is
told where the browser is (no browser download). Mark tests `@pytest.mark.browser`.

    from browser_rig import browser, open_page  # noqa: F401  (fixture + helper)

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


_shared: dict[str, Any] = {"users": 0}


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    # Each test module that imports this fixture gets its own session-scoped copy, but playwright's
    # sync API allows one instance per thread: the copies share one Chromium, closed by the last.
    if _shared["users"] == 0:
        from playwright.sync_api import sync_playwright
        _shared["playwright"] = sync_playwright().start()
        # --no-sandbox: CI runs as root, where Chromium's own sandbox refuses to start.
        _shared["browser"] = _shared["playwright"].chromium.launch(executable_path=shutil.which("chromium"),
                                                                   args=["--no-sandbox"])
    _shared["users"] += 1
    try:
        yield _shared["browser"]
    finally:
        _shared["users"] -= 1
        if _shared["users"] == 0:
            _shared.pop("browser").close()
            _shared.pop("playwright").stop()


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
