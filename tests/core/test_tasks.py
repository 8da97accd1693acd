"""Task files: parsing, validation messages, variants and content hashes (no Docker)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchctl.sandbox.images import DEFAULT_TAG
from benchctl.tasks import TaskError, apply_variant, load_task, prepare_data, task_hash

REPO = Path(__file__).resolve().parents[2]


def write_task(tmp: Path, body: str, data: dict[str, str] | None = None) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "task.toml").write_text(body)
    if data is not None:
        (tmp / "data").mkdir(exist_ok=True)
        for name, text in data.items():
            (tmp / "data" / name).write_text(text)
    return tmp


MINIMAL = 'name = "t"\ninstructions = "Investigate."\ndata = "data"\n'


def test_minimal_task_defaults(tmp_path: Path) -> None:
    t = load_task(write_task(tmp_path, MINIMAL, {"a.log": "x\n"}))
    assert t.name == "t" and t.instructions == "Investigate."
    assert t.data_dir == (tmp_path / "data").resolve()
    assert t.artifacts == ["report.md"] and t.image == DEFAULT_TAG  # see the $BENCHCTL_IMAGE test below
    assert t.policies.early_exit is not None and t.policies.early_exit.fraction == 0.75
    assert t.policies.length is None and t.followups == [] and t.variants == {}


@pytest.mark.parametrize("env_image, want", [(None, "benchctl-sandbox:latest"), ("my-sandbox:dev", "my-sandbox:dev")])
def test_a_task_without_an_image_key_runs_in_the_image_benchctl_builds(
    tmp_path: Path, env_image: str | None, want: str
) -> None:
    """The default image is the one `benchctl images build` makes: $BENCHCTL_IMAGE when set. In a
    fresh interpreter, since the variable is read once, at import."""
    task_dir = write_task(tmp_path / "t", MINIMAL, {"a.log": "x\n"})
    env = {k: v for k, v in os.environ.items() if k != "BENCHCTL_IMAGE"} | {"PYTHONPATH": str(REPO)}
    if env_image is not None:
        env["BENCHCTL_IMAGE"] = env_image
    code = (
        "import sys; from pathlib import Path; from benchctl.tasks import load_task; "
        "from benchctl.run.preflight import image_origin; from benchctl.sandbox.images import DEFAULT_TAG; "
        "t = load_task(Path(sys.argv[1])); print(t.image, DEFAULT_TAG, image_origin(t))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(task_dir)], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [want, want, "None"]  # and no "task file key" blamed when that image is missing


def test_full_task(tmp_path: Path) -> None:
    body = (
        MINIMAL
        + """
