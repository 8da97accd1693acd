"""The `[grading]` table of a task's task.toml, loaded and checked.

Keys (all optional; paths are relative to the task directory):

    [grading]
    graders     = ["coverage", "tldr", "combined"]   # default: inferred from the keys below
    artifact    = "report.md"          # the artifact graded by coverage / tldr (default report.md)
    findings    = "grading/findings.jsonl"   # coverage: one finding per line (see load_findings)
    reference   = "grading/reference.md"     # coverage + tldr: the human reference report
    batch_size  = 5                    # coverage: findings per judge call
    followups   = true                 # also grade report.followup-N.md artifacts
    combined    = { coverage = 0.7, tldr = 0.3 }   # weights of the combined score
    predictions = "predictions.md"     # any_of_n: the artifact holding the predictions
    n           = 10                   # any_of_n: at most this many predictions are judged
    ground_truth = "grading/ground_truth.md"   # any_of_n: the hidden behaviour (file) ...
    ground_truth_text = "..."                  # ... or inline text
    [grading.prompts]                  # optional overrides of the built-in judge prompts
    coverage = "grading/my_coverage.txt"     # keys: system, coverage, reask, tldr, tldr_reask, any_of_n, verdict_reask
    [grading.tournament]               # tournament: what makes an issue earn credit (TournamentSettings)
    verify = "agent"                   # "none" | "judge" (default) | "agent"
    verify_credit = "not_refuted"      # agent: "confirmed" (default) | "not_refuted"
    verify_budget = "10m"              # agent: each issue's verifier run
    verify_concurrency = 2             # agent: verifier sandboxes at once

A bad table fails with a GradingConfigError naming the file, the key and the fix. Which graders
exist, what each needs from this table and what decides its scores is the graders' own business
(benchctl/grading/graders.py: `load_grading` reads the table with `read_grading` and checks it).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from benchctl.policies import parse_duration
from benchctl.tournament.schema import CREDITED, VERIFY_MODES

PROMPT_NAMES = ("system", "coverage", "reask", "tldr", "tldr_reask", "any_of_n", "verdict_reask")
_KEYS = {
    "graders",
    "artifact",
    "findings",
    "reference",
    "batch_size",
    "followups",
    "combined",
    "predictions",
    "n",
    "ground_truth",
    "ground_truth_text",
    "prompts",
    "tournament",
}
_TOURNAMENT_KEYS = {"verify", "verify_credit", "verify_budget", "verify_concurrency"}
# Bump when parsing or scoring rules change so old grades are not reused as if equivalent.
GRADING_VERSION = "1"


class GradingConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Finding:
    id: str
    text: str
    cluster: str | None = None
    weight: float = 1.0


@dataclass(frozen=True)
class TournamentSettings:
    """[grading.tournament]: what makes a canonical issue earn credit. `verify`: "none" (every issue a
    run found), "judge" (the dedup judge's `supported`), "agent" (also a verifier agent's verdict in a
    fresh sandbox of the environment: benchctl/tournament/verify.py); `verify_credit`: which verdicts
    earn ("confirmed", or "not_refuted": confirmed and unverifiable)."""

    verify: str = "judge"
    verify_credit: str = "confirmed"
    verify_budget: str = "10m"  # one issue's verifier run
    verify_concurrency: int = 2  # verifier runs (sandboxes) at once


@dataclass
class GradingConfig:
    task_dir: Path
    task_file: Path
    graders: list[str]
    artifact: str = "report.md"
    findings: list[Finding] = field(default_factory=list)
    reference: str = ""
    batch_size: int = 5
    followups: bool = True
    weights: dict[str, float] = field(default_factory=lambda: {"coverage": 0.7, "tldr": 0.3})
    predictions: str = "predictions.md"
    n: int = 10
    ground_truth: str = ""
    prompts: dict[str, str] = field(default_factory=dict)  # name -> template text
    tournament: TournamentSettings = field(default_factory=TournamentSettings)


def config_error(file: Path, key: str, problem: str, fix: str) -> GradingConfigError:
    return GradingConfigError(f"{file}: [grading] {key}: {problem}; {fix}")


def builtin_prompt(name: str) -> str:
    return resources.files("benchctl.grading").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def load_findings(path: Path) -> list[Finding]:
    """Findings file: JSON Lines, one object per finding:
    {"id": "F1", "text": "...", "cluster": "outage" (or "section"), "weight": 2}
    (also accepted: a JSON array of such objects). Ids must be unique."""
    raw = path.read_text(encoding="utf-8")
    try:
        rows = (
            json.loads(raw)
            if raw.lstrip().startswith("[")
            else [json.loads(line) for line in raw.splitlines() if line.strip()]
        )
    except ValueError as e:
        raise GradingConfigError(f"{path}: not valid JSON Lines ({e}); write one JSON object per line") from None
    out: list[Finding] = []
    seen: set[str] = set()
    for i, row in enumerate(rows, 1):
        where = f"{path}: finding {i}"
        if not isinstance(row, dict) or "id" not in row or not str(row.get("text", "")).strip():
            raise GradingConfigError(
                f'{where}: needs "id" and a non-empty "text", e.g. '
                '{"id": "F1", "text": "The outage began at 03:10", "cluster": "outage"}'
            )
        fid = str(row["id"])
        if fid in seen:
            raise GradingConfigError(f"{where}: duplicate id {fid!r}; give every finding its own id")
        seen.add(fid)
        weight = row.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise GradingConfigError(f"{where}: weight must be a number >= 0, got {weight!r}")
        cluster = row.get("cluster", row.get("section"))
        out.append(Finding(fid, str(row["text"]).strip(), None if cluster is None else str(cluster), float(weight)))
    if not out:
        raise GradingConfigError(f"{path}: no findings; add one JSON object per line")
    return out


def _read(file: Path, task_dir: Path, key: str, rel: Any) -> str:
    if not isinstance(rel, str) or not rel:
        raise config_error(
            file, key, f"must be a path string, got {rel!r}", "give a path relative to the task directory"
        )
    p = task_dir / rel
    if not p.is_file():
        raise config_error(
            file, key, f"file {p} not found", "create it or fix the path (relative to the task directory)"
        )
    return p.read_text(encoding="utf-8")


def read_grading(task_dir: Path) -> tuple[GradingConfig, list[str] | None]:
    """Read `<task_dir>/task.toml`'s [grading] table: the configuration (its `graders` still empty) and
    the graders it names (None when it names none)."""
    task_dir = Path(task_dir).resolve()
    file = task_dir / "task.toml"
    if not file.is_file():
        raise GradingConfigError(f"{file} not found; pass --task DIR pointing at a directory holding task.toml")
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8")).get("grading", {})
    except tomllib.TOMLDecodeError as e:
        raise GradingConfigError(f"{file}: invalid TOML: {e}") from None
    if not isinstance(raw, dict):
        raise config_error(file, "", "must be a table", "write [grading] followed by key = value lines")
    unknown = set(raw) - _KEYS
    if unknown:
        raise config_error(file, sorted(unknown)[0], "unknown key", f"known keys: {', '.join(sorted(_KEYS))}")
    cfg = GradingConfig(task_dir=task_dir, task_file=file, graders=[])
    if "artifact" in raw:
        cfg.artifact = str(raw["artifact"])
    if "findings" in raw:
        p = task_dir / str(raw["findings"])
        if not p.is_file():
            raise config_error(
                file, "findings", f"file {p} not found", "create it or fix the path (relative to the task directory)"
            )
        cfg.findings = load_findings(p)
    if "reference" in raw:
        cfg.reference = _read(file, task_dir, "reference", raw["reference"])
    bs = raw.get("batch_size", 5)
    if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
        raise config_error(file, "batch_size", f"must be a positive integer, got {bs!r}", "e.g. batch_size = 5")
    cfg.batch_size = bs
    fu = raw.get("followups", True)
    if not isinstance(fu, bool):
        raise config_error(file, "followups", f"must be true or false, got {fu!r}", "e.g. followups = false")
    cfg.followups = fu
    if "combined" in raw:
        w = raw["combined"]
        if (
            not isinstance(w, dict)
            or set(w) != {"coverage", "tldr"}
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in w.values())
        ):
            raise config_error(
                file,
                "combined",
                f"must give two weights >= 0, got {w!r}",
                "e.g. combined = { coverage = 0.7, tldr = 0.3 }",
            )
        cfg.weights = {k: float(v) for k, v in w.items()}
    if "predictions" in raw:
        cfg.predictions = str(raw["predictions"])
    n = raw.get("n", 10)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise config_error(file, "n", f"must be a positive integer, got {n!r}", "e.g. n = 10")
    cfg.n = n
    if "ground_truth" in raw and "ground_truth_text" in raw:
        raise config_error(file, "ground_truth", "given both as a file and as ground_truth_text", "keep one of them")
    if "ground_truth" in raw:
        cfg.ground_truth = _read(file, task_dir, "ground_truth", raw["ground_truth"]).strip()
    elif "ground_truth_text" in raw:
        cfg.ground_truth = str(raw["ground_truth_text"]).strip()
    overrides = raw.get("prompts", {})
    if not isinstance(overrides, dict):
        raise config_error(file, "prompts", "must be a table", 'e.g. prompts = { coverage = "grading/coverage.txt" }')
    for name in overrides:
        if name not in PROMPT_NAMES:
            raise config_error(file, f"prompts.{name}", "unknown prompt", f"known prompts: {', '.join(PROMPT_NAMES)}")
    cfg.prompts = {
        name: (_read(file, task_dir, f"prompts.{name}", overrides[name]) if name in overrides else builtin_prompt(name))
        for name in PROMPT_NAMES
    }
    cfg.tournament = _tournament_settings(file, raw.get("tournament", {}))
    graders = raw.get("graders")
    if graders is not None and (not isinstance(graders, list) or not all(isinstance(g, str) for g in graders)):
        raise config_error(
            file,
            "graders",
            f"must be a list of names, got {graders!r}",
            'e.g. graders = ["coverage", "tldr", "combined"]',
        )
    return cfg, graders


def _tournament_settings(file: Path, raw: Any) -> TournamentSettings:
    if not isinstance(raw, dict):
        raise config_error(file, "tournament", "must be a table", 'write [grading.tournament] with verify = "agent"')
    unknown = sorted(set(raw) - _TOURNAMENT_KEYS)
    if unknown:
        raise config_error(
            file, f"tournament.{unknown[0]}", "unknown key", f"known keys: {', '.join(sorted(_TOURNAMENT_KEYS))}"
        )
    verify = raw.get("verify", "judge")
    if verify not in VERIFY_MODES:
        raise config_error(
            file, "tournament.verify", f"{verify!r} is not a mode", f"use one of {', '.join(VERIFY_MODES)}"
        )
    credit = raw.get("verify_credit", "confirmed")
    if credit not in CREDITED:
        raise config_error(
            file, "tournament.verify_credit", f"{credit!r} is not a choice", f"use one of {', '.join(CREDITED)}"
        )
    budget = raw.get("verify_budget", "10m")
    try:
        ok = isinstance(budget, str) and parse_duration(budget) > 0
    except ValueError:
        ok = False
    if not ok:
        raise config_error(
            file, "tournament.verify_budget", f"{budget!r} is not a positive duration", 'e.g. "10m" or "90s"'
        )
    conc = raw.get("verify_concurrency", 2)
    if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1:
        raise config_error(file, "tournament.verify_concurrency", f"must be a positive integer, got {conc!r}", "e.g. 2")
    return TournamentSettings(verify, credit, budget, conc)
