"""`benchctl view` over HTTP, without a browser: every page and endpoint, read-only routes,
security headers, paths that leave the results dir, and nothing written into the results dir."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import orjson
import pytest
from starlette.testclient import TestClient

from benchctl.view.app import CSP, create_app
from tests.rigs.view import HOSTILE_EVENT_TEXT, REPORT, append_events, build_results, indexing_paused, serve, sweep_lock


@pytest.fixture()
def results(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "sweep"
    return root, build_results(root)


def client(root: Path) -> TestClient:
    return TestClient(create_app(root), base_url="http://127.0.0.1")


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_every_page_renders_and_writes_nothing_into_the_results_dir(results) -> None:
    root, ids = results
    before = snapshot(root)
    c = client(root)
    main = ids["main"]
    pages = [
        "/",
        "/?status=completed&sort=score&desc=1",
        "/report",
        f"/run/{main}",
        f"/run/{main}/artifacts",
        f"/run/{main}?q=svc-backup",
        f"/run/{main}?at=20",
        f"/run/{main}/conversation",
        f"/run/{main}/conversation?q=svc-backup",
        f"/run/{main}/events?from=5&to=9&view=conversation",
        f"/api/rows?ids={main}",
        f"/run/{ids['running']}",
        f"/run/{ids['hostile']}/artifacts",
        f"/compare?run={main}&run={ids['seed1']}",
        f"/compare?run={main}",
        "/compare",
        "/api/live",
        f"/run/{main}/event/3",
        f"/run/{main}/events?from=5&to=9",
        f"/run/{main}/meta.json",
        f"/run/{main}/artifact/report.md",
        "/static/view.css",
        "/static/run.js",
    ]
    for page in pages:
        r = c.get(page)
        assert r.status_code == 200, (page, r.text[:500])
        assert r.headers["content-security-policy"] == CSP, page
        assert r.headers["x-content-type-options"] == "nosniff"
    assert snapshot(root) == before  # no report cache, no index, nothing
    assert not (root / ".benchctl-report-cache").exists()


def test_sweep_lists_finished_and_unfinished_runs_with_filters_and_sorting(results) -> None:
    root, ids = results
    c = client(root)
    page = c.get("/").text
    for rid in ids.values():
        assert f'href="/run/{rid}"' in page
    assert 'completed <b data-count="completed">3</b>' in page and 'unfinished <b data-count="unfinished">1</b>' in page
    assert "→ prov/fallback-model" in page  # fallbacks are marked in the list
    only_b = c.get("/?model=prov/model-b").text
    assert ids["hostile"] in only_b and ids["main"] not in only_b
    by_score = c.get("/?sort=score&desc=1").text
    order = [m for m in re.findall(r'<tr id="run-([^"]+)"', by_score)]
    assert order[-1] == ids["running"]  # no score sorts last
    assert order.index(ids["main"]) < order.index(ids["seed1"])  # 0.643 before 0.597
    q = c.get("/?q=model-c").text
    assert ids["running"] in q and ids["main"] not in q


def test_running_run_is_live_only_while_a_benchctl_run_holds_the_lock(results) -> None:
    root, ids = results
    c = client(root)
    assert c.get("/api/live").json()["runs"][ids["running"]]["status"] == "unfinished"
    with sweep_lock(root):
        live = c.get("/api/live").json()["runs"][ids["running"]]
        assert live["status"] == "running"
        assert live["turns"] == "1" and live["cost"] == "$0.5000" and live["tokens"] == "320"
        assert live["elapsed"].endswith("/ 10m00s")
        page = c.get(f"/run/{ids['running']}").text
        assert 'id="run-status">running<' in page and 'data-live="1"' in page
    assert "unfinished" in c.get(f"/run/{ids['running']}").text


def test_run_page_renders_each_event_kind_and_unknown_ones_generically(results) -> None:
    root, ids = results
    page = client(root).get(f"/run/{ids['main']}").text
    assert "<strong>grep</strong>" in page  # assistant markdown rendered
    assert "show all 60 lines" in page  # long output starts collapsed
    assert "t-notice" in page and "t-reprompt" in page and "t-revision_request" in page
    assert 'prov/model-a</span> → <span class="model">prov/fallback-model' in page  # fallback, with models
    assert 'refusal</b> by <span class="model">prov/model-a' in page
    assert "follow-up 1" in page and "t-target_call" in page and "flaxseed" in page
    assert "<b>quantum_flux</b>" in page and "an event type this viewer has never seen" in page
    assert ">partial<" in page and ">cancelled<" in page  # newer model_call fields: a partial answer, a status word
    assert "upstream_request_id" in page and "req_0123" in page  # a field this viewer does not know is still shown
    assert "812 ms (first byte 95 ms)" in page and "$0.0123" in page
    assert 'href="#seq=26"' in page  # phase link to the follow-up


def test_search_finds_events_and_deep_link_windows_a_long_transcript(tmp_path: Path) -> None:
    root = tmp_path / "big"
    build_results(root)
    rid = "wiki__react__prov-model-a__10m__s0"
    path = root / "runs" / rid / "transcript.jsonl"
    append_events(
        path,
        [{"type": "tool_result", "source": "harness", "name": "bash", "output": f"row {i}"} for i in range(100_000)],
    )
    c = client(root)
    page = c.get(f"/run/{rid}").text
    assert page.count("<article ") == 200  # one window, never the whole file
    assert len(page) < 1_500_000
    deep = c.get(f"/run/{rid}?at=90000").text
    assert 'id="seq-90000"' in deep and 'id="seq-89980"' in deep and 'id="seq-89979"' not in deep
    hits = c.get(f"/run/{rid}?q=" + "row 99999").text
    assert 'href="#seq=100028"' in hits
    frag = c.get(f"/run/{rid}/events?from=50000&to=99999")
    assert frag.text.count("<article ") == 200 and frag.headers["x-total"] == "100029"


def _search(c: TestClient, rid: str, q: str) -> tuple[list[int], str]:
    """The seqs a run page's search lists, and the page."""
    page = c.get(f"/run/{rid}", params={"q": q}).text
    box = page.split('id="search-results"', 1)[1].split("</section>", 1)[0]
    return [int(s) for s in re.findall(r'<a href="#seq=(\d+)">', box)], page


