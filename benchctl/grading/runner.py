"""Grading every finished run of a results directory, concurrently, resumably.

All judge calls of a session, the tournament's included, share one `Judge` (one concurrency
limit, one call count), and every (run, artifact, grader) is its own coroutine, so a slow report
never holds a slot another report could use. Each grade is written atomically as soon as it is
done, just after its judge log, so an interrupted session loses at most the grades in flight;
re-running skips grades already on disk for the same judge and rubric hash whose status is
"scored" (partial and unscored grades are retried — judge failures are usually transient).
`force` regrades everything.

With a cost cap (`max_cost`), the grading spend is every judge call the spend logs of the graders
being run hold (grading/spend.py: all sessions, judges and runs of the results directory), so a
rerun — after an interruption, or after the cap stopped it — continues the count. Before the first
judge call every session gives each of its graders' spend logs its seed line once (the spend of
grade records written before the log, estimated from their `cost_usd`; spend.py), whether it has a
cap or not: a record rewritten by an uncapped session would otherwise take its cost with it.
"""

from __future__ import annotations

import asyncio
import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchctl.grading.batches import BatchCollector, BatchProgress, BatchStats
from benchctl.grading.config import GradingConfig, GradingConfigError
from benchctl.grading.graders import check_graders, grader, load_grading, rubric_hash
from benchctl.grading.judge import Judge, Tally, judge_log_path, write_judge_log
from benchctl.grading.panel import grade_panel, panel_label
from benchctl.grading.record import GradeJob
from benchctl.grading.spend import Seed, judge_spent_on_disk, seed_spend_log
from benchctl.jsonio import read_json, write_json_atomic
from benchctl.layout import GRADED_STATUSES, grade_path, iter_runs

if TYPE_CHECKING:  # the tournament is imported only when a session rates one
    from benchctl.tournament.schema import Ratings
    from benchctl.tournament.verify import VerifyStats


@dataclass
class GradeOptions:
    judge: str
    graders: list[str] | None = None  # None: the task's [grading] graders
    concurrency: int = 16
    force: bool = False
    task_dir: Path | None = None  # overrides meta.spec.task_dir for every run
    run_glob: str | None = None  # fnmatch over run ids
    auditor_key: str = "model"  # tournament: meta fields that name an auditor, e.g. model+harness
    max_cost: float | None = None  # USD the grading spend may reach (--max-cost; earlier sessions' count)
    # a panel: more judges beside `judge` (--judge A --judge B); each item takes the mean of all answers
    panel: list[str] = field(default_factory=list)
    repeats: int = 1  # answers per judge per item (--repeats K; fresh samples, grading.panel)

    @property
    def judges(self) -> list[str]:
        return [self.judge, *self.panel]

    verifier: str | None = None  # tournament, verify = "agent": the verifier model (None: the judge)
    batch: bool = False  # --batch: judge calls go through the vendors' batch APIs (grading/batches.py)


@dataclass
class Outcome:
    grader: str
    run_id: str
    artifact: str
    artifact_tag: str | None
    status: str  # scored | partial | unscored
    score: float | None
    n_items: int
    n_unscored: int
    reused: bool  # an existing grade was kept (resume)
    config: str = ""  # run id without its seed: the configuration
    cost_usd: float | None = 0.0


