"""The documentation site builds strictly (`mkdocs build --strict`): a broken link or anchor, or a
page left out of the nav, fails the suite; the CLI reference is generated from the Typer app; the
README's links point at files that exist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # NO_MKDOCS_2_WARNING: mkdocs-material prints a banner about its successor on every build
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _text(html_file: Path) -> str:
    return re.sub(r"<[^>]+>", " ", html_file.read_text(encoding="utf-8"))


def test_the_site_builds_strictly_with_every_command_in_its_cli_reference(tmp_path: Path) -> None:
    r = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "view-run.png").is_file()  # the screenshot is part of the site

    import typer.main

    from benchctl.cli import app

    cli_page = _text(tmp_path / "site" / "cli" / "index.html")
    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert f"benchctl {name}" in cli_page, name
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in cli_page, f"benchctl {name} {opt} is missing from the CLI reference"


def test_a_broken_link_or_a_page_outside_the_nav_fails_the_build(tmp_path: Path) -> None:
    """The gate itself: the same configuration refuses a dead link, a missing anchor and an orphan page."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "glossary.md").open("a") as f:
        f.write("\nSee [the page that is gone](no-such-page.md) and [this](tasks.md#no-such-anchor).\n")
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the nav\n")
    r = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "no-such-page.md" in out and "#no-such-anchor" in out and "orphan.md" in out


def test_the_readme_is_a_front_door_whose_links_point_at_files_that_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300, "the README is the front door; the rest belongs in docs/"
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert "docs/view-run.png" in local  # the screenshot
    missing = [t for t in local if not (REPO / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


@pytest.mark.parametrize(
    "path", ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))]
)
def test_no_history_or_issue_numbers_in_the_docs(path: str) -> None:
    """The docs describe what the code does now: no issue numbers, no "the code before"."""
    text = (REPO / path).read_text(encoding="utf-8")
    assert not re.search(r"(?<![\w&])#\d+\b", text), "an issue number"
    assert "the code before" not in text and "previous version" not in text