def test_search_matches_what_a_reader_sees_case_folded(results) -> None:
    import json

    root, ids = results
    rid = ids["main"]
    path = root / "runs" / rid / "transcript.jsonl"
    n = len(path.read_bytes().splitlines())
    append_events(
        path,
        [
            {"type": "assistant", "source": "harness", "turn": 5, "text": "Viel ÄRGER mit der Straße."},
            {
                "type": "tool_result",
                "source": "harness",
                "name": "bash",
                "output": 'he said "stop" at C:\\Users\\x\nnext line',
                "exit_code": 0,
            },
            {
                "type": "notice",
                "source": "policy",
                "kind": "words",
                "text": "<script>window.__pwned=1</script> sourced",
            },
        ],
    )
    # another writer's line: non-ASCII as \u escapes (json.dumps' default), other key order
    with open(path, "a") as f:
        f.write(
            json.dumps(
                {"seq": n + 3, "v": 1, "t": 1.0, "type": "assistant", "source": "harness", "text": "noch mehr Ärger"}
            )
            + "\n"
        )
    assert '"noch mehr \\u00c4rger"' in path.read_text()
    c = client(root)
    # keys and JSON punctuation are not text: "type" and "source" are in every line, in no value
    assert _search(c, rid, "type")[0] == [25]  # "an event type this viewer has never seen"
    assert _search(c, rid, "source")[0] == [n + 2]  # "sourced"
    assert _search(c, rid, '"type":')[0] == []
    assert len(_search(c, rid, "harness")[0]) > 10  # a value (every harness event's source)
    # Unicode case folding, in raw UTF-8 and in \u escapes alike
    assert _search(c, rid, "ärger")[0] == _search(c, rid, "ÄRGER")[0] == [n, n + 3]
    assert _search(c, rid, "STRASSE")[0] == [n]
    # escaped characters match as the text they stand for
    assert _search(c, rid, 'said "stop"')[0] == [n + 1]
    assert _search(c, rid, "c:\\users\\x")[0] == [n + 1]
    assert _search(c, rid, "x\nnext")[0] == [n + 1]
    # numbers are text; the envelope's (seq, time) are not
    assert _search(c, rid, "812.5")[0] == [1, 6, 11]  # latency_ms of the three model calls
    assert _search(c, rid, "18000003")[0] == []  # in every event's time (t = 1800000300..)
    # a query and a matched event are shown as text, never as markup
    seqs, page = _search(c, rid, "<script>window")
    assert seqs == [n + 2]
    assert "<script>window" not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt; sourced" in page
    assert "“&lt;script&gt;window”" in page