artifacts = ["report.md", "issues.json"]
budgets = ["10m", "2h"]
[early_exit]
fraction = 0.5
max_reprompts = 2
message = "Keep going: {remaining} left of {budget}."
[length]
file = "report.md"
min_words = 2500
max_words = 3000
[[followups]]
prompt = "Now expand the report to 5,000 words."
budget = "5m"
[harness_options]
reasoning_effort = "high"
[harness_options.codex]
reasoning_effort = "low"
[grading]
findings = "grading/findings.jsonl"
anything = { nested = 1 }
"""
    )
    t = load_task(write_task(tmp_path, body, {"a.log": "x"}))
    assert t.budgets == ["10m", "2h"]
    assert t.policies.early_exit.fraction == 0.5 and t.policies.early_exit.max_reprompts == 2
    assert t.policies.length.min_words == 2500 and t.policies.length.max_words == 3000
    assert t.followups[0].prompt.startswith("Now expand") and t.followups[0].budget == "5m"
    assert t.options_for("react") == {"reasoning_effort": "high"}
    assert t.options_for("codex") == {"reasoning_effort": "low"}
    assert t.grading == {"findings": "grading/findings.jsonl", "anything": {"nested": 1}}


@pytest.mark.parametrize(
    "body, key, fix_word",
    [
        ('name = "t"\ndata = "data"\n', "instructions", "instructions"),
        (MINIMAL + 'budgets = ["ten minutes"]\n', "budgets", "10m"),
        (MINIMAL + "[early_exit]\nfraction = 1.5\n", "early_exit.fraction", "0.75"),
        (MINIMAL + '[early_exit]\nfraction = "most"\n', "early_exit.fraction", "number"),
        (MINIMAL + '[length]\nfile = "notes.md"\nmax_words = 10\n', "length.file", "artifacts"),
        (MINIMAL + "[length]\nmin_words = 10\nmax_words = 5\n", "length.max_words", "min_words"),
        (MINIMAL + 'colour = "blue"\n', "colour", "use one of"),
        (MINIMAL + "[variants.x]\nrules = []\n", "variants.x.rules", "find"),
        (
            MINIMAL + '[[variants.x.rules]]\nfind = "(("\nreplace = ""\nregex = true\n',
            "variants.x.rules[0].find",
            "pattern",
        ),
        (MINIMAL + '[[followups]]\nbudget = "5m"\n', "followups[0].prompt", "prompt"),
        (MINIMAL + 'artifacts = ["../etc/passwd"]\n', "artifacts", "relative"),
        (MINIMAL + "grading = 3\n", "grading", "[grading]"),
        (MINIMAL + '[[variants.base.rules]]\nfind = "a"\nreplace = "b"\n', "variants.base", "another name"),
        (MINIMAL + "[early_exit]\nmax_reprompts = -1\n", "early_exit.max_reprompts", ">= 0"),  # silently meant "never"
        (MINIMAL + "[length]\nmin_words = -5\n", "length.min_words", ">= 0"),
        (MINIMAL + "[length]\nmax_revisions = -1\n", "length.max_revisions", ">= 0"),
        (MINIMAL + "tool_timeout = 0\n", "tool_timeout", ">= 1"),
    ],
)
def test_bad_task_names_file_key_and_fix(tmp_path: Path, body: str, key: str, fix_word: str) -> None:
    write_task(tmp_path, body, {"a.log": "x"})
    with pytest.raises(TaskError) as e:
        load_task(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "task.toml") in msg
    assert f"`{key}`" in msg
    assert "Fix:" in msg and fix_word in msg


def test_missing_data_dir_and_missing_file(tmp_path: Path) -> None:
    write_task(tmp_path, MINIMAL)  # no data/ created
    with pytest.raises(TaskError, match=r"`data`.*does not exist"):
        load_task(tmp_path)
    with pytest.raises(TaskError, match="no task file"):
        load_task(tmp_path / "elsewhere")


def test_missing_task_file_names_a_fix_that_works_outside_a_checkout(tmp_path: Path) -> None:
    """An installed wheel has no configs/demo beside the user: the fix is `benchctl tasks new`."""
    with pytest.raises(TaskError) as e:
        load_task(tmp_path / "nowhere")
    assert "benchctl tasks new NAME" in str(e.value) and "configs/demo" not in str(e.value)


def test_toml_syntax_error_names_file(tmp_path: Path) -> None:
    write_task(tmp_path, 'name = "t"\ninstructions = \n', {"a": "x"})
    with pytest.raises(TaskError, match="not valid TOML"):
        load_task(tmp_path)


VARIANT = (
    MINIMAL
    + """