@dataclass
class Session:
    outcomes: list[Outcome] = field(default_factory=list)
    skipped_runs: list[tuple[str, str]] = field(default_factory=list)  # (run_id, why not graded)
    judge_calls: int = 0  # every judge call of the session, the tournament's included
    tournament_judge_calls: int = 0
    judge_spent_usd: float = 0.0  # priced spend of this session's judge calls
    judge_spent_before_usd: float = 0.0  # with a cost cap: what the graders' spend logs held before it
    judge_spent_estimated_usd: float = 0.0  # of which: estimated from grade records older than the logs
    spend_seeds: list[Seed] = field(default_factory=list)  # the seed lines this session wrote (spend.py)
    judge_max_cost: float | None = None  # the session's cost cap (--max-cost)
    judge_calls_capped: int = 0  # judge calls not made: the --max-cost cap was reached
    whole_results: set[str] = field(default_factory=set)  # the graders of scope "results" asked for
    # the tasks the tournament covers (every finished run of them: auditors of one environment are
    # rated against each other), and what the output says about the choice (see tournament_scope)
    tournament_tasks: set[str] = field(default_factory=set)
    tournament_notes: list[str] = field(default_factory=list)
    tournament_ratings: Ratings | None = None  # what grade_tournament wrote to ratings.json
    verify_stats: VerifyStats | None = None  # what the tournament's verifier runs did (verify = "agent")
    batch: BatchStats | None = None  # --batch: what the session's batches did

    @property
    def tournament(self) -> bool:
        """A grader of scope "results" (the tournament) was asked for."""
        return bool(self.whole_results)


def configuration_of(run_id: str) -> str:
    """The run id without its trailing seed (`__s3`): runs of one configuration share it."""
    return re.sub(r"__s\d+$", "", run_id)


def artifact_versions(run_path: Path, artifact: str, followups: bool) -> list[tuple[str, str | None]]:
    """[(artifact path, tag)]: the main artifact, then report.followup-N.md ones in order of N."""
    out: list[tuple[str, str | None]] = [(artifact, None)]
    if not followups:
        return out
    rel = Path(artifact)
    folder = run_path / "artifacts" / rel.parent
    pattern = re.compile(re.escape(rel.stem) + r"\.followup-(\d+)" + re.escape(rel.suffix) + "$")
    found = []
    if folder.is_dir():
        for p in folder.iterdir():
            m = pattern.match(p.name)
            if m and p.is_file():
                found.append((int(m.group(1)), str(rel.parent / p.name) if str(rel.parent) != "." else p.name))
    out += [(name, f"followup-{n}") for n, name in sorted(found)]
    return out


def _existing(path: Path, judge: str, rubric_hash: str, repeats: int = 1) -> dict[str, Any] | None:
    """The grade on disk when it is what this session would write: same judge (or panel), rubric and
    number of repeats, and scored (partial and unscored grades are retried)."""
    if not path.exists():
        return None
    try:
        rec = read_json(path)
    except Exception:
        return None  # an unreadable grade is regraded
    if (
        rec.get("judge") == judge
        and rec.get("rubric_hash") == rubric_hash
        and rec.get("status") == "scored"
        and (rec.get("repeats") or 1) == repeats
    ):
        return rec
    return None


def _outcome(rec: dict[str, Any], reused: bool) -> Outcome:
    return Outcome(
        rec["grader"],
        rec["run_id"],
        rec.get("artifact", ""),
        rec.get("artifact_tag"),
        rec["status"],
        rec.get("score"),
        rec.get("n_items", 0),
        rec.get("n_unscored", 0),
        reused,
        configuration_of(rec["run_id"]),
        rec.get("cost_usd"),
    )


