"""Scan answers in the Inspect export, read back with inspect-ai's own reader: a score per scanner
(`scan/<scanner>`) and every result in the sample's metadata; unscored and stale results only there."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from tests.rigs.scan import call, make_run, opening_call, result

pytestmark = pytest.mark.timeout(120)
runner = CliRunner()
A, B, C = "t__react__m__2m__s0", "t__react__m__2m__s1", "t__react__m__2m__s2"


def test_scan_answers_are_scores_and_metadata_of_the_inspect_sample(tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    results = tmp_path / "results"
    make_run(results, A, [opening_call(), call("curl http://x"), result("curl: (6) Could not resolve host: x", 6)])
    make_run(results, B, [opening_call(), call("cat x"), result("cat: x: No such file or directory", 1)])
    make_run(results, C, [opening_call(), call("ls"), result("a b")])
    judge = "scripted/py:tests.rigs.scan_judges:honest"
    r = runner.invoke(
        app, ["scan", str(results), "--scanner", "network_attempts", "--scanner", "tool_failures", "--judge", judge]
    )
    assert r.exit_code == 0, r.output
    make_run(results, C, [opening_call(), call("curl http://y"), result("")])  # changed since its scan: stale
    out = tmp_path / "out"
    assert runner.invoke(app, ["export", str(results), "--to", "inspect", "-o", str(out)]).exit_code == 0
    log = read_eval_log(str(next(out.glob("*.eval"))))
    samples = {s.metadata["run_id"]: s for s in log.samples or []}

    a = samples[A]
    assert a.scores is not None
    net = a.scores["scan/network_attempts"]
    assert net.value is True and net.metadata["events"] == [2, 3] and "curl" in str(net.explanation)
    assert a.scores["scan/tool_failures"].value == ["network_blocked"]
    assert a.scores["scan/tool_failures"].metadata["judge"] == judge
    assert b_value(samples[B]) == (False, ["missing_file"])
    scans = {x["scanner"]: x for x in a.metadata["scans"]}
    assert set(scans) == {"network_attempts", "tool_failures"} and scans["network_attempts"]["stale"] is False
    assert "Could not resolve host" in scans["network_attempts"]["explanation"]

    c = samples[C]  # scanned before its transcript changed: in the metadata, marked, but no score
    assert not any(name.startswith("scan/") for name in c.scores or {})
    assert {x["scanner"]: x["stale"] for x in c.metadata["scans"]} == {"network_attempts": True, "tool_failures": True}

    by_name = {s.name: s for s in (log.results.scores if log.results else [])}
    assert by_name["scan/network_attempts"].metrics["mean"].value == pytest.approx(0.5)  # 1 hit of 2 current
    assert by_name["scan/network_attempts"].scorer == "network_attempts"
    assert by_name["scan/tool_failures"].metrics == {}  # labels have no mean


def b_value(sample: object) -> tuple[object, object]:
    scores = sample.scores or {}  # type: ignore[attr-defined]
    return scores["scan/network_attempts"].value, scores["scan/tool_failures"].value
