#!/usr/bin/env python3
"""Screenshot a page of `benchctl view` (docs/view-run.png, shown by the README and the docs, comes from the demo run):
starts the real `benchctl view RESULTS --port 0`, opens PATH in headless Chromium, saves a PNG.

    python scripts/view_screenshot.py results/demo docs/view-run.png            # the first run's page
    python scripts/view_screenshot.py results/demo out.png --path '/run/<id>/artifacts'
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--path", help="page to open (default: the first run's timeline)")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=1100)
    args = ap.parse_args()
    path = args.path or f"/run/{sorted(p.name for p in (args.results / 'runs').iterdir())[0]}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from benchctl.cli import app; app()", "view", str(args.results), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        m = re.search(r"(http://127\.0\.0\.1:\d+)/", proc.stdout.readline() if proc.stdout else "")
        if not m:
            sys.exit("benchctl view did not print its address")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            page.goto(m.group(1) + path, wait_until="load")
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out))
            browser.close()
        print(f"wrote {args.out}")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
