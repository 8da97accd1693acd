"""Entry points: `grade_tournament` (judge + rate) and `rate_from_canonical` (rate only, no judge).

grade_tournament(results, judge):
  1. finished runs -> environments (task[~variant]) and their issues: artifacts/issues.json as is,
     or a markdown report extracted by the judge (cached in extracted/<run_id>.json);
  2. per environment one dedup pass -> canonical/<env>.json (skipped when the inputs are unchanged;
     a hand-edited list is never overwritten without force);
  3. per environment whose task says verify = "agent": a verifier run per canonical issue
     (verify.py; cached), its verification saved in the canonical list;
  4. rate_from_canonical -> ratings.json and one GradeRecord per run.
Judge calls run concurrently through one `benchctl.grading.judge.Judge` (at most `concurrency` at a
time; `benchctl grade` passes its session's judge), so a `scripted/...` judge works exactly like a
real one, and a refusal or a failed call leaves the environment (or the run, for an extraction)
unscored. Each ask's exchanges go to judge_log/<env>.json or judge_log/<run_id>~extract.json.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import orjson

from benchctl import jsonio
from benchctl.grading.judge import Judge, JudgeFailed, Tally, judge_log_path, write_judge_log
from benchctl.grading.spend import seed_lines, seed_spend_log
from benchctl.layout import GRADE_SCHEMA, META, RUNS, GradeItem, GradeRecord, grade_path
from benchctl.tournament import canonical as canon_io
from benchctl.tournament.bootstrap import DEFAULT_ROUNDS, DEFAULT_SEED
from benchctl.tournament.dedup import PROMPT_VERSION, REASK, dedup_env
from benchctl.tournament.issues import (
    EXTRACT_PROMPT,
    EXTRACT_SYSTEM,
    JSON_ARTIFACT,
    MARKDOWN_ARTIFACTS,
    IssuesFormatError,
    file_hash,
    find_artifact,
    parse_extraction,
    read_issues_json,
)
from benchctl.tournament.matches import credit_sets
from benchctl.tournament.participants import Participant, auditor_label, collect, parse_auditor_key
from benchctl.tournament.ratings import compute
from benchctl.tournament.schema import (
    CANONICAL_SCHEMA,
    EXTRACTED_DIR,
    POINTS,
    RATINGS_FILE,
    TOURNAMENT,
    AuditorIssue,
    CanonicalList,
    ExtractedIssues,
    Ratings,
    Weighting,
)
from benchctl.tournament.verify import Verifier, VerifyStats, verify_env

MAX_REPORT_CHARS = 200_000  # a markdown report longer than this is cut before extraction


def extract_max_tokens(report_chars: int) -> int:
    """The extraction restates the report's issues, so it is at most about as long as the report
    (~4 characters a token): 8192 (as for dedup) for reports up to ~32k characters, then more, up
    to 32,000 (see dedup_max_tokens)."""
    return min(32_000, max(8192, report_chars // 4))


def grade_tournament(
    results: Path,
    judge: str,
    *,
    force: bool = False,
    concurrency: int = 8,
    auditor_key: str = "model",
    tasks: Collection[str] | None = None,
    weighting: Weighting = "points",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    verifier: str | None = None,
) -> Ratings:
    """Judge (where needed), verify (where the task asks) and rate every tournament environment
    under `results`; returns the ratings it wrote to ratings.json.

    tasks: only these tasks' runs (default: the runs whose task declares the tournament grader, see
    participants.collect). force: re-extract and re-judge everything, overwriting hand edits.
    verifier: the verifier model (default: the judge)."""
    parse_auditor_key(auditor_key)  # fail before any judge call on a bad key
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, not {concurrency}")
    return asyncio.run(
        agrade_tournament(
            results,
            Judge(judge, concurrency=concurrency),
            force=force,
            auditor_key=auditor_key,
            tasks=tasks,
            weighting=weighting,
            rounds=rounds,
            seed=seed,
            verifier=verifier,
        )
    )


async def agrade_tournament(
    results: Path,
    judge: Judge,
    *,
    force: bool = False,
    auditor_key: str = "model",
    tasks: Collection[str] | None = None,
    weighting: Weighting = "points",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    verifier: str | None = None,
    verify_stats: VerifyStats | None = None,
) -> Ratings:
    """`grade_tournament` with a judge shared with the caller (`benchctl grade` passes the session's,
    so the tournament's calls share its concurrency limit and count in its summary, and its
    `verify_stats` to learn what the verifiers did)."""
    parse_auditor_key(auditor_key)
    # `benchctl grade` seeded the log already (a no-op here); `python -m benchctl.tournament` has not
    # (not `seed`: that name is the bootstrap's)
    spend_seed = await asyncio.to_thread(seed_spend_log, Path(results), TOURNAMENT)
    for line in seed_lines(spend_seed) if spend_seed else []:
        print(line, file=sys.stderr)  # "tournament: ..."
    await judge_environments(
        Path(results), judge, force=force, tasks=tasks, verifier=verifier, verify_stats=verify_stats
    )
    # the bootstrap is CPU work: off the event loop
    return await asyncio.to_thread(
        rate_from_canonical, results, auditor_key=auditor_key, weighting=weighting, rounds=rounds, seed=seed
    )


async def judge_environments(
    results: Path,
    judge: Judge,
    *,
    force: bool = False,
    tasks: Collection[str] | None = None,
    verifier: str | None = None,
    verify_stats: VerifyStats | None = None,
) -> list[CanonicalList]:
    """Dedup every environment (concurrently), then verify those whose task asks for it (one
    environment at a time: each runs `verify_concurrency` sandboxes)."""
    parts = collect(results, tasks)
    by_env: dict[str, list[Participant]] = {}
    for p in parts:
        by_env.setdefault(p.env, []).append(p)
    envs = sorted(by_env.items())
    judged = await asyncio.gather(*(_judge_env(results, env, runs, judge, force) for env, runs in envs))
    stage = Verifier.start(results, verifier, judge.max_cost, judge.spent, verify_stats or VerifyStats())
    out = []
    for (_, runs), (canon, issues_by_run) in zip(envs, judged):
        out.append(await verify_env(results, canon, issues_by_run, runs, judge, stage))
    return out


async def _judge_env(
    results: Path, env: str, runs: list[Participant], judge: Judge, force: bool
) -> tuple[CanonicalList, dict[str, list[AuditorIssue]]]:
    """The environment's canonical list (made by the judge, or the one on disk when its inputs are
    unchanged or it was edited by hand) and the issues each readable run reported."""
    read = await asyncio.gather(*(_read_issues(results, p, judge, force) for p in runs))
    issues_by_run: dict[str, list[AuditorIssue]] = {}
    infos: dict[str, dict[str, Any]] = {}
    excluded: dict[str, str] = {}
    extract_cost: float | None = 0.0
    for p, ext in zip(runs, read):
        extract_cost = _add(extract_cost, ext.get("cost_usd", 0.0))
        if ext["status"] != "ok":
            excluded[p.run_id] = ext.get("error") or "issues could not be read"
            continue
        issues_by_run[p.run_id] = ext["issues"]
        infos[p.run_id] = {**p.info, "source": ext.get("source"), "n_issues": len(ext["issues"])}
    input_hash = _hash([PROMPT_VERSION, judge.model, sorted((r, i) for r, i in issues_by_run.items())])

    path = canon_io.canonical_path(results, env)
    if path.exists() and not force:
        try:
            old = canon_io.load_canonical(path)
        except ValueError as exc:
            old = None
            print(f"tournament: {exc}; re-judging {env}", file=sys.stderr)
        if old is not None and old.get("status") == "ok":
            if old.get("input_hash") == input_hash:
                return old, issues_by_run
            if canon_io.was_hand_edited(old):
                print(
                    f"tournament: {env}: the runs changed since {path} was made, but it was edited by hand, "
                    f"so it is kept as is. Re-run with --force to re-judge (hand edits are lost), or add "
                    f"the new runs to the file by hand.",
                    file=sys.stderr,
                )
                return old, issues_by_run

    tally = Tally.for_grade(results, TOURNAMENT, path.stem)
    issues, error = await dedup_env(env, issues_by_run, judge, tally)
    write_judge_log(
        judge_log_path(results, TOURNAMENT, path.stem),
        grader=TOURNAMENT,
        subject=env,
        judge=judge.model,
        tally=tally,
        prompt_version=PROMPT_VERSION,
    )
    canon: CanonicalList = CanonicalList(
        schema=CANONICAL_SCHEMA,
        env=env,
        status="ok" if issues is not None else "failed",
        error=error,
        judge=judge.model,
        runs=infos,
        excluded_runs=excluded,
        issues=issues or [],
        input_hash=input_hash,
        content_hash=canon_io.content_hash(issues or []),
        created_at=time.time(),
        cost_usd=_add(extract_cost, tally.cost_usd),
    )
    canon_io.save_canonical(results, canon)
    return canon, issues_by_run


async def _read_issues(results: Path, p: Participant, judge: Judge, force: bool) -> ExtractedIssues:
    """issues.json directly; markdown through the judge (cached by content hash); none -> empty."""
    names = tuple(dict.fromkeys([JSON_ARTIFACT] + ([p.artifact] if p.artifact else []) + list(MARKDOWN_ARTIFACTS)))
    art = find_artifact(p.path, names) if p.path else None
    cache = canon_io.tournament_dir(results) / EXTRACTED_DIR / f"{p.run_id}.json"
    base: ExtractedIssues = ExtractedIssues(
        schema=1, run_id=p.run_id, source=art.name if art else None, judge=None, cost_usd=0.0, error=None
    )
    if art is None:
        return ExtractedIssues(**base, method="none", status="ok", issues=[])
    if art.suffix.lower() == ".json":
        try:
            return ExtractedIssues(**base, method="json", status="ok", issues=read_issues_json(art))
        except IssuesFormatError as exc:
            return ExtractedIssues(**{**base, "error": str(exc)}, method="json", status="failed", issues=[])
    key = _hash([PROMPT_VERSION, judge.model, file_hash(art)])
    if cache.exists() and not force:
        old = jsonio.read_json(cache)
        if old.get("key") == key and old.get("status") == "ok":
            return {**old, "cost_usd": 0.0}  # paid for in an earlier grading pass
    text = art.read_text(encoding="utf-8", errors="replace")[:MAX_REPORT_CHARS]
    tally = Tally.for_grade(results, TOURNAMENT, f"{p.run_id}~extract")
    try:
        got = await judge.ask_structured(
            EXTRACT_PROMPT.format(report=text),
            parse_extraction,
            lambda exc: REASK.format(error=exc),
            system=EXTRACT_SYSTEM,
            tally=tally,
            max_tokens=extract_max_tokens(len(text)),
            label="extract",
        )
        issues, error = got.value, None if got.value is not None else f"unusable judge answer ({got.error})"
    except JudgeFailed as exc:
        issues, error = None, str(exc)
    write_judge_log(
        judge_log_path(results, TOURNAMENT, f"{p.run_id}~extract"),
        grader=TOURNAMENT,
        subject=p.run_id,
        judge=judge.model,
        tally=tally,
        prompt_version=PROMPT_VERSION,
        source=art.name,
    )
    out = ExtractedIssues(
        **{**base, "judge": judge.model, "cost_usd": tally.cost_usd, "error": error},
        method="judge",
        status="ok" if issues is not None else "failed",
        issues=issues or [],
    )
    jsonio.write_json_atomic(cache, {**out, "key": key})
    return out


def rate_from_canonical(
    results: Path,
    *,
    auditor_key: str = "model",
    weighting: Weighting = "points",
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    prior_strength: float = 1.0,
    judge: str | None = None,
) -> Ratings:
    """Refit from the saved canonical lists (hand edits included) with no judge call; writes
    grades/tournament/<run_id>.json, then grades/tournament/ratings.json, and returns the ratings.

    Order and durability: every changed per-run grade file is written (each atomically, unchanged
    ones are left alone), one filesystem sync makes them durable, and only then is ratings.json
    replaced (atomically, fsynced). So ratings.json is never newer than the grade files it goes
    with; an interrupted `rate` leaves the previous ratings.json, and re-running it finishes."""
    results = Path(results)
    parse_auditor_key(auditor_key)
    canons = canon_io.load_all(results)
    if not canons:
        raise FileNotFoundError(
            f"no canonical lists under {canon_io.canonical_dir(results)}; run "
            f"`benchctl grade` with the tournament grader first"
        )
    auditor_of: dict[str, str] = {}
    cost_by_run: dict[str, float | None] = {}
    no_issue: list[str] = []
    excluded: list[str] = []
    for c in canons:
        excluded += list(c.get("excluded_runs", {}))
        for run_id, info in c["runs"].items():
            auditor_of[run_id] = auditor_label(info, auditor_key)
            cost_by_run[run_id] = _run_cost(results, run_id)
            if c.get("status", "ok") == "ok" and info.get("source") is None and "source" in info:
                no_issue.append(run_id)
    judges = sorted({j for c in canons if (j := c.get("judge"))})
    ratings, run_scores = compute(
        canons,
        auditor_of,
        weighting=weighting,
        rounds=rounds,
        seed=seed,
        prior_strength=prior_strength,
        cost_by_run=cost_by_run,
        judge=judge or (", ".join(judges) if judges else None),
        auditor_key=auditor_key,
        no_issue_runs=no_issue,
    )
    ratings["flags"]["excluded_runs"] = sorted(set(excluded))
    jsonio.write_bytes_batch(_changed(_run_grades(results, canons, run_scores)))
    jsonio.write_json_atomic(canon_io.tournament_dir(results) / RATINGS_FILE, ratings)  # last
    return ratings


def _run_cost(results: Path, run_id: str) -> float | None:
    """meta.json cost_usd of a run; None when unknown or the run has no readable meta.json. (A plain
    open + orjson: this runs once per run, 25,000 times in a big tournament.)"""
    try:
        with open(os.path.join(results, RUNS, run_id, META), "rb") as f:
            meta = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return meta.get("cost_usd") if isinstance(meta, dict) else None


def _changed(records: dict[str, GradeRecord]) -> dict[str, bytes]:
    """The records to write: those that differ from the file on disk other than in created_at (an
    unchanged grade keeps its file, and its creation time)."""
    out: dict[str, bytes] = {}
    for path, rec in records.items():
        try:
            with open(path, "rb") as f:
                old = orjson.loads(f.read())
        except (OSError, orjson.JSONDecodeError):
            old = None
        if isinstance(old, dict) and {**old, "created_at": None} == {**rec, "created_at": None}:
            continue
        out[path] = jsonio.dumps(rec, pretty=True) + b"\n"
    return out


def _run_grades(
    results: Path, canons: list[CanonicalList], run_scores: dict[str, float | None]
) -> dict[str, GradeRecord]:
    """path -> one layout.GradeRecord per run: score = mean share over its non-skipped matches. A run
    left out because its issues could not be read gets an unscored record with the reason (so
    reports say why, and an older score of that run is not left behind as if current)."""
    out: dict[str, GradeRecord] = {}
    now = time.time()
    # layout.grade_path(results, TOURNAMENT, run_id) is <this dir>/<run_id>.json; joined as strings
    # because 25,000 pathlib paths cost seconds
    folder = str(grade_path(results, TOURNAMENT, "-").parent)
    for c in canons:
        rubric_hash = canon_io.list_hash(c)
        for run_id, why in (c.get("excluded_runs") or {}).items():
            excluded: GradeRecord = GradeRecord(
                schema=GRADE_SCHEMA,
                grader=TOURNAMENT,
                run_id=run_id,
                artifact="",
                artifact_tag=None,
                judge=c.get("judge") or "",
                rubric_hash=rubric_hash,
                status="unscored",
                score=None,
                raw_score=None,
                by_cluster={},
                items=[],
                n_items=0,
                n_unscored=0,
                usage={},
                cost_usd=0.0,
                created_at=now,
            )  # its extraction cost is in the env's, shared below
            out[os.path.join(folder, f"{run_id}.json")] = GradeRecord(**excluded, error=why)
        ok = c.get("status", "ok") == "ok"
        pending = canon_io.unverified_issues(c)
        credited = credit_sets(c)[0]
        n_runs = max(len(c["runs"]), 1)
        for run_id, info in c["runs"].items():
            items: list[GradeItem] = [
                {
                    "id": i["id"],
                    "score": 1.0 if i["id"] in credited.get(run_id, ()) else 0.0,
                    "weight": float(POINTS[i["importance"]]),
                    "reason": i.get("title", ""),
                }
                for i in c["issues"]
                if run_id in (i.get("found_by") or {})
            ]
            score = run_scores.get(run_id)
            rec: GradeRecord = GradeRecord(
                schema=GRADE_SCHEMA,
                grader=TOURNAMENT,
                run_id=run_id,
                artifact=info.get("source") or "",
                artifact_tag=None,
                judge=c.get("judge") or "",
                rubric_hash=rubric_hash,
                status="scored" if ok and not pending and score is not None else "unscored",
                score=score if ok and not pending else None,
                raw_score=None,
                by_cluster={},
                items=items,
                n_items=len(items),
                n_unscored=0,
                usage={},
                cost_usd=None if (cost := c.get("cost_usd")) is None else round(cost / n_runs, 6),
                created_at=now,
            )
            if not ok:
                rec["error"] = f"the judge failed on environment {c['env']}: {c.get('error')}"
            elif pending:
                rec["error"] = (
                    f"issue(s) {', '.join(pending)} of environment {c['env']} are not verified (reasons in "
                    f"its canonical list, verification.reason); rerun to retry"
                )
            elif score is None:
                rec["error"] = (
                    "no match played: no run of another auditor in this environment, "
                    "or every match had nothing left after cancelling shared issues"
                )
            out[os.path.join(folder, f"{run_id}.json")] = rec
    return out


def _hash(obj: Any) -> str:
    # sorted keys: a file read back from disk (pretty, sorted) must hash like the dict that was written
    return "sha256:" + hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
