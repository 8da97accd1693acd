"""The task's [grading] table: keys, defaults, errors that name the fix, rubric hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchctl.grading.config import GradingConfigError, load_findings
from benchctl.grading.coverage import summarise
from benchctl.grading.graders import load_grading, rubric_hash

REPO = Path(__file__).resolve().parents[2]


def make_task(tmp_path: Path, grading: str, findings: str | None = None) -> Path:
    (tmp_path / "grading").mkdir(exist_ok=True)
    (tmp_path / "grading" / "reference.md").write_text("## TLDR\nThe server was hacked.\n")
    (tmp_path / "grading" / "findings.jsonl").write_text(
        findings
        if findings is not None
        else '{"id": "F1", "text": "hacked", "cluster": "a"}\n{"id": "F2", "text": "at 3am", "section": "b", "weight": 2}\n'
    )
    (tmp_path / "task.toml").write_text('name = "t"\n[grading]\n' + grading)
    return tmp_path


def test_demo_task_grading_loads() -> None:
    cfg = load_grading(REPO / "configs" / "demo")
    assert cfg.graders == ["coverage", "tldr", "combined"]
    assert len(cfg.findings) >= 5 and cfg.reference.startswith("## TLDR")


def test_defaults_and_inferred_graders(tmp_path: Path) -> None:
    cfg = load_grading(make_task(tmp_path, 'findings = "grading/findings.jsonl"\nreference = "grading/reference.md"\n'))
    assert cfg.graders == ["coverage", "tldr", "combined"]
    assert cfg.batch_size == 5 and cfg.weights == {"coverage": 0.7, "tldr": 0.3} and cfg.artifact == "report.md"
    assert [(f.id, f.cluster, f.weight) for f in cfg.findings] == [("F1", "a", 1.0), ("F2", "b", 2.0)]


def test_rubric_hash_covers_prompts_findings_and_settings(tmp_path: Path) -> None:
    base = 'findings = "grading/findings.jsonl"\nreference = "grading/reference.md"\n'
    h1 = rubric_hash(load_grading(make_task(tmp_path, base)), "coverage")
    assert rubric_hash(load_grading(make_task(tmp_path, base)), "coverage") == h1
    assert rubric_hash(load_grading(make_task(tmp_path, base + "batch_size = 2\n")), "coverage") != h1
    (tmp_path / "mine.txt").write_text("Score {{findings}} in {{report}} vs {{reference}} ({{ids}})")
    edited = load_grading(make_task(tmp_path, base + '[grading.prompts]\ncoverage = "mine.txt"\n'))
    assert rubric_hash(edited, "coverage") != h1 and edited.prompts["coverage"].startswith("Score")
    other = load_grading(make_task(tmp_path, base, findings='{"id": "F1", "text": "changed"}\n'))
    assert rubric_hash(other, "coverage") != h1


@pytest.mark.parametrize(
    "grading,match",
    [
        ('findngs = "x"\n', "findngs: unknown key"),
        ('findings = "nope.jsonl"\n', "not found"),
        ('graders = ["coverage"]\n', "needs a findings file"),
        ('graders = ["any_of_n"]\n', "ground_truth"),
        ('graders = ["magic"]\n', "unknown grader 'magic'"),
        ("batch_size = 0\n", "positive integer"),
        ("combined = { coverage = 0.7 }\n", "two weights"),
        ('[grading.prompts]\ncoverag = "x.txt"\n', "unknown prompt"),
    ],
)
def test_bad_tables_name_key_and_fix(tmp_path: Path, grading: str, match: str) -> None:
    with pytest.raises(GradingConfigError, match=match):
        load_grading(make_task(tmp_path, grading))


def test_bad_findings_files(tmp_path: Path) -> None:
    p = tmp_path / "f.jsonl"
    p.write_text('{"id": "F1", "text": "a"}\n{"id": "F1", "text": "b"}\n')
    with pytest.raises(GradingConfigError, match="duplicate id"):
        load_findings(p)
    p.write_text('{"id": "F1"}\n')
    with pytest.raises(GradingConfigError, match='non-empty "text"'):
        load_findings(p)
    p.write_text('{"id": "F1", "text": "a"\n')
    with pytest.raises(GradingConfigError, match="not valid JSON"):
        load_findings(p)


def test_coverage_summary_weights_clusters_and_unscored() -> None:
    items = [
        {"id": "F1", "score": 1.0, "strict": 1.0, "cluster": "a", "weight": 1.0},
        {"id": "F2", "score": 0.7, "strict": 0.4, "cluster": "a", "weight": 3.0},
        {"id": "F3", "score": 0.5, "strict": 0.0, "cluster": "b", "weight": 1.0},
        {"id": "F4", "score": None, "strict": None, "cluster": "c", "weight": 1.0},
    ]
    cov, raw, by_cluster = summarise(items)  # type: ignore[arg-type]
    assert cov == pytest.approx((1.0 + 1.2 + 0.0) / 5)  # weighted, F4 unscored is excluded
    assert raw == pytest.approx((1.0 + 2.1 + 0.5) / 5)
    assert by_cluster == pytest.approx({"a": 2.2 / 4, "b": 0.0})  # no entry for the all-unscored cluster
    assert summarise([{"id": "F1", "score": None, "strict": None}]) == (None, None, {})  # type: ignore[list-item]


def test_quote_found_checks_the_report_text() -> None:
    from benchctl.grading.coverage import _squash, quote_found

    report = _squash("At 02:33 svc-backup granted\n itself the Admin role.")
    assert quote_found('"svc-backup granted itself the admin role."', report) is True
    assert quote_found("svc-backup deleted the database", report) is False
    assert quote_found("", report) is None
