"""Sweep expansion, run ids, resume decisions and up-front validation (no Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchctl.harness import HARNESSES, create_harness
from benchctl.jsonio import write_json_atomic
from benchctl.layout import run_dir
from benchctl.plugins import UnknownPlugin
from benchctl.run.runner import followup_name, move_attempt_aside, plan, resume_action
from benchctl.run.sweep import SweepConfig, SweepError, expand, load_sweep_file, seeds_list
from tests.rigs.run import REPO, cli

DEMO_MODEL = "scripted/configs/demo/investigator.json"


def cfg(**kw: object) -> SweepConfig:
    base = dict(
        task_dir=Path("/t"),
        models=["anthropic/a", "openai/b"],
        harnesses=["react"],
        budgets=["10m", "30m"],
        seeds=[0, 1, 2],
    )
    base.update(kw)
    return SweepConfig(**base)  # type: ignore[arg-type]


def test_expand_is_the_full_product_with_unique_ids() -> None:
    specs = expand(cfg(variants=[None, "swap"]), "logs", ["10m", "30m"])
    assert len(specs) == 2 * 1 * 2 * 2 * 3
    assert len({s.run_id for s in specs}) == len(specs)
    s = specs[0]
    assert s.run_id == "logs__react__anthropic-a__10m__s0"
    assert s.budget_s == 600 and s.variant is None
    assert any(x.run_id == "logs__react__openai-b__30m__swap__s2" for x in specs)


def test_expand_dedupes_repeated_models_and_merges_options() -> None:
    specs = expand(
        cfg(models=["anthropic/a", "anthropic/a"], harness_options={"x": 2}),
        "t",
        ["1m"],
        options_for=lambda h: {"reasoning_effort": "high", "x": 1},
    )
    assert len(specs) == 3
    assert specs[0].options == {"reasoning_effort": "high", "x": 2}


def test_seeds() -> None:
    assert seeds_list(3) == [0, 1, 2]
    assert seeds_list([5, 7]) == [5, 7]
    for bad in (0, [], [1, 1], True, "3"):
        with pytest.raises(SweepError):
            seeds_list(bad)  # type: ignore[arg-type]


def test_sweep_file(tmp_path: Path) -> None:
    f = tmp_path / "sweep.toml"
    f.write_text(
        'task = "../task"\nmodels = ["scripted/x.json"]\nbudgets = ["1m"]\nseeds = 2\nconcurrency = 4\n'
        'out = "res"\nvariants = ["base", "swap"]\n'
    )
    c = load_sweep_file(f)
    assert c.task_dir == (tmp_path.parent / "task").resolve()
    assert c.seeds == [0, 1] and c.concurrency == 4 and c.out == (tmp_path / "res").resolve()
    assert c.variants == [None, "swap"] and c.harnesses == ["react"]
    f.write_text('task = "t"\nmodels = ["m/x"]\nmodel = "typo"\n')
    with pytest.raises(SweepError, match="`model`: unknown key"):
        load_sweep_file(f)
    f.write_text('task = "t"\nmodels = ["m/x"]\nfallback = ["openai/gpt-5"]\n')  # was a crash later on
    with pytest.raises(SweepError, match="`fallback`: must be a string"):
        load_sweep_file(f)


def test_command_line_options_override_the_sweep_file(tmp_path: Path) -> None:
    from benchctl.run.config import resolve_config

    f = tmp_path / "sweep.toml"
    f.write_text(f'task = "{REPO}/configs/demo"\nmodels = ["{DEMO_MODEL}"]\nbudgets = ["2m"]\nout = "res"\n')
    r = resolve_config(
        task=None,
        models=[],
        harnesses=["react"],
        budgets=["30s"],
        seeds=1,
        out=None,
        concurrency=1,
        fallback=DEMO_MODEL,
        variants=["contoso"],
        sweep=f,
    )
    assert [(s.budget, s.variant, s.fallback) for s in r.specs] == [("30s", "contoso", DEMO_MODEL)]
    assert r.out == (tmp_path / "res").resolve() and r.sweep.concurrency == 1


def test_seeds_and_concurrency_come_from_the_sweep_file_unless_given(tmp_path: Path) -> None:
    from benchctl.run.config import resolve_config

    f = tmp_path / "sweep.toml"
    f.write_text(
        f'task = "{REPO}/configs/demo"\nmodels = ["{DEMO_MODEL}"]\nbudgets = ["2m"]\nseeds = 3\n'
        f'concurrency = 4\nout = "res"\n'
    )
    common = dict(task=None, models=[], harnesses=[], budgets=[], out=None, fallback=None, variants=[], sweep=f)
    r = resolve_config(seeds=None, concurrency=None, **common)
    assert sorted(s.seed for s in r.specs) == [0, 1, 2] and r.sweep.concurrency == 4
    r = resolve_config(seeds=1, concurrency=2, **common)
    assert [s.seed for s in r.specs] == [0] and r.sweep.concurrency == 2


def test_resume_decisions(tmp_path: Path) -> None:
    specs = expand(cfg(models=["anthropic/a"], budgets=["1m"], seeds=[0, 1, 2, 3, 4]), "t", ["1m"])
    done, errored, torn, partial, new = (run_dir(tmp_path, s.run_id) for s in specs)
    write_json_atomic(done / "meta.json", {"status": "timeout"})
    write_json_atomic(errored / "meta.json", {"status": "error"})
    torn.mkdir(parents=True)
    (torn / "meta.json").write_text('{"status": "compl')  # killed mid-write of a non-atomic writer
    partial.mkdir(parents=True)
    (partial / "transcript.jsonl").write_text('{"type": "run_start"}\n')
    assert [a for _, a in plan(tmp_path, specs)] == ["skip", "redo", "redo", "redo", "new"]
    assert resume_action(new) == "new"


def test_move_attempt_aside_numbers_attempts(tmp_path: Path) -> None:
    d = tmp_path / "run"
    for n in (1, 2):
        (d / "artifacts").mkdir(parents=True)
        (d / "transcript.jsonl").write_text(f"attempt {n}\n")
        dest = move_attempt_aside(d)
        assert dest == d / "attempts" / str(n)
        assert (dest / "transcript.jsonl").read_text() == f"attempt {n}\n"
        assert sorted(p.name for p in d.iterdir()) == ["attempts"]
    assert resume_action(d) == "new"


def test_followup_names() -> None:
    assert followup_name("report.md", 1) == "report.followup-1.md"
    assert followup_name("out/issues.json", 2) == "out/issues.followup-2.json"
    assert followup_name("notes", 1) == "notes.followup-1"


def test_registry() -> None:
    assert HARNESSES.names() == ["claude-code", "codex", "react"]
    assert create_harness("react").name == "react"
    with pytest.raises(UnknownPlugin, match="known harnesses: claude-code, codex, react"):
        create_harness("autogpt")


@pytest.mark.parametrize(
    "args, expect",
    [
        (["configs/demo", "--model", DEMO_MODEL, "--harness", "autogpt"], "unknown harness 'autogpt'"),
        (["configs/demo", "--model", "acme/m1"], "unknown provider 'acme'"),
        (["configs/demo", "--model", "scripted/nope.json"], "nope.json"),
        (["configs/demo", "--model", DEMO_MODEL, "--budget", "soon"], "not a duration"),
        (["configs/demo", "--model", DEMO_MODEL, "--variant", "nope"], "'nope'"),
        (["configs/nope", "--model", DEMO_MODEL], "no task file"),
        (["configs/demo", "--model", DEMO_MODEL, "--progress", "jsno"], "--progress 'jsno': use one of"),
    ],
)
def test_cli_rejects_bad_input_before_writing_anything(tmp_path: Path, args: list[str], expect: str) -> None:
    out = tmp_path / "res"
    r = cli("run", *args, "--out", str(out), timeout=120)
    assert r.returncode != 0
    assert expect in r.stderr, r.stderr
    assert not out.exists()


def test_cli_missing_key_is_explained(tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
    r = cli("run", "configs/demo", "--model", "anthropic/claude-x", "--out", str(tmp_path / "r"), env=env, timeout=120)
    assert r.returncode != 0 and "export ANTHROPIC_API_KEY" in r.stderr


def test_cli_malformed_task_file(tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "task.toml").write_text('name = "x"\ninstructions = "go"\n[early_exit]\nfraction = 2\n')
    r = cli("run", str(tmp_path / "task"), "--model", DEMO_MODEL, "--out", str(tmp_path / "r"), timeout=120)
    assert r.returncode != 0
    assert "task.toml" in r.stderr and "`early_exit.fraction`" in r.stderr and "Fix:" in r.stderr
    assert not (tmp_path / "r").exists()
