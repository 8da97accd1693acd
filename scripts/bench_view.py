#!/usr/bin/env python3
"""Benchmark `benchctl view` on a 10,000-run sweep and a 100,000-event transcript.

Generates the sweep with bench_report's generator (meta.json + coverage/tldr/combined grades
per run) and one run whose transcript has 100,000 events of realistic sizes (model calls with
request deltas, tool calls, tool outputs of 0.2-6 KB, notices), written by the real
TranscriptWriter. Starts the real app under uvicorn on 127.0.0.1 and times, over HTTP (server
work + transfer, as a browser would fetch the HTML):

- start-up (`create_app`: the first load of every meta.json and grade, with and without the
  cache `benchctl report` leaves in the results dir, which the viewer reads but never writes);
- the sweep page: first request, a request that comes while the background reload runs (every
  file re-stat'ed, changed ones re-read), a filtered and sorted request, the live figures;
- the run page of the 100,000-event run: first open (served once its first window is indexed;
  the rest is indexed in the background), the same followed by its overview (minimap, phases,
  event count: waits for the whole index), warm open, a deep link to the middle, searches (200
  hits; none, so every line is read; a key's name, in every line and no value), the next window
  of events, and picking up 100 appended events;
- with Chromium (when installed): navigation to the `load` event of the sweep page, and of the
  run page's first open in a `benchctl view` process of its own (started fresh, the sweep's
  first load done, the transcript not indexed yet), also to the minimap being drawn and to the
  next 200 events shown after scrolling to the end of the first 200. With
  --against DIR the same is measured, in turns, with `benchctl view` from another checkout
  (e.g. `git archive main | tar -x -C /tmp/base`), so old and new code see the same load.

Goal: each page usable in < 1 s. Prints a table.

    python scripts/bench_view.py [--runs 10000] [--events 100000] [--repeat 3] [--keep DIR] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import orjson
from bench_report import generate

from tests.rigs.report import add_run

BIG = "big__react__prov-model-x__2h__s0"


def big_transcript(root: Path, n_events: int, seed: int = 0) -> str:
    """One run (meta.json + transcript) with `n_events` events; returns its run id."""
    from benchctl.transcript import TranscriptWriter

    rng = random.Random(seed)
    rid = add_run(root, model="prov/model-x", task="big", budget="2h", budget_s=7200, seed=0)
    words = "the svc-backup account logged in from 203.0.113.77 and exported pages while audit entries vanished".split()
    with TranscriptWriter(root / "runs" / rid / "transcript.jsonl") as tr:
        tr.emit("run_start", "runner", run_id=rid, spec={"run_id": rid, "task": "big", "budget_s": 7200}, budget_s=7200)
        turn, written = 0, 1
        while written < n_events - 1:  # 5 events per turn, run_start included
            turn += 1
            written += 5
            tr.emit(
                "model_call",
                "gateway",
                call_id=f"call-{turn}",
                wire_api="anthropic_messages",
                served_model="prov/model-x",
                status=200,
                latency_ms=rng.uniform(300, 4000),
                ttfb_ms=rng.uniform(50, 400),
                usage={"input_tokens": 1000 + turn, "output_tokens": rng.randint(20, 800)},
                cost_usd=0.01,
                request={
                    "conv": "call-1",
                    "append": [{"role": "user", "content": " ".join(rng.choices(words, k=120))}],
                },
                response={"text": " ".join(rng.choices(words, k=40))},
            )
            tr.emit("assistant", "harness", turn=turn, text=" ".join(rng.choices(words, k=rng.randint(10, 120))))
            tr.emit(
                "tool_call",
                "harness",
                id=f"t{turn}",
                name="bash",
                input={"command": f"grep -n svc /data/log{turn % 7}"},
            )
            out = "\n".join(" ".join(rng.choices(words, k=12)) for _ in range(rng.randint(2, 60)))
            tr.emit("tool_result", "harness", id=f"t{turn}", name="bash", output=out, exit_code=0, truncated=False)
            tr.emit("notice", "policy", kind="time", text=f"[benchctl] Time remaining: {turn}s.")
    return rid


@contextmanager
def server(root: Path) -> Iterator[tuple[str, Any]]:
    """(base URL, the app's state) of the real app under uvicorn in a thread."""
    import uvicorn

    from benchctl.view.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = create_app(root)
    app.state.view.sweep.snapshot()  # the sweep's first load done (timed separately as start-up)
    env = app.state.view.env  # and the templates compiled, which the start-up thread does next
    for name in env.list_templates(filter_func=lambda n: n.endswith(".html")):
        env.get_template(name)
    srv = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    th = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    while not srv.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app.state.view
    finally:
        srv.should_exit = True
        th.join(10)


Timing = tuple[float, float]  # (wall s, CPU s of this process: server threads + the HTTP client)


def get(url: str) -> Timing:
    t, c = time.perf_counter(), time.process_time()
    r = httpx.get(url, timeout=120)
    r.raise_for_status()
    return time.perf_counter() - t, time.process_time() - c


def median(fn: Callable[[], Timing], repeat: int) -> Timing:
    runs = [fn() for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def browser_load(root: Path, path: str) -> Timing | None:
    """Seconds from navigation to the `load` event in Chromium (already showing another page of
    the viewer); a started server (sweep loaded) that has not served this page yet."""
    if not shutil.which("chromium"):
        return None
    from playwright.sync_api import sync_playwright

    with server(root) as (base, _), sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = b.new_page()
        page.goto(base + "/compare", wait_until="load")  # a warm browser, as when coming from another page
        t = time.perf_counter()
        page.goto(base + path, wait_until="load", timeout=120_000)
        s = time.perf_counter() - t
        b.close()
        return s, float("nan")  # the browser's CPU is another process


class ViewProcess:
    """`benchctl view ROOT --port 0` from the checkout `tree`, in a process of its own (as run by a user)."""

    def __init__(self, tree: Path, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from benchctl.cli import app; app()", "view", str(root), "--port", "0"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""  # "... serving ROOT at http://...:PORT/ ..."
        if " at http://" not in line:
            self.stop()
            raise RuntimeError(f"benchctl view from {tree} did not start: {line!r}")
        self.base = line.split(" at ")[1].split("/ ")[0]

    def stop(self) -> None:
        self.proc.send_signal(2)
        self.proc.wait(10)


def browser_first_open(browser: Any, tree: Path, root: Path, path: str) -> tuple[float, float, float]:
    """(s to the `load` event, s to the minimap drawn, s to the next 200 events) of a run page's
    first open in Chromium, from a fresh `benchctl view` of `tree` whose sweep is loaded; the
    browser shows another page of the viewer first (warm, as when coming from the run list). The
    next window: from scrolling the first window's last event into view (a checkout with a "load
    later events" button: and clicking it) until the next window's last event is in the page."""
    view = ViewProcess(tree, root)
    try:
        httpx.get(view.base + "/", timeout=300).raise_for_status()  # the sweep's first load is done
        page = browser.new_page()
        page.goto(view.base + "/compare", wait_until="load")
        t = time.perf_counter()
        page.goto(view.base + path, wait_until="load", timeout=120_000)
        load = time.perf_counter() - t
        page.locator("section.minimap:not([data-pending]) svg").wait_for(state="attached", timeout=120_000)
        drawn = time.perf_counter() - t
        button = page.locator("button#load-later")
        t = time.perf_counter()
        page.locator("#seq-199").scroll_into_view_if_needed()  # the reader reaches the first window's end
        if button.count():
            button.click()
        page.locator("#seq-399").wait_for(state="attached", timeout=120_000)
        more = time.perf_counter() - t
        page.close()
        return load, drawn, more
    finally:
        view.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="generate into this dir and keep it")
    ap.add_argument(
        "--against", type=Path, help="also time Chromium's first open with `benchctl view` from this checkout, in turns"
    )
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench_view_"))
    try:
        t0 = time.perf_counter()
        if not (root / "runs").is_dir():
            generate(root, args.runs)
            big_transcript(root, args.events)
            old = time.time() - 3600  # files changed in the last seconds are never cached (report/cache.py)
            for p in root.rglob("*.json"):
                os.utime(p, (old, old))
        gen_s = time.perf_counter() - t0
        tpath = root / "runs" / BIG / "transcript.jsonl"
        mb = tpath.stat().st_size / 1e6
        rows: list[tuple[str, Timing | None]] = []
        cache = root / ".benchctl-report-cache"
        from benchctl.report.load import load_results
        from benchctl.view.app import create_app

        def startup() -> Timing:
            t, c = time.perf_counter(), time.process_time()
            create_app(root).state.view.sweep.snapshot()  # the first load (a background thread in the CLI)
            return time.perf_counter() - t, time.process_time() - c

        cache.unlink(missing_ok=True)
        rows.append(("startup: load the sweep, no report cache", median(startup, args.repeat)))
        load_results(root)  # what `benchctl report` leaves behind
        rows.append(("startup: load the sweep, report cache present", median(startup, args.repeat)))
        cache.unlink(missing_ok=True)

        def first(path: str) -> Timing:
            with server(root) as (base, _):  # started (sweep loaded); this page never asked for yet
                return get(base + path)

        rows.append(("sweep page (first 200 rows)", median(lambda: first("/"), args.repeat)))
        with server(root) as (base, view):
            get(base + "/")
            time.sleep(view.sweep.max_age + 10 * view.sweep.snapshot().took + 0.1)
            rows.append(("sweep page while a background reload starts", get(base + "/")))  # CPU includes the reload
            while view.sweep.reloading:
                time.sleep(0.1)
            rows.append(
                (
                    "sweep page, filter + sort",
                    median(
                        lambda: get(base + "/?harness=react&status=completed&sort=score&desc=1&page=2"), args.repeat
                    ),
                )
            )
            rows.append(("sweep live figures (/api/live)", median(lambda: get(base + "/api/live"), args.repeat)))

        run = f"/run/{BIG}"

        def first_open() -> tuple[Timing, Timing]:
            """The first open, and the same followed by its overview (which waits for the whole index)."""
            with server(root) as (base, _):
                page = get(base + run)
                overview = get(f"{base}{run}/overview?first=0&last=200")
            return page, (page[0] + overview[0], page[1] + overview[1])

        opens = [first_open() for _ in range(args.repeat)]
        for k, name in enumerate(("first window", "+ overview (whole index)")):
            rows.append(
                (
                    f"run page, {args.events:,} events, first open: {name}",
                    (statistics.median(o[k][0] for o in opens), statistics.median(o[k][1] for o in opens)),
                )
            )
        with server(root) as (base, _):
            get(base + run)
            get(f"{base}{run}/overview?first=0&last=200")  # the whole transcript indexed
            rows.append(("run page, warm", median(lambda: get(base + run), args.repeat)))
            conv = base + run + "/conversation"
            if httpx.get(conv, timeout=120).status_code == 200:  # (a checkout without the mode: skipped)
                rows.append(("run page, conversation mode, warm", median(lambda: get(conv), args.repeat)))
            rows.append(
                (
                    "run page, deep link to the middle",
                    median(lambda: get(f"{base}{run}?at={args.events // 2}"), args.repeat),
                )
            )
            rows.append(
                ("run page with search (200 hits)", median(lambda: get(f"{base}{run}?q=svc-backup"), args.repeat))
            )
            rows.append(
                (
                    "run page with search (no hit: every line read)",
                    median(lambda: get(f"{base}{run}?q=no-such-text"), args.repeat),
                )
            )
            rows.append(
                ("run page with search (a key's name: no hit)", median(lambda: get(f"{base}{run}?q=type"), args.repeat))
            )
            rows.append(
                (
                    "next 200 events (load later)",
                    median(lambda: get(f"{base}{run}/events?from=5000&to=5200"), args.repeat),
                )
            )

            def grow() -> Timing:
                n = int(httpx.get(f"{base}{run}/events?from=0&to=1").headers["x-total"])
                with open(tpath, "ab") as f:
                    for i in range(100):
                        f.write(
                            orjson.dumps(
                                {
                                    "v": 1,
                                    "seq": n + i,
                                    "t": time.time(),
                                    "type": "notice",
                                    "source": "policy",
                                    "kind": "time",
                                    "text": "tick",
                                }
                            )
                            + b"\n"
                        )
                return get(f"{base}{run}/events?from={n}&to={n + 100}")

            rows.append(("100 appended events picked up", median(grow, args.repeat)))
        rows.append(("Chromium: sweep page to `load`", browser_load(root, "/")))
        trees = {"": Path(__file__).resolve().parents[1]}
        if args.against is not None:
            trees[" (--against)"] = args.against.resolve()
        if shutil.which("chromium"):
            from playwright.sync_api import sync_playwright

            seen: dict[str, list[tuple[float, float, float]]] = {label: [] for label in trees}
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
                for turn in range(args.repeat):  # in turns, each checkout going first in turn
                    order = list(trees)[turn % len(trees) :] + list(trees)[: turn % len(trees)]
                    for label in order:
                        seen[label].append(browser_first_open(b, trees[label], root, run))
                b.close()
            for label, got in seen.items():
                rows.append(
                    (
                        f"Chromium: run page first open to `load`{label}",
                        (statistics.median(g[0] for g in got), float("nan")),
                    )
                )
                rows.append(
                    (f"Chromium: ... to its minimap drawn{label}", (statistics.median(g[1] for g in got), float("nan")))
                )
                rows.append(
                    (
                        f"Chromium: ... the next 200 events shown{label}",
                        (statistics.median(g[2] for g in got), float("nan")),
                    )
                )
                spread = ", ".join(f"{g[0]:.2f}/{g[1]:.2f}/{g[2]:.2f}" for g in got)
                print(f"Chromium first open{label or ' (this checkout)'}, load/minimap/next s per turn: {spread}")
        else:
            rows.append(("Chromium: run page first open to `load`", None))

        print(f"sweep: {args.runs:,} runs; transcript: {args.events:,} events, {mb:.0f} MB; generated in {gen_s:.1f} s")
        print(
            f"{'step (HTTP on 127.0.0.1, median of ' + str(args.repeat) + ')':<62} {'wall s':>7} {'CPU s':>6}  goal < 1 s"
        )
        print("-" * 90)
        for name, tm in rows:
            if tm is None:
                print(f"{name:<62} {'n/a':>7}")
                continue
            wall, cpu = tm
            print(f"{name:<62} {wall:>7.3f} {'' if cpu != cpu else f'{cpu:.3f}':>6}  {'ok' if wall < 1 else 'MISSED'}")
        print(
            f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
            "(wall times grow with the load; CPU times much less)"
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