def test_first_window_is_served_while_a_big_transcript_is_still_indexed(results, monkeypatch) -> None:
    import httpx

    root, ids = results
    rid = ids["main"]
    path = root / "runs" / rid / "transcript.jsonl"
    append_events(
        path, [{"type": "tool_result", "source": "harness", "name": "bash", "output": f"row {i}"} for i in range(2000)]
    )
    total = len(path.read_bytes().splitlines())
    with indexing_paused(monkeypatch, 300) as go, serve(root) as base, ThreadPoolExecutor(2) as pool:
        page = httpx.get(f"{base}/run/{rid}", timeout=30).text
        assert page.count("<article ") == 200 and 'id="seq-199"' in page and 'id="seq-200"' not in page
        assert 'id="minimap" data-pending="1"' in page and "<rect " not in page  # the minimap comes later
        assert 'data-pending="1"' in page and '"load-later">loading as you scroll…</p>' in page  # count not known yet
        assert "prov/model-a" in page  # the header is complete
        assert httpx.get(f"{base}/run/{rid}/artifacts", timeout=30).status_code == 200
        overview = pool.submit(httpx.get, f"{base}/run/{rid}/overview?first=0&last=200", timeout=30)
        deep = pool.submit(httpx.get, f"{base}/run/{rid}?at=1500", timeout=30)
        done, _ = wait([overview, deep], timeout=0.5)
        assert not done  # these wait for the whole index
        go.set()
        ov, dl = overview.result(), deep.result()
    assert ov.headers["x-total"] == str(total)
    assert ov.text.count("<rect ") > 3 and 'class="window"' in ov.text
    assert 'id="phases">' in ov.text and 'href="#seq=26"' in ov.text  # the follow-up's phase link
    assert (
        'id="seq-1500"' in dl.text
        and 'data-pending=""' in dl.text
        and f">{total - 1680} later events: loading as you scroll…<" in dl.text
    )


def test_artifacts_page_shows_grades_beside_their_artifact(results) -> None:
    root, ids = results
    page = client(root).get(f"/run/{ids['main']}/artifacts").text
    main_at, follow_at = page.index("<h2>report.md"), page.index("<h2>report.followup-1.md")
    assert main_at < follow_at
    main = page[main_at:follow_at]
    assert 'data-quote="**brute-forced** the account svc-backup"' in main
    assert "quote not in the report" in main  # F3's quote_found is false
    assert "TLDR score <b>0.900</b>" in main and "Names the intrusion" in main
    assert "<h3>combined" in main and "<h3>coverage" in main
    assert "<h3>coverage" in page[follow_at:]  # the follow-up's own grade sits beside it
    assert "<table>" in main and "<code>svc-backup</code>" in main  # markdown table and code rendered


def test_run_header_shows_the_rate_limit_wait_like_the_report(tmp_path: Path) -> None:
    """A run whose calls waited for rate limits says so in its header, with the share of the budget
    the report's column shows (aggregate.wait_share); a run that never waited shows nothing."""
    from tests.rigs.report import add_run

    waited = add_run(tmp_path, model="prov/model-a", seed=0, budget="10m", budget_s=600)
    calm = add_run(tmp_path, model="prov/model-a", seed=1, budget="10m", budget_s=600)
    meta_path = tmp_path / "runs" / waited / "meta.json"
    meta = orjson.loads(meta_path.read_bytes())
    meta["rate_limits"] = {
        "pause_budget": True,
        "waits": 3,
        "wait_s": 95.0,
        "paused_s": 90.0,
        "budget_extended_s": 90.0,
    }
    meta_path.write_bytes(orjson.dumps(meta))
    c = client(tmp_path)
    page = c.get(f"/run/{waited}").text
    assert re.search(r"<dt>rate-limit wait</dt><dd>1m30s \(15% of the budget\), budget paused</dd>", page), page
    assert "rate-limit wait" not in c.get(f"/run/{calm}").text


def test_compare_shows_two_runs_side_by_side(results) -> None:
    root, ids = results
    page = client(root).get(f"/compare?run={ids['main']}&run={ids['seed1']}").text
    assert f"A: {ids['main']}" in page and f"B: {ids['seed1']}" in page
    assert re.search(r'<tr class="differs"><th>seed</th><td>0</td><td>1</td>', page)
    assert re.search(
        r"<td>F1</td><td>[^<]*</td><td>intrusion</td><td class=\"num\">1.000</td><td class=\"num\">0.600</td><td class=\"num\">-0.40</td>",
        page,
    )
    pick = client(root).get(f"/compare?run={ids['main']}").text
    assert f"run={ids['seed1']}" in pick  # other seeds suggested first


