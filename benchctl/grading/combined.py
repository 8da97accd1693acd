"""Combined score = w_cov * coverage + w_tldr * tldr (default 0.7 / 0.3), from the two records.

No judge call: it reads the coverage and tldr grade records of the same run and artifact. It is
unscored when either part is missing, unscored, or was made with another rubric than the task's
current one (a stale half would be hidden behind the combined record's current rubric hash; a
missing half never counts as 0), and partial when either part is partial. It is recomputed on
every grading pass, so it always reflects the part records on disk.
"""

from __future__ import annotations

from typing import Any

from benchctl.grading.config import GradingConfig
from benchctl.grading.graders import Grader, Problem, rubric_hash
from benchctl.grading.judge import Judge, Tally
from benchctl.grading.record import GradeJob, make_record
from benchctl.jsonio import read_json
from benchctl.layout import GradeRecord, grade_path


def combine(cov: float | None, tldr: float | None, weights: dict[str, float]) -> float | None:
    if cov is None or tldr is None:
        return None
    return weights["coverage"] * cov + weights["tldr"] * tldr


def grade_combined(job: GradeJob) -> GradeRecord:
    parts: dict[str, dict] = {}
    problems: list[str] = []
    for name in ("coverage", "tldr"):
        p = grade_path(job.results, name, job.run_id, job.artifact_tag)
        if not p.exists():
            problems.append(f"no {name} grade (run `benchctl grade --grader {name}` first)")
            continue
        rec = read_json(p)
        parts[name] = {
            k: rec.get(k) for k in ("score", "status", "judge", "rubric_hash", "n_items", "n_unscored", "judge_noise")
        }
        if rec.get("rubric_hash") != rubric_hash(job.cfg, name):
            problems.append(
                f"the {name} grade was made with another rubric than the task's current one "
                f"(regrade it: `benchctl grade --grader {name}`)"
            )
            parts[name]["score"] = None
        elif rec.get("score") is None:
            problems.append(f"the {name} grade is unscored")
    score = combine(parts.get("coverage", {}).get("score"), parts.get("tldr", {}).get("score"), job.cfg.weights)
    judges = sorted({p["judge"] for p in parts.values() if p.get("judge")})
    rec = make_record(
        "combined",
        job,
        " | ".join(judges) or "-",
        rubric_hash(job.cfg, "combined"),
        items=[],
        score=score,
        tally=None,
        parts=parts,
        weights=job.cfg.weights,
    )
    if score is None:
        rec["status"] = "unscored"
        rec["error"] = "; ".join(problems)
    elif any(p.get("status") == "partial" for p in parts.values()):
        rec["status"] = "partial"
    # judge repeats (grading.panel): the parts were judged independently, so their judge variances add
    # with the squared weights
    noise = [(parts.get(n) or {}).get("judge_noise") or {} for n in ("coverage", "tldr")]
    if score is not None and all(isinstance(x.get("var"), (int, float)) for x in noise):
        w = job.cfg.weights
        rec["judge_noise"] = {"var": w["coverage"] ** 2 * noise[0]["var"] + w["tldr"] ** 2 * noise[1]["var"]}
    rec["n_items"] = sum(int(p.get("n_items") or 0) for p in parts.values())
    rec["n_unscored"] = sum(int(p.get("n_unscored") or 0) for p in parts.values())
    return rec


class Combined(Grader):
    name = "combined"
    asks_judge = False

    def missing(self, cfg: GradingConfig) -> Problem | None:
        if not (cfg.findings and cfg.reference):
            return (
                "graders",
                "combined needs the coverage and tldr inputs (findings and reference)",
                'add findings = "..." and reference = "..." or drop "combined"',
            )
        return None

    def by_default(self, cfg: GradingConfig) -> bool:
        return bool(cfg.findings and cfg.reference)

    def rubric(self, cfg: GradingConfig) -> dict[str, Any]:
        return {"weights": cfg.weights, "coverage": rubric_hash(cfg, "coverage"), "tldr": rubric_hash(cfg, "tldr")}

    async def grade(self, job: GradeJob, judge: Judge, tally: Tally) -> GradeRecord:
        return grade_combined(job)


GRADER = Combined()
