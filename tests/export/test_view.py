"""An Inspect export opened the way researchers open it: `inspect view --log-dir OUT` on loopback,
driven by a real headless Chromium. The viewer lists the log and shows a sample's transcript
(model calls, tool calls, benchctl's notices) and a run's follow-up phases as sections of their
own; every answer's reasoning (visible, a summary, withheld) in its turn; agent-written HTML is
shown as text and runs nothing; neither the server nor the page reaches beyond 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rigs.browser import browser, screenshot  # noqa: F401  (fixture)
from tests.rigs.export import FOLLOWUPS, MARKDOWN, followup_run, grade, reasoning_run, rich_run
from tests.rigs.run import REPO, cli

pytestmark = pytest.mark.browser

# `inspect view` with an audit hook that logs every socket the server process binds, connects or
# resolves (Python's audit events observe the real calls; nothing is replaced).
AUDITED_INSPECT = """
import sys
log = open(sys.argv[1], "a", buffering=1)
def hook(event, args):
    if event == "socket.getaddrinfo":
        log.write(f"{event}\\t{args[0]}\\n")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg") and len(args) > 1 \\
            and args[1] is not None:
        address = args[1]
        log.write(f"{event}\\t{address[0] if isinstance(address, tuple) else address}\\n")
sys.addaudithook(hook)
sys.argv = ["inspect"] + sys.argv[2:]
from inspect_ai._cli.main import main
main()
"""
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    base = tmp_path_factory.mktemp("export-view")
    run = rich_run(base / "results")
    grade(base / "results", run.name, "coverage", 0.5, items=[{"id": "F1", "score": 0.75, "reason": "found it"}])
    followup_run(base / "results")  # another configuration (task fu): its own log
    for wire_api in ("anthropic_messages", "openai_responses"):  # a model that thinks: a log per wire
        reasoning_run(base / "results", wire_api)
    out = base / "logs"
    r = cli("export", str(base / "results"), "--to", "inspect", "-o", str(out))
    assert r.returncode == 0, r.stderr
    audit = base / "sockets.log"
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            AUDITED_INSPECT,
            str(audit),
            "view",
            "start",
            "--log-dir",
            str(out),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError(f"inspect view did not start: {proc.stdout.read().decode()[-2000:]}") from None
                time.sleep(0.5)
        yield url, out, audit
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_inspect_view_lists_the_export_and_shows_a_sample_transcript(served: tuple[str, Path, Path], browser) -> None:
    url, out, audit = served
    (log,) = out.glob("t__*.eval")
    page = browser.new_context(viewport={"width": 1400, "height": 2400}).new_page()
    requests: list[str] = []
    not_found: list[str] = []
    page_errors: list[str] = []
    dialogs: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.on("response", lambda resp: not_found.append(resp.url) if resp.status == 404 else None)
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(url)
        page.get_by_text("scripted/m.json").first.wait_for(timeout=60_000)  # the log list
        page.goto(f"{url}#/logs/{log.name}")
        page.get_by_text("Model call", exact=False).first.wait_for(timeout=60_000)  # the transcript
        page.wait_for_timeout(1000)
        text = page.inner_text("body")
        lowered = text.lower()
        assert "investigate /data." in lowered  # the sample's input
        assert "benchctl notice time" in lowered and "[benchctl] time remaining: 50s." in lowered
        assert "bash" in lowered and "ls /data" in text  # a tool call
        # agent-written markdown, HTML and JSON are shown literally (the log is marked untrusted), and
        # nothing in them ran or loaded
        assert MARKDOWN in text
        assert "<script>alert(1)</script>" in text and 'end"}]},{"injected": true}' in text
        assert page.locator('a[href^="http://example.com"]').count() == 0 and page.locator('img[src="x"]').count() == 0
        assert dialogs == [] and page_errors == []
        assert page.locator("script", has_text="alert(1)").count() == 0
    except BaseException:
        screenshot(page, "export-inspect-view")
        raise
    finally:
        page.context.close()
    # the page loaded nothing from beyond the server; the only 404 is the viewer asking for an
    # optional flow file
    assert requests and all(u.startswith(url) for u in requests), [u for u in requests if not u.startswith(url)]
    assert all("/api/flow" in u for u in not_found), not_found
    # the server process itself never reached (or even resolved) anything but loopback
    calls = [line.split("\t", 1) for line in audit.read_text().splitlines()]
    assert calls and all(host in LOOPBACK or host.startswith("/") for _, host in calls), calls


def test_inspect_view_shows_each_follow_up_phase_as_a_section_of_its_own(
    served: tuple[str, Path, Path], browser
) -> None:
    url, out, _ = served
    (log,) = out.glob("fu__*.eval")
    page = browser.new_context(viewport={"width": 1400, "height": 2400}).new_page()
    page_errors: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    try:
        page.goto(f"{url}#/logs/{log.name}")
        page.get_by_text("Model call", exact=False).first.wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        lines = [line.strip().lower() for line in page.inner_text("body").splitlines()]
        # a section per phase, in order, each holding its own model calls and, for a follow-up, its prompt
        heads = [i for i, line in enumerate(lines) if line.startswith("solver: ")]
        assert [lines[i] for i in heads] == ["solver: main", "solver: followup-1", "solver: followup-2"]
        main, first, second = (lines[a:b] for a, b in zip(heads, heads[1:] + [len(lines)]))
        assert sum(x.startswith("model call") for x in main) == 2 and "ls /data" in main
        for section, prompt in ((first, FOLLOWUPS[0]), (second, FOLLOWUPS[1])):
            assert sum(x.startswith("model call") for x in section) == 1 and prompt.lower() in section
        assert FOLLOWUPS[0].lower() not in main and FOLLOWUPS[1].lower() not in first
        # ... and the transcript's outline lists them with their turns
        outline = lines[: heads[0]]
        assert outline[-6:] == ["main", "2 turns", "followup-1", "1 turn", "followup-2", "1 turn"]
        assert page_errors == []
    except BaseException:
        screenshot(page, "export-inspect-view-phases")
        raise
    finally:
        page.context.close()


@pytest.mark.parametrize("wire_api, title", [("anthropic_messages", ""), ("openai_responses", " (Summary)")])
def test_inspect_view_shows_each_answers_reasoning_in_its_turn(
    served: tuple[str, Path, Path], browser, wire_api: str, title: str
) -> None:
    url, out, _ = served
    (log,) = out.glob(f"think__*{wire_api}.eval")
    page = browser.new_context(viewport={"width": 1400, "height": 2400}).new_page()
    page_errors: list[str] = []
    dialogs: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(f"{url}#/logs/{log.name}")
        page.get_by_text("Model call", exact=False).first.wait_for(timeout=60_000)
        page.wait_for_timeout(1000)
        lines = [line.strip() for line in page.inner_text("body").splitlines()]
        text = "\n".join(lines)
        heads = [i for i, line in enumerate(lines) if line.upper().startswith("MODEL CALL")]
        first, side, second, last = (lines[a:b] for a, b in zip(heads, heads[1:] + [len(lines)]))
        # each model call shows its answer with the reasoning before the text: visible or a summary,
        # a withheld block said to be encrypted (its opaque data is not shown), the final answer's too
        reasoning = f"REASONING{title.upper()}"
        answer = first[first.index("ASSISTANT") + 1 :]
        assert answer[:5] == [
            reasoning,
            "Start with a listing.",
            "REASONING",
            "Reasoning encrypted by model provider.",
            "Looking.",
        ]
        assert "redacted1" not in text and "enc1b" not in text
        assert reasoning not in side  # the side call did not think: nothing is shown for it
        assert last[last.index("ASSISTANT") + 1 :][:3] == [reasoning, "Enough evidence.", "Final answer."]
        # agent-written reasoning is shown as text: nothing in it ran
        assert reasoning in second and "<script>alert(1)</script>" in text
        assert dialogs == [] and page_errors == [] and page.locator("script", has_text="alert(1)").count() == 0
    except BaseException:
        screenshot(page, f"export-inspect-view-reasoning-{wire_api}")
        raise
    finally:
        page.context.close()
