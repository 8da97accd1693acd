"""Bad values in task files, sweep files and flags are refused by the real CLI before anything
starts (exit 2, nothing written), and every message names where the value came from: the file
and its key, or the flag the user passed, never a flag the user did not pass (no Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rigs.run import cli

DEMO_MODEL = "scripted/configs/demo/investigator.json"
TASK = 'name = "t"\ninstructions = "Investigate."\n'


def _task(tmp: Path, extra: str = "") -> Path:
    task = tmp / "task"
    task.mkdir(exist_ok=True)
    budgets = "" if extra.startswith("budgets") else 'budgets = ["1m"]\n'
    (task / "task.toml").write_text(TASK + budgets + extra)
    return task


def _sweep(tmp: Path, body: str, task: str = "task") -> Path:
    """A sweep file beside a valid task (its `task` key relative to the file, as documented)."""
    _task(tmp)
    sweep = tmp / "sweep.toml"
    sweep.write_text(f'task = "{task}"\nmodels = ["{DEMO_MODEL}"]\n' + body)
    return sweep


def _refused(tmp: Path, args: list[str]) -> str:
    out = tmp / "res"
    r = cli("run", *args, "--out", str(out), timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert not out.exists()  # nothing written
    return r.stderr


# (task.toml additions, the file key named, a word of the fix)
TASK_CASES = [
    ('budgets = ["0s"]\n', "budgets", "10m"),
    ('[[followups]]\nprompt = "More."\nbudget = "0s"\n', "followups[0].budget", "10m"),
    ('[limits]\nmemory = "lots"\n', "limits.memory", '"4g"'),
    ('[limits]\nmemory = "999t"\n', "limits.memory", "at most"),  # more than this machine has
    ("[limits]\npids = -5\n", "limits.pids", "32"),
    ("[limits]\ncpus = 0\n", "limits.cpus", "positive"),
    ("[limits]\ncpus = 100000\n", "limits.cpus", "at most"),
    ("[harness_options]\ntool_timeout = 0\n", "harness_options.tool_timeout", "tool_timeout = 120"),
    ('[harness_options.react]\ntool_timeout = "2m"\n', "harness_options.react.tool_timeout", "tool_timeout = 120"),
]


@pytest.mark.parametrize(
    "extra, key, fix_word", TASK_CASES, ids=[c[1] + "-" + c[0].split("=")[-1].strip()[:8] for c in TASK_CASES]
)
def test_task_file_values_are_blamed_on_the_task_file(tmp_path: Path, extra: str, key: str, fix_word: str) -> None:
    task = _task(tmp_path, extra)
    err = _refused(tmp_path, [str(task), "--model", DEMO_MODEL])
    assert f"{task / 'task.toml'}: key `{key}`" in err and "Fix:" in err and fix_word in err, err
    assert not [flag for flag in ("--budget", "--harness", "--model", "--tools") if flag in err], err


# (sweep file lines, the key named, what the message must also say)
SWEEP_CASES = [
    ('budgets = ["soon"]\n', "budgets", "not a duration"),
    ('budgets = ["0s"]\n', "budgets", "positive"),
    ('models = ["acme/m1"]\n', "models", "unknown provider 'acme'"),
    ('models = ["scripted/nope.json"]\n', "models", "nope.json"),
    ('harnesses = ["autogpt"]\n', "harnesses", "unknown harness 'autogpt'"),
    ('variants = ["nope"]\n', "variants", "'nope'"),
    ('fallback = "acme/m2"\n', "fallback", "unknown provider 'acme'"),
    ('tools = ["prefill"]\n', "tools", "declares no [target]"),
    ("concurrency = true\n", "concurrency", ">= 1"),
    ("seeds = 0\n", "seeds", ">= 1"),
    ("[harness_options]\ntool_timeout = -1\n", "harness_options.tool_timeout", ">= 1"),
]


@pytest.mark.parametrize("body, key, says", SWEEP_CASES, ids=[c[0].strip()[:20] for c in SWEEP_CASES])
def test_sweep_file_values_are_blamed_on_the_sweep_file(tmp_path: Path, body: str, key: str, says: str) -> None:
    _task(tmp_path)
    sweep = tmp_path / "sweep.toml"
    models = "" if body.startswith("models") else f'models = ["{DEMO_MODEL}"]\n'
    sweep.write_text('task = "task"\n' + models + body)
    err = _refused(tmp_path, ["--sweep", str(sweep)])
    assert f"{sweep}: key `{key}`" in err and says in err, err
    flag = {
        "budgets": "--budget",
        "models": "--model",
        "harnesses": "--harness",
        "variants": "--variant",
        "fallback": "--fallback",
        "tools": "--tools",
        "concurrency": "--concurrency",
        "seeds": "--seeds",
        "harness_options.tool_timeout": "--harness",
    }[key]
    assert flag not in err, err


def test_a_sweep_files_task_that_does_not_exist_is_the_sweep_files_error(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, "", task="no-such-task")
    err = _refused(tmp_path, ["--sweep", str(sweep)])
    assert f"{sweep}: key `task`" in err and "no-such-task" in err and "Fix:" in err, err


@pytest.mark.parametrize(
    "args, says",
    [
        (["--budget", "0s"], "--budget: budget must be positive"),
        (["--budget", "soon"], "--budget: not a duration"),
        (["--seeds", "0"], "--seeds: seeds must be >= 1"),
        (["--model", "acme/m1"], "--model: unknown provider 'acme'"),
        (["--fallback", "acme/m2"], "--fallback: unknown provider 'acme'"),
        (["--harness", "autogpt"], "--harness: unknown harness 'autogpt'"),
        (["--tools", "prefill"], "--tools prefill: the task"),
    ],
)
def test_flags_keep_naming_the_flag_even_over_a_sweep_file(tmp_path: Path, args: list[str], says: str) -> None:
    """A flag given beside a sweep file overrides it, so the flag is what the message names."""
    sweep = _sweep(tmp_path, 'budgets = ["1m"]\n')
    err = _refused(tmp_path, ["--sweep", str(sweep), *args])
    assert says in err and "sweep.toml" not in err, err


@pytest.mark.docker  # the image is looked up in the Docker Engine
def test_a_task_that_names_a_missing_image_is_blamed_on_its_image_key(tmp_path: Path) -> None:
    task = _task(tmp_path, 'image = "benchctl-no-such-image:never"\n')
    err = _refused(tmp_path, [str(task), "--model", DEMO_MODEL])
    assert f"{task / 'task.toml'}: key `image`: sandbox image benchctl-no-such-image:never not found" in err, err