[[variants.swap.rules]]
find = "Acme"
replace = "Globex"
[[variants.swap.rules]]
find = '10\\.1\\.(\\d+)\\.(\\d+)'
replace = '10.9.\\1.\\2'
regex = true
files = ["*.log"]
"""
)


def test_variant_applies_rules_to_a_copy_and_changes_the_hash(tmp_path: Path) -> None:
    t = load_task(
        write_task(
            tmp_path / "task",
            VARIANT,
            {"a.log": "Acme host 10.1.2.3 and 10.1.4.5\n", "notes.txt": "Acme at 10.1.2.3\n"},
        )
    )
    base_path, base_hash, _ = prepare_data(t, None, tmp_path / "cache")
    v_path, v_hash, counts = prepare_data(t, "swap", tmp_path / "cache")
    assert base_path == t.data_dir
    assert (v_path / "a.log").read_text() == "Globex host 10.9.2.3 and 10.9.4.5\n"
    assert (v_path / "notes.txt").read_text() == "Globex at 10.1.2.3\n"  # regex rule limited to *.log
    assert (t.data_dir / "a.log").read_text().startswith("Acme")  # original untouched
    assert counts == {"0:Acme": 2, "1:" + r"10\.1\.(\d+)\.(\d+)": 2}
    assert base_hash != v_hash and v_hash.startswith("sha256:")
    assert prepare_data(t, "swap", tmp_path / "cache2")[1] == v_hash  # deterministic


def test_hash_changes_with_data_and_task_file(tmp_path: Path) -> None:
    t = load_task(write_task(tmp_path, MINIMAL, {"a.log": "one\n"}))
    h1 = task_hash(t)
    (tmp_path / "data" / "a.log").write_text("two\n")
    h2 = task_hash(t)
    (tmp_path / "task.toml").write_text(MINIMAL + "# comment\n")
    h3 = task_hash(load_task(tmp_path))
    assert len({h1, h2, h3}) == 3


def test_unknown_variant(tmp_path: Path) -> None:
    t = load_task(write_task(tmp_path, VARIANT, {"a.log": "x"}))
    with pytest.raises(TaskError, match="no variant named 'nope'.*swap"):
        prepare_data(t, "nope", tmp_path / "cache")


def test_binary_files_are_copied_unchanged(tmp_path: Path) -> None:
    t = load_task(write_task(tmp_path / "task", VARIANT, {"a.log": "Acme"}))
    (t.data_dir / "blob.bin").write_bytes(b"\xff\xfeAcme\x00")
    apply_variant(t, t.variants["swap"], tmp_path / "out")
    assert (tmp_path / "out" / "blob.bin").read_bytes() == b"\xff\xfeAcme\x00"


def test_a_variant_does_not_copy_what_a_data_symlink_points_at(tmp_path: Path) -> None:
    t = load_task(write_task(tmp_path / "task", VARIANT, {"a.log": "Acme"}))
    (tmp_path / "task" / "answer.md").write_text("the ground truth\n")
    (t.data_dir / "answer.md").symlink_to("../answer.md")
    apply_variant(t, t.variants["swap"], tmp_path / "out")
    copied = tmp_path / "out" / "answer.md"
    assert copied.is_symlink() and str(copied.readlink()) == "../answer.md"  # a link, as in the original mount
    assert not any("ground truth" in p.read_text() for p in (tmp_path / "out").iterdir() if not p.is_symlink())


@pytest.mark.parametrize("config", sorted(p.parent.name for p in (REPO / "configs").glob("*/task.toml")))
def test_every_shipped_config_loads(config: str) -> None:
    t = load_task(REPO / "configs" / config)
    assert t.instructions.strip()
    assert t.data_dir is None or t.data_dir.is_dir()
    for v in t.variants:
        assert t.variants[v].rules


@pytest.mark.parametrize(
    "body, key",
    [
        ('data = "."\n', "data"),  # task.toml itself
        ('data = "data"\n[grading]\nreference = "data/answer.md"\n', "grading"),  # the answer key
        (
            'data = "data"\n[target]\nmodel = "scripted/t.json"\nsystem_prompt_file = "data/answer.md"\n',
            "target.system_prompt_file",
        ),
    ],
)
def test_grading_and_target_secrets_may_not_sit_in_the_mounted_data(tmp_path: Path, body: str, key: str) -> None:
    task = write_task(tmp_path, 'name = "t"\ninstructions = "Investigate."\n' + body, {"answer.md": "the truth\n"})
    with pytest.raises(TaskError) as e:
        load_task(task)
    msg = str(e.value)
    assert f"key `{key}`" in msg and "sandbox mounts" in msg and "Fix:" in msg


def test_grading_files_beside_the_data_are_fine(tmp_path: Path) -> None:
    task = write_task(tmp_path, MINIMAL + '[grading]\nreference = "grading/reference.md"\n', {"a.log": "x\n"})
    (task / "grading").mkdir()
    (task / "grading" / "reference.md").write_text("ref\n")
    assert load_task(task).grading["reference"] == "grading/reference.md"


@pytest.mark.parametrize(
    "limits, key, fix_word",
    [
        ('memory = "lots"', "limits.memory", '"4g"'),
        ('memory = "999"', "limits.memory", "unit"),  # 999 bytes? 999 GB? a unit is required
        ("memory = 4", "limits.memory", "unit"),
        ('memory = "4x"', "limits.memory", "unit"),
        ('memory = "16m"', "limits.memory", "64m"),  # too small for even bash to start
        ("pids = -5", "limits.pids", "32"),  # Docker would read it as unlimited
        ("pids = 0", "limits.pids", "32"),
        ("pids = 4", "limits.pids", "32"),
        ("pids = 10000000", "limits.pids", "32768"),
        ('pids = "many"', "limits.pids", "pids = 256"),
        ("pids = 64.5", "limits.pids", "pids = 256"),
        ("cpus = 0", "limits.cpus", "positive"),  # Docker would not cap the CPU at all
        ("cpus = -1", "limits.cpus", "positive"),
        ('cpus = "2"', "limits.cpus", "cpus = 1.5"),
        ("cpus = true", "limits.cpus", "cpus = 1.5"),
        ('swap = "1g"', "limits.swap", "cpus, memory, pids"),
    ],
)
def test_bad_limits_name_file_key_and_fix(tmp_path: Path, limits: str, key: str, fix_word: str) -> None:
    write_task(tmp_path, MINIMAL + f"[limits]\n{limits}\n", {"a.log": "x"})
    with pytest.raises(TaskError) as e:
        load_task(tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "task.toml") in msg and f"`{key}`" in msg
    assert "Fix:" in msg and fix_word in msg.split("Fix:", 1)[1]


def test_limits_units_and_defaults(tmp_path: Path) -> None:
    from benchctl.sandbox.base import Limits
    from benchctl.sandbox.limits import memory_bytes

    assert load_task(write_task(tmp_path / "a", MINIMAL, {"a.log": "x"})).limits == Limits(
        cpus=1.0, memory="2g", pids=256
    )
    t = load_task(
        write_task(tmp_path / "b", MINIMAL + '[limits]\ncpus = 2\nmemory = "1.5GiB"\npids = 64\n', {"a.log": "x"})
    )
    assert t.limits == Limits(cpus=2.0, memory="1.5GiB", pids=64) and isinstance(t.limits.cpus, float)
    assert memory_bytes("1.5GiB") == memory_bytes("1.5g") == memory_bytes("1.5gb") == 3 * 2**29
    assert memory_bytes("512m") == 512 * 2**20 and memory_bytes("64M") == 64 * 2**20
    assert memory_bytes("1t") == 2**40 and memory_bytes(f"{2**30}b") == 2**30


def test_limits_beyond_this_machine_are_refused_before_runs_start(tmp_path: Path) -> None:
    """Loading is machine-independent (a task for a big machine still loads and grades); the
    check against this machine's CPUs and memory runs before runs start."""
    from benchctl.sandbox.base import Limits
    from benchctl.sandbox.limits import LimitError, check_fits_host
    from benchctl.tasks import check_limits_fit_host

    check_fits_host(Limits(cpus=2, memory="4g"), cpus=2, memory=4 * 2**30)  # exactly what there is
    with pytest.raises(LimitError, match=r"3 is more than the 2 CPUs.*at most cpus = 2"):
        check_fits_host(Limits(cpus=3), cpus=2, memory=8 * 2**30)
    with pytest.raises(LimitError, match=r"'999t' is more than this machine's 8.0 GiB.*\"8192m\""):
        check_fits_host(Limits(memory="999t"), cpus=2, memory=8 * 2**30)
    t = load_task(write_task(tmp_path, MINIMAL + '[limits]\nmemory = "999t"\n', {"a.log": "x"}))
    with pytest.raises(TaskError, match=r"task.toml: key `limits.memory`: '999t' is more than this machine's"):
        check_limits_fit_host(t)