def test_hostile_text_is_inert_in_every_page(results) -> None:
    root, ids = results
    c = client(root)
    for page in (
        f"/run/{ids['hostile']}/artifacts",
        f"/run/{ids['hostile']}",
        f"/run/{ids['hostile']}/conversation",
        f"/compare?run={ids['hostile']}&run={ids['main']}",
    ):
        html = c.get(page).text
        assert "<script>window" not in html and "<img src" not in html and "<iframe" not in html
        # every link, resource and form target is this server's own (a path, a query or a fragment)
        assert not re.search(r'(href|src|action)\s*=\s*"(?![/#?])', html)
        assert "&lt;script&gt;" in html


def test_only_get_routes_exist(results) -> None:
    root, ids = results
    c = client(root)
    for method in ("post", "put", "delete", "patch"):
        for path in ("/", f"/run/{ids['main']}", f"/run/{ids['main']}/artifact/report.md", "/api/live"):
            r = getattr(c, method)(path)
            assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"GET", "HEAD"}, (method, path)


def test_foreign_host_header_is_refused(results) -> None:
    root, _ = results
    r = TestClient(create_app(root), base_url="http://attacker.example").get("/")
    assert r.status_code == 400  # DNS rebinding: the page cannot read the runs


@pytest.mark.parametrize(
    "path",
    [
        "/run/../meta.json",
        "/run/%2e%2e/artifacts",
        "/run/..%2f..%2fetc/artifacts",
        "/run/a%00b",
        "/run/{main}/artifact/%2e%2e/meta.json",
        "/run/{main}/artifact/%2e%2e/%2e%2e/%2e%2e/sweep.json",
        "/run/{main}/artifact/..%2f..%2f..%2fsweep.json",
        "/run/{main}/artifact//etc/passwd",
        "/run/{main}/artifact/link.md",
        "/run/{main}/artifact/linkdir/x",
        "/run/{main}?attempt=../..",
        "/run/{main}?attempt=7",
        "/run/linkrun",
        "/run/linkrun/artifact/report.md",
        "/run/{main}/event/99999",
    ],
)
def test_paths_never_leave_the_results_dir(results, path: str, tmp_path: Path) -> None:
    root, ids = results
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    art = root / "runs" / ids["main"] / "artifacts"
    (art / "link.md").symlink_to(secret)
    (art / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    (root / "runs" / "linkrun").symlink_to(root / "runs" / ids["main"], target_is_directory=True)
    r = client(root).get(path.format(main=ids["main"]))
    assert r.status_code in (400, 404), r.text[:300]
    assert "TOP SECRET" not in r.text and "root:" not in r.text


def test_artifacts_are_served_as_text_never_html(results) -> None:
    root, ids = results
    r = client(root).get(f"/run/{ids['hostile']}/artifact/report.md")
    assert r.headers["content-type"].startswith("text/plain") and "<script>" in r.text


def test_earlier_attempts_are_listed_and_viewable(results) -> None:
    root, ids = results
    d = root / "runs" / ids["main"] / "attempts" / "1"
    d.mkdir(parents=True)
    (d / "transcript.jsonl").write_bytes(
        orjson.dumps(
            {"v": 1, "seq": 0, "t": 1.0, "type": "error", "source": "runner", "message": "the first try crashed"}
        )
        + b"\n"
    )
    c = client(root)
    assert f'href="/run/{ids["main"]}?attempt=1"' in c.get(f"/run/{ids['main']}").text
    page = c.get(f"/run/{ids['main']}?attempt=1").text
    assert "the first try crashed" in page and "earlier attempt 1" in page


def test_report_tables_page_matches_benchctl_report(results) -> None:
    from benchctl.report.build import build_report

    root, _ = results
    page = client(root).get("/report").text
    rep = build_report(root, cache=False)
    for t in rep.tables:
        assert f'<section id="{t.name}"><h2>{t.title}</h2>' in page
    _, rows = rep.table("leaderboard").view()
    assert all(cell.replace("&", "&amp;") in page for cell in rows[0] if cell)


def test_view_command_serves_and_rejects_bad_input(results, tmp_path: Path) -> None:
    import subprocess
    import sys

    import httpx

    root, _ = results
    bad = subprocess.run(
        [sys.executable, "-c", "from benchctl.cli import app; app()", "view", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "not a results directory" in bad.stderr
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = subprocess.run(
            [
                sys.executable,
                "-c",
                "from benchctl.cli import app; app()",
                "view",
                str(root),
                "--port",
                str(busy.getsockname()[1]),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert taken.returncode == 2 and "cannot listen on 127.0.0.1" in taken.stderr
    p = subprocess.Popen(
        [sys.executable, "-c", "from benchctl.cli import app; app()", "view", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", line).group(1)
        r = httpx.get(url, timeout=10)
        assert r.status_code == 200 and "wiki__react__prov-model-a__10m__s0" in r.text
        assert r.headers["content-security-policy"] == CSP
    finally:
        p.terminate()
        p.wait(10)


def test_loader_memo_keeps_the_cache_in_memory_and_sees_changes(results) -> None:
    from benchctl.report.load import CACHE_FILE, load_results

    root, ids = results
    old = 1_000_000_000
    for p in root.rglob("*.json"):
        os.utime(p, (old, old))  # not "racy" (see report/load.py)
    memo: dict = {}
    first = load_results(root, memo=memo)
    assert first.stats["cache_misses"] > 0 and memo and not (root / CACHE_FILE).exists()
    second = load_results(root, memo=memo)
    assert second.stats["cache_misses"] == 0 and second.stats["cache_hits"] == first.stats["cache_misses"]
    meta = root / "runs" / ids["main"] / "meta.json"
    m = orjson.loads(meta.read_bytes())
    m["status"] = "timeout"
    meta.write_bytes(orjson.dumps(m))
    third = load_results(root, memo=memo)
    assert third.stats["cache_misses"] == 1
    assert next(r for r in third.runs if r.run_id == ids["main"]).meta["status"] == "timeout"
    assert not (root / CACHE_FILE).exists()
    # a cache file left by `benchctl report` is read (not written) on the first load
    load_results(root)
    assert (root / CACHE_FILE).exists()
    size = (root / CACHE_FILE).stat().st_mtime_ns
    fresh: dict = {}
    warm = load_results(root, memo=fresh)
    assert warm.stats["cache_hits"] > 0 and (root / CACHE_FILE).stat().st_mtime_ns == size


def test_report_markdown_never_links_or_loads(results) -> None:
    from benchctl.view.render import markdown

    html = str(
        markdown(
            REPORT + "\n[a](https://evil.example/x) <https://evil.example/y> ![i](https://evil.example/z.png) "
            "[j](javascript:alert(1)) <b onmouseover=alert(1)>x</b>"
        )
    )
    assert "<a " not in html and "<img" not in html and "<b " not in html
    assert "&lt;https://evil.example/x&gt;" in html and "[image: i] &lt;https://evil.example/z.png&gt;" in html
    assert "<table>" in html and "<strong>brute-forced</strong>" in html


def _sse_messages(lines):
    """(event, id, data) per server-sent event from an iterator of lines."""
    event, id_, data = None, None, []
    for line in lines:
        if line == "":
            if data:
                yield event, id_, "\n".join(data)
            event, id_, data = None, None, []
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("id: "):
            id_ = line[4:]
        elif line.startswith("data: "):
            data.append(line[6:])


def test_stream_sends_appended_events_then_the_final_status(results) -> None:
    import httpx

    root, ids = results
    rid = ids["running"]
    path = root / "runs" / rid / "transcript.jsonl"
    with sweep_lock(root), serve(root) as base:
        with httpx.stream("GET", f"{base}/run/{rid}/stream?after=3", timeout=30) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            msgs = _sse_messages(r.iter_lines())
            append_events(
                path,
                [
                    {"type": "assistant", "source": "harness", "turn": 2, "text": HOSTILE_EVENT_TEXT},
                    {"type": "tool_call", "source": "harness", "name": "bash", "input": {"command": "ls /data"}},
                ],
            )
            event, id_, data = next(msgs)
            while event != "events":
                event, id_, data = next(msgs)
            html = orjson.loads(data)
            assert id_ == "5" and 'id="seq-3"' in html and 'id="seq-4"' in html and "ls /data" in html
            assert "&lt;script&gt;" in html and "<script>" not in html
            event, _, stats = next(msgs)
            assert event == "stats" and orjson.loads(stats)["turns"] == "2"
            append_events(path, [{"type": "run_end", "source": "runner", "status": "completed"}])
            (root / "runs" / rid / "meta.json").write_bytes(orjson.dumps({"run_id": rid, "status": "completed"}))
            seen = [m for m in msgs]  # the stream ends after `end`
    assert [e for e, _, _ in seen if e != "stats"] == ["events", "end"]
    assert 'id="seq-5"' in orjson.loads(seen[0][2])
    assert orjson.loads(seen[-1][2]) == {"status": "completed"}  # the forged "end" in agent text did nothing
