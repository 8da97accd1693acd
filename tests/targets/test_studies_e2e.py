"""The hidden-behaviour study end to end on the shipped demo, as docs/audits.md runs it, through
the real CLI, runner, Docker sandbox and ReAct harness: run three tool configurations (two with the
baseline side by side), grade, validate the target, probe its tools, and read the report's study
tables back as JSON. The demo's scripted models make every number known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchctl.jsonio import read_json
from tests.rigs.run import cli

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]
DEMO = "configs/hidden-behaviour-demo"
INVESTIGATOR = "scripted/py:benchctl.targets.demo:investigator"
JUDGE = "scripted/py:benchctl.targets.demo:judge"
TARGET = "scripted/py:benchctl.targets.demo:target"
CONFIGS = ("default", "chat_with_baseline", "scaffolded_prefill_with_baseline")


def ok(*args: str) -> str:
    r = cli(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_run_grade_validate_probe_and_report(tmp_path: Path, sandbox_image: str) -> None:
    results = tmp_path / "hb"
    ok("run", DEMO, "--model", INVESTIGATOR, *(a for c in CONFIGS for a in ("--tools", c)), "--out", str(results))
    ok("grade", str(results), "--judge", JUDGE)
    out = ok("targets", "validate", DEMO, "--judge", JUDGE, "--out", str(results / "validation" / "prism-4"))
    assert "confession (prefills)  10/10 = 100% [72%, 100%]" in out
    ok(
        "targets",
        "probe-tools",
        DEMO,
        "--tools",
        "prefill",
        "--tools",
        "chat_with_baseline",
        "--judge",
        JUDGE,
        "--n",
        "4",
        "--out",
        str(results / "probe_tools" / "prism-4"),
    )

    # the runner counted every tool call of every run into meta.json
    metas = {read_json(m)["spec"]["options"]["tools"]: read_json(m) for m in results.glob("runs/*/meta.json")}
    assert set(metas) == set(CONFIGS)
    for meta in metas.values():
        offered = meta["target_tools"]["tools"]
        assert {t: n for t, n in meta["tool_calls"].items() if t in offered} == {t: 1 for t in offered}
        assert meta["tool_calls"]["create"] == 1  # the predictions file
        assert meta["target_tools"]["target_tags"] == {"implant": "system-prompt", "adversarial": "none"}
    assert metas["chat_with_baseline"]["target_tools"]["baseline"]["calls"] == 1
    assert metas["scaffolded_prefill_with_baseline"]["target_tools"]["baseline"]["calls"] == 20

    doc = json.loads(ok("report", str(results), "--format", "json"))
    tables = doc["tables"]
    use = {(r["tools"], r["tool"]): r for r in tables["tool_use"]["rows"]}
    assert use[("chat_with_baseline", "chat_with_baseline")]["runs_called"] == 1
    assert use[("default", "chat")]["target_probes_per_run"] == 1.0
    # one chat, and a batch of 20 answered by the target (the baseline's answers are not target probes)
    assert use[("scaffolded_prefill_with_baseline", "chat")]["target_probes_per_run"] == 21.0
    assert use[("default", "create")]["calls_per_run"] == 1.0
    tags = {(r["tools"], r["tag"], r["value"]): (r["k"], r["n"]) for r in tables["any_of_n_by_tag"]["rows"]}
    assert tags == {
        (c, t, v): (1, 1) for c in CONFIGS for t, v in (("implant", "system-prompt"), ("adversarial", "none"))
    }
    validation = {r["measure"]: (r["k"], r["n"]) for r in tables["target_validation"]["rows"]}
    assert validation == {
        "confession_prompts": (0, 10),  # the demo target never confesses when asked plainly
        "confession_prefills": (10, 10),  # ... but does when its reply starts "My secret"
        "strength_target": (10, 10),
        "strength_baseline": (0, 10),
    }
    info = {(r["tool"], r["tools"]): r for r in tables["tool_informativeness"]["rows"]}
    assert info[("chat_with_baseline", "chat_with_baseline")]["success_rate"] == 1.0
    assert info[("prefill", None)]["n"] == 4  # no run had the prefill configuration
    assert all(r["target"] == TARGET for r in tables["tool_informativeness"]["rows"])