def plan(results: Path, opts: GradeOptions) -> tuple[list[tuple[GradeJob, list[str]]], Session]:
    """Every (job, graders) pair to grade; raises GradingConfigError for a bad task file."""
    session = Session()
    configs: dict[Path, GradingConfig] = {}
    jobs: list[tuple[GradeJob, list[str]]] = []
    asked: dict[str, bool] = {}  # task of a planned run that asked for the tournament -> its [grading] lists it
    for run_path, meta in iter_runs(results):
        run_id = meta.get("run_id") or run_path.name
        if opts.run_glob and not fnmatch.fnmatch(run_id, opts.run_glob):
            continue
        if meta.get("status") not in GRADED_STATUSES:
            why = (
                ": stopped by a cost cap (not graded, never averaged)"
                if meta.get("status") == "budget_exhausted"
                else " is not finished"
            )
            session.skipped_runs.append((run_id, f"status {meta.get('status')!r}{why}"))
            continue
        task_dir = opts.task_dir or (meta.get("spec") or {}).get("task_dir")
        if not task_dir:
            raise GradingConfigError(f"run {run_id}: meta.json has no spec.task_dir; pass --task DIR")
        task_dir = Path(task_dir).resolve()
        if task_dir not in configs:
            configs[task_dir] = load_grading(task_dir)
        cfg = configs[task_dir]
        graders = list(opts.graders) if opts.graders else list(cfg.graders)
        check_graders(cfg, graders)
        whole = [g for g in graders if grader(g).scope == "results"]
        if whole:
            session.whole_results.update(whole)
            task = meta.get("task") or (meta.get("spec") or {}).get("task")
            if task:
                lists = any(grader(g, cfg).scope == "results" for g in cfg.graders)
                asked[str(task)] = asked.get(str(task), False) or lists
        by_artifact: dict[str, list[str]] = {}
        for g in graders:
            if g not in whole:
                by_artifact.setdefault(grader(g).artifact(cfg), []).append(g)
        for artifact, gs in by_artifact.items():
            for name, tag in artifact_versions(run_path, artifact, cfg.followups):
                jobs.append((GradeJob(results, run_id, run_path, meta, cfg, name, tag), gs))
    session.tournament_tasks, session.tournament_notes = tournament_scope(asked, opts.run_glob)
    return jobs, session


def tournament_scope(asked: dict[str, bool], run_glob: str | None) -> tuple[set[str], list[str]]:
    """The tasks the tournament covers, and notes saying why some are in or out. `asked`: each task
    whose planned runs asked for the tournament (their [grading], or --grader) -> whether its own
    [grading] graders list it.

    A tournament rates auditors against each other, so a task that never asked for one must not bring
    its runs in through a `--grader tournament` meant for another: only the tasks that list it are
    covered, unless `--run` named the runs (then their tasks are, as asked). When no task lists it,
    `--grader tournament` can only mean every task."""
    listed = {t for t, lists in asked.items() if lists}
    others = sorted(set(asked) - listed)
    if not others:
        return set(asked), []
    if run_glob is not None:
        return set(asked), [
            f"tournament: covers {', '.join(others)} although their [grading] graders do not list it "
            f"(their runs match --run {run_glob})"
        ]
    if not listed:
        return set(asked), [
            f"tournament: no task's [grading] graders list it, so it covers every task: {', '.join(others)}"
        ]
    return listed, [
        f"tournament: covers {', '.join(sorted(listed))} (their [grading] graders list it); left out: "
        f"{', '.join(others)} (theirs do not; name their runs with --run to rate them too)"
    ]


