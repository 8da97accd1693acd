"""Every output format of `benchctl report` is produced through the CLI and parses back."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from benchctl.cli import app
from benchctl.report.build import build_report
from tests.rigs.report import add_grade, add_run, write_ratings
from tests.rigs.report_main import OLD, RATINGS, A, build_main

PNG_SIG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    build_main(root)
    write_ratings(root, RATINGS)
    # one grade from another judge: every format must carry the mixed-judge warning
    add_grade(root, "tldr", add_run(root, model=A, budget="30m", budget_s=1800, seed=0), 0.5, judge="judge/other")
    return root


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, ["report", *args])
    return r.exit_code, r.stdout, r.stderr


def test_json_round_trip(results: Path) -> None:
    code, out, _ = cli(str(results), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    rep = build_report(results)
    assert set(doc["tables"]) == {t.name for t in rep.tables}
    assert doc["tables"]["leaderboard"]["rows"] == rep.table("leaderboard").to_json()["rows"]
    assert doc["provenance"]["judges"]["tldr"] == {"judge/model-1": 3, "judge/other": 1}
    assert any("Mixed judges in `tldr`" in w for w in doc["warnings"])


def test_csv_round_trip(results: Path) -> None:
    code, out, _ = cli(str(results), "--format", "csv")
    assert code == 0
    comments = [line for line in out.splitlines() if line.startswith("#")]
    assert any("judges:" in c for c in comments) and any("rubric hashes:" in c for c in comments)
    assert any("WARNING: Mixed judges" in c for c in comments)
    rows = list(csv.DictReader(io.StringIO("\n".join(line for line in out.splitlines() if not line.startswith("#")))))
    expected = build_report(results).table("leaderboard").rows
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected):
        assert got["model"] == want["model"] and int(got["n_scored"]) == want["n_scored"]
        assert (got["score_mean"] == "") == (want["score_mean"] is None)
        if want["score_mean"] is not None:
            assert float(got["score_mean"]) == pytest.approx(want["score_mean"])
        assert got["fallback_label"] == want["fallback_label"]
    code, out, _ = cli(str(results), "--format", "csv", "--table", "findings")
    assert code == 0 and "finding,cluster" in out
    code, _, err = cli(str(results), "--format", "csv", "--table", "nope")
    assert code == 2 and "no table named 'nope'" in err
    out_dir = results.parent / "csv_all"
    code, _, err = cli(str(results), "--format", "csv", "--table", "all", "--output", str(out_dir))
    assert code == 0
    names = sorted(p.stem for p in out_dir.glob("*.csv"))
    assert names == sorted(t.name for t in build_report(results).tables)
    findings = list(
        csv.DictReader(line for line in (out_dir / "findings.csv").read_text().splitlines() if not line.startswith("#"))
    )
    assert [r["finding"] for r in findings] == ["F1", "F2", "F3"] and findings[0]["hit_rate"] == "1.0"
    assert cli(str(results), "--format", "csv", "--table", "all")[0] == 2


def test_markdown_and_terminal(results: Path) -> None:
    code, md, _ = cli(str(results), "--format", "markdown")
    assert code == 0
    assert "## Leaderboard" in md and f"2/3 fell back to {OLD}" in md and "2 of 3" in md
    assert "## Provenance" in md and "judge/other" in md and "**Warning:** Mixed judges" in md
    assert "0.500 [0.252, 0.748]" in md  # A 10m: mean with its t-interval
    assert "1100 (1050–1160)" in md
    code, out, _ = cli(str(results))
    assert code == 0 and "Leaderboard" in out and "fell back" in out and "WARNING" in out


def test_table_selects_the_table_in_every_format(results: Path) -> None:
    """--table used to be read by --format csv alone: json, markdown and the terminal printed every table."""
    code, out, _ = cli(str(results), "--format", "json", "--table", "findings")
    assert code == 0 and list(json.loads(out)["tables"]) == ["findings"]
    assert json.loads(out)["provenance"]["judges"]  # provenance and warnings still come with it
    code, md, _ = cli(str(results), "--format", "markdown", "--table", "findings")
    assert code == 0 and "## Per-finding hit rates" in md and "## Leaderboard" not in md and "## Provenance" in md
    code, out, _ = cli(str(results), "--table", "findings")
    assert code == 0 and "Per-finding hit rates" in out and "Leaderboard" not in out
    code, out, _ = cli(str(results), "--format", "json", "--table", "all")
    assert code == 0 and len(json.loads(out)["tables"]) == len(build_report(results).tables)
    for fmt in ("json", "markdown", "table"):
        code, _, err = cli(str(results), "--format", fmt, "--table", "nope")
        assert code == 2 and "no table named 'nope'" in err and "leaderboard" in err, fmt


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.imgs: list[str] = []

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])


def _check_png(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIG and len(data) > 2000
    img = Image.open(io.BytesIO(data))
    img.verify()
    return Image.open(io.BytesIO(data)).size


def test_html_and_plots(results: Path, tmp_path: Path) -> None:
    page, plots = tmp_path / "out" / "report.html", tmp_path / "plots"
    code, _, _ = cli(str(results), "--format", "json", "--html", str(page), "--plots", str(plots))
    assert code == 0
    text = page.read_text()
    p = _Collect()
    p.feed(text)
    p.close()
    n_tables = len(build_report(results).tables)
    assert p.tags.count("table") == n_tables and "script" not in p.tags and "link" not in p.tags
    # self-contained: nothing loaded from a URL; the only URLs are links to the runs in `benchctl view`
    urls = re.findall(r'(?:src|href)="(https?:[^"]*)"', text)
    assert urls and all(u.startswith("http://127.0.0.1:8787/") for u in urls)
    assert re.findall(r"https?://", text).count("http://") == len(urls) + 1  # + the note naming the address
    assert len(p.imgs) == 3 and all(s.startswith("data:image/png;base64,") for s in p.imgs)
    for s in p.imgs:
        w, h = _check_png(base64.b64decode(s.split(",", 1)[1]))
        assert w > 300 and h > 150
    assert "Mixed judges" in text and "rubric hashes" in text
    names = sorted(f.name for f in plots.iterdir())
    assert names == ["cluster_heatmap.png", "elo.png", "score_vs_budget.png"]
    for f in plots.iterdir():
        _check_png(f.read_bytes())


@pytest.mark.parametrize("bootstrap", [True, False])
def test_elo_plot_axis_names_only_the_intervals_it_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bootstrap: bool
) -> None:
    """elo.png said "bootstrap 95% interval" for a one-environment tournament, which has none."""
    from benchctl.report import plots

    add_grade(tmp_path, "combined", add_run(tmp_path, model=A), 0.5)
    lo_hi = {"x": (1010.0, 1090.0), "y": (910.0, 990.0)} if bootstrap else {"x": (None, None), "y": (None, None)}
    write_ratings(
        tmp_path,
        {
            "auditor_key": "model",
            "leaderboard": [
                {"auditor": a, "elo": elo, "lo": lo_hi[a][0], "hi": lo_hi[a][1], "matches": 1}
                for a, elo in (("x", 1050), ("y", 950))
            ],
            "pairwise": [],
            "flags": {},
        },
    )
    labels: list[str] = []
    png = plots._png
    monkeypatch.setattr(plots, "_png", lambda fig: labels.append(fig.axes[0].get_xlabel()) or png(fig))
    rep = build_report(tmp_path)
    t = rep.table("tournament")
    assert t is not None and plots.elo(t) is not None
    (label,) = labels
    if bootstrap:
        assert label == "Elo (bootstrap 95% interval over environments)"
    else:
        assert "bootstrap 95% interval" not in label and "no interval" in label


def test_cli_errors(tmp_path: Path) -> None:
    code, _, err = cli(str(tmp_path / "missing"))
    assert code != 0
    code, _, err = cli(str(tmp_path))
    assert code == 2 and "not a results directory" in err
    add_grade(tmp_path, "combined", add_run(tmp_path, model=A), 0.5)
    code, _, err = cli(str(tmp_path), "--score", "nope")
    assert code == 2 and "no grades from that grader" in err
    code, _, err = cli(str(tmp_path), "--exclude-fallback", "--separate-fallback")
    assert code == 2 and "contradict" in err


def test_empty_of_grades_is_honest(tmp_path: Path) -> None:
    add_run(tmp_path, model=A, seed=0)
    add_run(tmp_path, model=A, seed=1, status="error", error="image missing")
    code, md, _ = cli(str(tmp_path), "--format", "markdown")
    assert code == 0
    assert "0 of 2" in md and "benchctl grade" in md and "run error: image missing" in md
    assert "2 of 2 runs have no" in md


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed (apt-get install chromium)")
def test_html_renders_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    page, shot = tmp_path / "report.html", tmp_path / "shot.png"
    assert cli(str(results), "--format", "json", "--html", str(page))[0] == 0
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1200,900",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    w, h = _check_png(shot.read_bytes())
    assert (w, h) == (1200, 900)
    lo, hi = Image.open(shot).convert("L").getextrema()
    assert hi - lo > 100  # something was drawn: not a blank page
