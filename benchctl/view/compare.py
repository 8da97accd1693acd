"""Two runs side by side: their settings and outcomes, every grade, finding by finding, how many
events of each kind they produced, and their main artifacts."""

from __future__ import annotations

from collections import Counter
from typing import Any

from benchctl.view import render
from benchctl.view.grades import Rubrics, artifacts_with_grades
from benchctl.view.paths import RunFiles
from benchctl.view.runpage import facts, read_meta
from benchctl.view.transcript_index import IndexCache


def side(root: str, files: RunFiles, indexes: IndexCache) -> dict[str, Any]:
    meta = read_meta(files)
    idx = indexes.get(files.transcript)
    arts, _ = artifacts_with_grades(root, files, meta)
    grades = [g for a in arts for g in a.grades]
    main = next((a for a in arts if a.grades), arts[0] if arts else None)
    coverage = next((g for g in grades if g.get("grader") == "coverage" and not g.get("artifact_tag")), None)
    rubric = Rubrics(meta)(coverage) if coverage else None
    return {
        "run_id": files.run_id,
        "meta": meta,
        "status": str((meta or {}).get("status") or "in progress"),
        "coverage": coverage,
        "finding_texts": rubric.findings if rubric else {},
        "facts": facts(files.run_id, meta, idx, None),
        "grades": grades,
        "main": main,
        "types": Counter(idx.types),
    }


def rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(field, value in A, value in B): status, the header facts, then every grader's score."""
    out = [("status", a["status"], b["status"])]
    fa, fb = {k: v for k, v, _ in a["facts"]}, {k: v for k, v, _ in b["facts"]}
    out += [(k, fa.get(k, "–"), fb.get(k, "–")) for k in dict.fromkeys([*fa, *fb])]
    sa, sb = _scores(a["grades"]), _scores(b["grades"])
    out += [(f"score: {k}", sa.get(k, "–"), sb.get(k, "–")) for k in dict.fromkeys([*sa, *sb])]
    return out


def _scores(grades: list[dict[str, Any]]) -> dict[str, str]:
    out = {}
    for g in grades:
        tag = g.get("artifact_tag")
        out[f"{g.get('grader')}{' (' + str(tag) + ')' if tag else ''}"] = render.score(g.get("score"))
    return out


def findings(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Coverage items of the main artifact, by finding id: the finding's rubric text (when either
    side's grade carries it or its task's rubric still has the grade's hash) and the strict scores
    of A and B."""

    def items(side_: dict[str, Any]) -> dict[str, dict[str, Any]]:
        g = side_.get("coverage") or {}
        return {str(it.get("id")): it for it in g.get("items") or [] if isinstance(it, dict)}

    ia, ib = items(a), items(b)
    out = []
    for fid in dict.fromkeys([*ia, *ib]):
        x, y = ia.get(fid, {}), ib.get(fid, {})
        sx, sy = x.get("strict"), y.get("strict")
        text = a["finding_texts"].get(fid) or b["finding_texts"].get(fid) or ""
        out.append(
            {
                "id": fid,
                "text": text,
                "cluster": x.get("cluster") or y.get("cluster") or "",
                "a": sx,
                "b": sy,
                "delta": sy - sx if isinstance(sx, (int, float)) and isinstance(sy, (int, float)) else None,
            }
        )
    return out


def type_counts(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [(t, a["types"].get(t, 0), b["types"].get(t, 0)) for t in sorted(set(a["types"]) | set(b["types"]))]


def candidates(rows_: list[Any], run_id: str, limit: int = 50) -> list[Any]:
    """Runs worth comparing with `run_id`: same task, harness and model first (other seeds,
    budgets, variants), then the same task."""
    me = next((r for r in rows_ if r.run_id == run_id), None)
    if me is None:
        return []
    close = [r for r in rows_ if r.run_id != run_id and (r.task, r.harness, r.model) == (me.task, me.harness, me.model)]
    taken = {r.run_id for r in close}
    near = [r for r in rows_ if r.run_id != run_id and r.task == me.task and r.run_id not in taken]
    return (close + near)[:limit]