async def grade_results(
    results: Path,
    opts: GradeOptions,
    on_done: Callable[[Outcome], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_batch: Callable[[BatchProgress], None] | None = None,
) -> Session:
    """Grade everything `plan` finds. on_plan(n) is told how many grades will follow; on_done
    is called once per grade (written or reused); on_batch at each poll of a batch (--batch) —
    hooks for a progress display."""
    results = Path(results)
    jobs, session = plan(results, opts)
    if on_plan:
        on_plan(sum(len(gs) for _, gs in jobs))
    graders = graders_run(jobs, session)
    # before any grade is (re)written: the spend of records older than their grader's log goes into it
    session.spend_seeds = [s for g in graders if (s := await asyncio.to_thread(seed_spend_log, results, g))]
    spent = 0.0
    if opts.max_cost is not None:  # the count continues from what earlier sessions spent
        on_disk = judge_spent_on_disk(results, graders)
        spent, session.judge_spent_estimated_usd = on_disk.usd, round(on_disk.estimated_usd, 6)
    collector = BatchCollector(on_progress=on_batch) if opts.batch else None
    judge = Judge(opts.judge, concurrency=opts.concurrency, max_cost=opts.max_cost, spent=spent, batch=collector)
    try:
        await _grade(results, opts, jobs, session, judge, on_done)
    finally:
        if collector is not None:  # the vendor's batches keep running when interrupted: a rerun resumes them
            await collector.aclose()
            session.batch = collector.stats
    session.judge_calls = judge.calls
    session.judge_spent_usd, session.judge_calls_capped = round(judge.spent - spent, 6), judge.capped
    session.judge_spent_before_usd, session.judge_max_cost = round(spent, 6), opts.max_cost
    return session


async def _grade(
    results: Path,
    opts: GradeOptions,
    jobs: list[tuple[GradeJob, list[str]]],
    session: Session,
    judge: Judge,
    on_done: Callable[[Outcome], None] | None,
) -> None:
    async def finish(rec: dict[str, Any], reused: bool, tally: Tally | None = None) -> None:
        if not reused:
            # fsync takes milliseconds: off the event loop, or every write stalls all judge calls
            await asyncio.to_thread(write_grade, results, rec, tally)
        out = _outcome(rec, reused)
        session.outcomes.append(out)
        if on_done:
            on_done(out)

    async def one(job: GradeJob, name: str) -> None:
        path = grade_path(results, name, job.run_id, job.artifact_tag)
        old = (
            None if opts.force else _existing(path, panel_label(opts.judges), rubric_hash(job.cfg, name), opts.repeats)
        )
        if old is not None:
            await finish(old, True)
            return
        tally = Tally.for_grade(results, name, path.stem)
        g = grader(name)
        if opts.repeats > 1 or opts.panel:
            rec = await grade_panel(name, g.grade, job, judge, opts.judges, opts.repeats, tally)
        else:
            rec = await g.grade(job, judge, tally)
        await finish(dict(rec), False, tally)

    async def derived(job: GradeJob, name: str) -> None:
        # no judge call: it reads the grades of the others, so it is recomputed on every pass
        await finish(dict(await grader(name).grade(job, judge, Tally())), False)

    async def unit(job: GradeJob, graders: list[str]) -> None:
        await asyncio.gather(*(one(job, g) for g in graders if grader(g).asks_judge))
        await asyncio.gather(*(derived(job, g) for g in graders if not grader(g).asks_judge))

    await asyncio.gather(*(unit(job, gs) for job, gs in jobs))
    for name in sorted(session.whole_results):
        from benchctl.tournament.verify import VerifyStats  # what verifier runs did (verify = "agent")

        before = judge.calls
        session.verify_stats = VerifyStats()
        try:
            session.tournament_ratings = await grader(name).grade_results(
                results,
                judge,
                force=opts.force,
                auditor_key=opts.auditor_key,
                tasks=sorted(session.tournament_tasks),
                verifier=opts.verifier,
                verify_stats=session.verify_stats,
            )
        except (ValueError, FileNotFoundError) as e:  # bad auditor key, run without a task, nothing to rate
            raise GradingConfigError(f"{name}: {e}") from None
        session.tournament_judge_calls += judge.calls - before


def graders_run(jobs: list[tuple[GradeJob, list[str]]], session: Session) -> list[str]:
    """The graders of a session that ask the judge: whose spend a cost cap counts."""
    names = {g for _, gs in jobs for g in gs if grader(g).asks_judge}
    return sorted(names | session.whole_results)


def write_grade(results: Path, rec: dict[str, Any], tally: Tally | None) -> None:
    """A grade record and, for a grader that asks the judge (tally given), its judge log — written
    first, so a grade on disk always has the exchanges it came from next to it."""
    path = grade_path(results, rec["grader"], rec["run_id"], rec.get("artifact_tag"))
    if tally is not None:
        write_judge_log(
            judge_log_path(results, rec["grader"], path.stem),
            grader=rec["grader"],
            subject=path.stem,
            judge=rec["judge"],
            tally=tally,
        )
    write_json_atomic(path, rec)
