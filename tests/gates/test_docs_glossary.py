"""docs/glossary.md: the words a user meets have an entry, and every entry is a word the docs or the
code use (a term renamed or dropped there leaves a stale entry here, which fails)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GLOSSARY = REPO / "docs" / "glossary.md"
# the benchctl-specific words of the CLI's help and the docs' headings: each needs an entry
REQUIRED = (
    "task", "run", "sweep", "results directory", "configuration", "outcome", "variant", "follow-up",
    "budget", "artifact", "harness", "phase", "hook", "sandbox", "sandbox image", "gateway", "model id",
    "fallback", "refusal policy", "wire API", "scripted model", "limiter", "cost cap", "executor",
    "plugin", "transcript", "request delta", "task prompt", "reasoning block", "export", "judge",
    "grade", "grader", "rubric", "headline grader", "unscored", "judge log", "spend log", "panel",
    "judge repeats", "judge noise", "judge validation", "auditor", "environment", "canonical issue",
    "verifier", "verdict", "match", "Elo", "scanner", "prefilter", "segment", "target",
    "baseline model", "auxiliary model", "tool configuration", "target validation",
    "tool informativeness", "imported task", "pin", "leaderboard", "provenance", "comparison",
    "viewer",
)  # fmt: skip


def glossary_terms() -> list[str]:
    """The bold terms of the glossary's list items, with a qualifier like "(of a scanner)" dropped."""
    items = re.findall(r"^- .*?(?=^- |^#|\Z)", GLOSSARY.read_text(encoding="utf-8"), re.M | re.S)
    terms = [" ".join(t.split()) for item in items for t in re.findall(r"\*\*([^*]+)\*\*", item)]
    return [re.sub(r"\s*\(.*\)$", "", t) for t in terms]


def _words(text: str) -> str:
    """Text as words: `HarnessContext`, `head_and_tail` and `head-and-tail` all read as "harness
    context", "head and tail"; lower case, single spaces."""
    text = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text)
    return " ".join(re.sub(r"[_-]", " ", text).split()).lower()


def _corpus() -> str:
    """Every docs page but the glossary, and the source of benchctl/ and harnesses/ (code, templates,
    prompts, built-in scanners), as words (`_words`)."""
    files = [p for p in (REPO / "docs").rglob("*.md") if p != GLOSSARY]
    for pkg in ("benchctl", "harnesses"):
        files += [
            p
            for p in (REPO / pkg).rglob("*")
            if p.suffix in (".py", ".html", ".txt", ".toml") and "__pycache__" not in p.parts
        ]
    return " ".join(_words(p.read_text(encoding="utf-8")) for p in files)


def test_every_user_facing_word_has_an_entry() -> None:
    terms = set(glossary_terms())
    missing = [t for t in REQUIRED if t not in terms]
    assert not missing, f"docs/glossary.md has no entry (a **bold** term) for: {', '.join(missing)}"


def test_every_entry_is_a_word_the_docs_or_the_code_use() -> None:
    corpus = _corpus()
    unused = [t for t in glossary_terms() if _words(t) not in corpus]
    assert not unused, (
        f"docs/glossary.md defines {', '.join(unused)}, which no docs page and no code uses: "
        "name the term as the docs and the code do, or drop the entry"
    )
