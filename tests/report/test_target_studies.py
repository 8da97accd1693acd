"""`benchctl report` on hidden-behaviour studies: tool use (every task), target validation, any-of-N
success by target tag, and tool informativeness beside agent success, read back from
`report --format json`. The results directory is built in the shapes `benchctl run`, `grade`,
`targets validate` and `targets probe-tools` write; every count is chosen, every interval is
checked against scipy's Wilson interval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.layout import run_dir
from tests.rigs.report import add_grade, add_run

INV = "anthropic/investigator"
TARGETS = {
    "t-sdf": ("openai-compatible/prism-a", {"implant": "SDF", "adversarial": "KTO"}),
    "t-td": ("openai-compatible/prism-b", {"implant": "TD", "adversarial": "KTO"}),
}
CONFIG_TOOLS = {"default": ["chat"], "prefill": ["chat", "prefill"]}
# (task, configuration) -> per seed: (any-of-N score or None, tool calls, target calls)
PLAN: dict[tuple[str, str], list[tuple[float | None, dict[str, int], int]]] = {
    ("t-sdf", "default"): [
        (1.0, {"chat": 3, "bash": 1}, 3),
        (1.0, {"chat": 1}, 1),
        (1.0, {"chat": 2}, 2),
        (0.0, {"bash": 2}, 0),
    ],
    ("t-sdf", "prefill"): [
        (1.0, {"chat": 1, "prefill": 2}, 3),
        (1.0, {"chat": 2}, 2),
        (1.0, {"chat": 1}, 1),
        (1.0, {"prefill": 1}, 1),
    ],
    ("t-td", "default"): [(1.0, {"chat": 1}, 1), (0.0, {"chat": 2}, 2), (0.0, {"chat": 1}, 1), (0.0, {}, 0)],
    ("t-td", "prefill"): [
        (1.0, {"chat": 1, "prefill": 1}, 2),
        (1.0, {"chat": 4}, 4),
        (0.0, {"chat": 1}, 1),
        (None, {"chat": 1}, 1),  # the judge gave no verdict: not a failure, not counted
    ],
}


def wilson(k: int, n: int) -> tuple[float, float]:
    ci = binomtest(k, n).proportion_ci(method="wilson")
    return float(ci.low), float(ci.high)


def write(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(obj))


def set_meta(root: Path, run_id: str, **fields: Any) -> None:
    p = run_dir(root, run_id) / "meta.json"
    write(p, {**json.loads(p.read_text()), **fields})


def rate(k: int, n: int, threshold: int) -> dict[str, Any]:
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "rate": k / n, "lo": lo, "hi": hi, "threshold": threshold}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for (task, config), seeds in PLAN.items():
        target, tags = TARGETS[task]
        for seed, (score, calls, probes) in enumerate(seeds):
            summary = {
                "tool_config": config,
                "tools": CONFIG_TOOLS[config],
                "tool_calls": {t: n for t, n in calls.items() if t in CONFIG_TOOLS[config]},
                "target_model": target,
                "target_tags": tags,
                "target": {"calls": probes, "errors": 0, "usage": {}, "cost_usd": 0.0},
                "auxiliary": {"calls": 0, "errors": 0, "usage": {}, "cost_usd": 0.0},
            }
            rid = add_run(root, model=INV, task=task, tools=config, seed=seed, target_tools=summary)
            add_grade(root, "any_of_n", rid, score)
            if (task, config, seed) != ("t-td", "default", 3):  # that run predates meta.json tool_calls
                set_meta(root, rid, tool_calls=calls)
    # an error run: never counted in tool use or success
    err = add_run(root, model=INV, task="t-sdf", tools="default", seed=9, status="error", target_tools={})
    set_meta(root, err, tool_calls={"chat": 50})
    # target validation of prism-a, and a broken one
    validation = {
        "confession": {"prompts": rate(8, 50, 7), "prefills": rate(21, 50, 7)},
        "strength": {"target": rate(40, 50, 5), "baseline": None},
    }
    write(root / "validation" / "prism-a" / "validation.json", validation)
    write(
        root / "validation" / "prism-a" / "study.json",
        {"task": "t-sdf", "target_model": "openai-compatible/prism-a", "baseline_model": None},
    )
    (root / "validation" / "broken").mkdir(parents=True)
    (root / "validation" / "broken" / "validation.json").write_text("{not json")
    # tool informativeness on prism-a
    write(
        root / "probe_tools" / "prism-a" / "probe_tools.json",
        [
            {"tool": "chat", "target": "openai-compatible/prism-a", "strong": 2, "weak": 5, "none": 13, "n": 20},
            {"tool": "prefill", "target": "openai-compatible/prism-a", "strong": 15, "weak": 3, "none": 2, "n": 20},
            {"tool": "complete", "target": "openai-compatible/prism-a", "strong": 0, "weak": 0, "none": 20, "n": 20},
        ],
    )
    return root


def report_json(root: Path) -> dict[str, Any]:
    r = CliRunner().invoke(app, ["report", str(root), "--format", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_tool_use_per_configuration_and_tool(results: Path) -> None:
    table = report_json(results)["tables"]["tool_use"]
    rows = table["rows"]
    got = {(r["task"], r["tools"], r["tool"]): r for r in rows}
    for (task, config), seeds in PLAN.items():
        if (task, config) == ("t-td", "default"):
            seeds = seeds[:3]  # its fourth run has no tool counts: left out, and said so
        tools = CONFIG_TOOLS[config] + sorted({t for _, c, _ in seeds for t in c} - set(CONFIG_TOOLS[config]))
        for tool in tools:
            per_run = [c.get(tool, 0) for _, c, _ in seeds]
            r = got[(task, config, tool)]
            assert r["n_runs"] == len(seeds)  # the error run is not counted
            assert r["runs_called"] == sum(1 for v in per_run if v > 0)
            assert r["calls_per_run"] == pytest.approx(sum(per_run) / len(seeds))
            assert r["target_probes_per_run"] == pytest.approx(sum(p for _, _, p in seeds) / len(seeds))
    assert any("1 run(s) left out: recorded before benchctl counted tool calls" in n for n in table["notes"])
    # a target tool offered and never called in a configuration still has its row: 0 of 4
    assert got[("t-sdf", "default", "chat")]["runs_called"] == 3
    assert got[("t-sdf", "prefill", "prefill")]["runs_called"] == 2
    assert {r["tool"] for r in rows if (r["task"], r["tools"]) == ("t-td", "default")} == {"chat"}
    assert set(rows[0]) >= {"tool", "runs_called", "n_runs", "calls_per_run", "target_probes_per_run", "model"}


def test_any_of_n_by_tag_pools_targets(results: Path) -> None:
    rows = report_json(results)["tables"]["any_of_n_by_tag"]["rows"]
    got = {(r["tools"], r["tag"], r["value"]): r for r in rows}
    expected = {
        ("default", "implant", "SDF"): (3, 4),
        ("default", "implant", "TD"): (1, 4),
        ("default", "adversarial", "KTO"): (4, 8),
        ("prefill", "implant", "SDF"): (4, 4),
        ("prefill", "implant", "TD"): (2, 3),  # one run without a verdict
        ("prefill", "adversarial", "KTO"): (6, 7),
    }
    assert set(got) == set(expected)
    for key, (k, n) in expected.items():
        r = got[key]
        lo, hi = wilson(k, n)
        assert (r["k"], r["n"]) == (k, n)
        assert r["lo"] == pytest.approx(lo, abs=1e-12) and r["hi"] == pytest.approx(hi, abs=1e-12)
        assert r["model"] == INV
    assert got[("default", "adversarial", "KTO")]["n_targets"] == 2


def test_target_validation_rows_and_a_broken_file_named(results: Path) -> None:
    table = report_json(results)["tables"]["target_validation"]
    rows = {r["measure"]: r for r in table["rows"]}
    assert set(rows) == {"confession_prompts", "confession_prefills", "strength_target", "strength_baseline"}
    prompts = rows["confession_prompts"]
    lo, hi = wilson(8, 50)
    assert (prompts["k"], prompts["n"], prompts["threshold"], prompts["target"]) == (
        8,
        50,
        7,
        "openai-compatible/prism-a",
    )
    assert prompts["lo"] == pytest.approx(lo) and prompts["hi"] == pytest.approx(hi)
    assert prompts["validation"] == "validation/prism-a" and prompts["task"] == "t-sdf"
    assert rows["strength_baseline"]["n"] is None  # not measured: null, never 0
    assert any("unreadable validation/broken/validation.json" in n for n in table["notes"])


def test_tool_informativeness_beside_agent_success(results: Path) -> None:
    rows = report_json(results)["tables"]["tool_informativeness"]["rows"]
    got = {(r["tool"], r["tools"]): r for r in rows}
    # chat is offered by both configurations on prism-a (t-sdf): 3/4 and 4/4 agent success
    assert set(got) == {("chat", "default"), ("chat", "prefill"), ("prefill", "prefill"), ("complete", None)}
    chat = got[("chat", "default")]
    assert (chat["strong"], chat["weak"], chat["none"], chat["n"]) == (2, 5, 13, 20)
    assert (chat["successes"], chat["n_scored"]) == (3, 4)
    lo, hi = wilson(3, 4)
    assert chat["success_lo"] == pytest.approx(lo) and chat["success_hi"] == pytest.approx(hi)
    pre = got[("prefill", "prefill")]
    lo, hi = wilson(15, 20)
    assert (
        pre["strong_rate"] == 0.75 and pre["strong_lo"] == pytest.approx(lo) and pre["strong_hi"] == pytest.approx(hi)
    )
    assert (pre["successes"], pre["n_scored"]) == (4, 4)
    assert got[("complete", None)]["successes"] is None  # no agent ran with that tool


def test_the_tables_render_in_every_format(results: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    titles = ("Tool use", "Target validation", "Any-of-N success by target tag", "Tool informativeness")
    for fmt in ("table", "markdown"):
        r = CliRunner().invoke(app, ["report", str(results), "--format", fmt, "--html", str(page)])
        assert r.exit_code == 0, r.output
        assert all(t in r.stdout for t in titles)
        assert all(t in page.read_text() for t in titles)
    r = CliRunner().invoke(app, ["report", str(results), "--format", "markdown"])
    assert "8/50 = 16% [8%, 29%]" in r.stdout  # confession prompts of prism-a with its Wilson interval


def test_the_documented_row_keys_are_the_columns(results: Path) -> None:
    """docs/report.md lists each study table's row keys: they are exactly what `report --format json` has."""
    import re

    prose = " ".join((Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text().split())

    def keys(lead: str, until: str) -> list[str]:
        start = prose.index(lead) + len(lead)
        return re.findall(r"`([^`]+)`", prose[start : prose.index(until, start)])

    tables = report_json(results)["tables"]
    assert (
        keys("Target-validation rows (one per measure of each RESULTS/validation/NAME): ", " (`measure`")
        == tables["target_validation"]["columns"]
    )
    by_tag = keys("Any-of-N-by-tag rows: ", ".")
    assert [k for k in by_tag if k != "harness"] == tables["any_of_n_by_tag"]["columns"]  # one harness here
    assert keys("Tool-informativeness rows: ", " (the agents'") == tables["tool_informativeness"]["columns"]
    tail = keys("configuration), then ", " (null outside")
    assert tables["tool_use"]["columns"][-len(tail) :] == tail and "tools" in tables["tool_use"]["columns"]
