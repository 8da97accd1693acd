"""Verification (`[grading.tournament] verify = "agent"`): after dedup, every canonical issue of an
environment is tried by a verifier agent in a fresh sandbox of that environment.

A verifier is an ordinary run made by the ordinary runner (benchctl/run/runner.py, the local
executor, executors/run_body.py): the environment's task -- its image, its data as the auditors
saw it (imported packaging included, read-only at /data), its [limits] -- run by the ReAct harness
through a gateway of its own (keys stay on the host, the sandbox sees a dummy token) with the
verifier model, the prompt of verify_prompt.py (the claims, fenced as untrusted data; nothing else
of the auditors' sandboxes) and `verify_budget` of time. It ends by writing /work/verdict.json.
Its files are grades/tournament/verify/runs/<id>/ (meta.json, transcript.jsonl,
artifacts/verdict.json): a results layout, so `benchctl view` opens it like any run.

Cache: the run id carries the issue's verification key (text, environment, model), so a finished
run with a usable verdict is reused as it is; any other (no verdict or a bad one, an error, a
cost cap) is moved to its attempts/ and made again by the next session.

Spend: each verifier model call's cost is appended to the tournament's spend log as it happens
(grading/spend.py), and one limiter whose cap is the session's `--max-cost`, counting from the
judge's spend, keeps verifiers from starting (and stops a running one) once it is reached. An
issue left without a verdict keeps its environment out of the ratings until a rerun settles it.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from benchctl.grading.config import TournamentSettings
from benchctl.grading.judge import Judge
from benchctl.grading.spend import append_spend, spend_log_path
from benchctl.layout import FINAL_STATUSES, read_meta, run_dir, slug
from benchctl.policies import EarlyExitPolicy, RunPolicies, parse_duration
from benchctl.tasks import Task, hash_tree
from benchctl.tournament import canonical as canon_io
from benchctl.tournament.canonical import tournament_dir
from benchctl.tournament.participants import Participant
from benchctl.tournament.schema import (
    TOURNAMENT,
    VERIFY_DIR,
    AuditorIssue,
    CanonicalIssue,
    CanonicalList,
    Verification,
)
from benchctl.tournament.verify_prompt import SYSTEM, VERDICT_FILE, claims_of, instructions, verification_key
from benchctl.tournament.verify_record import read_verification, settled, unverified

VARIANTS_DIR = ".variants"  # variant copies of environments' data, remade each session
HARNESS = "react"
# A verifier stops when it has its answer: no "keep going" reprompts; the time notices stay.
POLICIES = RunPolicies(early_exit=EarlyExitPolicy(enabled=False), length=None, notify_time=True)


@dataclass
class VerifyStats:
    """What verification did in one grading session (the grade summary prints it)."""

    runs: int = 0  # verifier runs started
    reused: int = 0  # issues settled by an earlier session's run
    not_started: int = 0  # verifier runs the cost cap kept from starting
    cost_usd: float | None = 0.0  # this session's verifier spend; None when some call had no price
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_cost(self, cost: Any) -> None:
        with self._lock:
            if cost is None or self.cost_usd is None:
                self.cost_usd = None
            else:
                self.cost_usd = round(self.cost_usd + float(cost), 8)


@dataclass
class Verifier:
    """One session's verification: the model, the cost limiter every verifier run shares, the
    verifier runs in flight (so a cancelled session stops them) and what it did."""

    results: Path
    model: str | None  # --verifier; None: each environment's judge
    limiter: Any  # benchctl.limits Limiter: the session's --max-cost, counting from the judge's spend
    config: Any  # its LimitsConfig
    stats: VerifyStats = field(default_factory=VerifyStats)
    cancel: threading.Event = field(default_factory=threading.Event)
    _live: set[Any] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(
        cls, results: Path, model: str | None, max_cost: float | None, spent: float, stats: VerifyStats
    ) -> Verifier:
        """The session's verification, its cap `max_cost` (None: none) counting on from `spent`."""
        from benchctl.limits.config import LimitsConfig
        from benchctl.limits.local import LocalLimiter

        # unpriced models were refused up front (or allowed) by `benchctl grade`'s own check
        config = LimitsConfig(max_cost=max_cost, allow_unpriced=True)
        return cls(Path(results), model, LocalLimiter(config, spent), config, stats)

    def stop(self) -> None:
        """Cancel: no verifier starts any more, and the running ones are stopped now."""
        self.cancel.set()
        with self._lock:
            live = list(self._live)
        for runner in live:
            runner.request_cancel()

    def run(self, runner: Any, spec: Any) -> None:
        """One verifier run through `runner` (blocking), stopped by `stop` like the others."""
        with self._lock:
            self._live.add(runner)
        try:
            if not self.cancel.is_set():
                runner.run_all([spec])
        finally:
            with self._lock:
                self._live.discard(runner)


async def verify_env(
    results: Path,
    canon: CanonicalList,
    issues_by_run: dict[str, list[AuditorIssue]],
    runs: list[Participant],
    judge: Judge,
    stage: Verifier,
) -> CanonicalList:
    """The canonical list with its task's verify settings and (verify = "agent") each issue's
    verification; saved when that changed it. A hand-edited list keeps every verification it has
    (only issues without one are verified) and stays marked as hand-edited."""
    if canon.get("status", "ok") != "ok":
        return canon
    settings = next((p.settings for p in runs if p.task_dir), TournamentSettings())
    hand = canon_io.was_hand_edited(canon)
    new: CanonicalList = {**canon, "verify": settings.verify, "verify_credit": settings.verify_credit}  # type: ignore[typeddict-item]
    todo = [i for i in new.get("issues", []) if not (hand and "verification" in i)]
    if settings.verify == "agent" and todo:
        found = await verifications(results, new, todo, issues_by_run, runs, settings, stage, judge)
        new["issues"] = [{**i, "verification": found[i["id"]]} if i["id"] in found else i for i in new["issues"]]
    if new == canon:
        return canon
    if not hand:
        new["content_hash"] = canon_io.list_hash(new)
    canon_io.save_canonical(results, new)
    return new


async def verifications(
    results: Path,
    canon: CanonicalList,
    issues: list[CanonicalIssue],
    issues_by_run: dict[str, list[AuditorIssue]],
    runs: list[Participant],
    settings: TournamentSettings,
    stage: Verifier,
    judge: Judge,
) -> dict[str, Verification]:
    """Issue id -> verification, from verifier runs in a thread (a cancelled session stops them).
    An environment whose task cannot be loaded keeps the verifications it has; the others get none."""
    from benchctl.tasks import TaskError, load_task

    task_dir = next((p.task_dir for p in runs if p.task_dir), None)
    variant = next((p.info.get("variant") for p in runs if p.info.get("variant")), None)
    model = stage.model or judge.model
    try:
        task = load_task(task_dir or "")
        got = await asyncio.to_thread(
            verify_issues, stage, canon["env"], variant, issues, issues_by_run, task, settings, model
        )
    except TaskError as e:
        why = f"not verified: the environment's task cannot be loaded ({e})"
        return {i["id"]: unverified(why) for i in issues if "verification" not in i}
    except asyncio.CancelledError:
        stage.stop()
        raise
    finally:  # the verifiers' spend (the limiter counted on from the judge's) is the session's too
        judge.spent = max(judge.spent, stage.limiter.spent())
    return got


def verify_issues(
    verifier: Verifier,
    env: str,
    variant: str | None,
    issues: list[CanonicalIssue],
    issues_by_run: dict[str, list[AuditorIssue]],
    task: Task,
    settings: TournamentSettings,
    model: str,
) -> dict[str, Verification]:
    """Issue id -> its verification (blocking: run it in a thread). Raises TaskError when the
    environment's data cannot be prepared (a variant the task no longer has)."""
    from benchctl.executors import PreparedData
    from benchctl.executors.local import LocalExecutor
    from benchctl.limits.run import LimitsPlan
    from benchctl.run.execution import _lock_results
    from benchctl.run.runner import Runner
    from benchctl.run.sweep import RunSpec
    from benchctl.tasks import prepare_data

    root = verify_root(verifier.results)
    data, task_hash, counts = prepare_data(task, variant, root / VARIANTS_DIR)
    env_hash = environment_hash(task, data)
    jobs: dict[str, tuple[str, str]] = {}  # issue id -> (run id, prompt)
    for issue in issues:
        prompt = instructions(env, issue, claims_of(env, issue, issues_by_run))
        jobs[issue["id"]] = (verifier_run_id(env, verification_key(prompt, env_hash, model)), prompt)
    todo = [job for job in jobs.values() if not settled(run_dir(root, job[0]))]
    verifier.stats.reused += len(jobs) - len(todo)
    not_run: dict[str, str] = {}  # run id -> why it did not run
    if todo:
        root.mkdir(parents=True, exist_ok=True)
        problem = LocalExecutor().check(task, []) or _pin_problem(task)
        lock = None if problem else _lock_results(root)  # one session runs verifiers here at a time
        if problem or lock is None:
            why = problem or f"another `benchctl grade` is running verifiers in {root}; rerun when it ends"
            not_run = {run_id: why for run_id, _ in todo}
        else:
            recorder = _Recorder(spend_log_path(verifier.results, TOURNAMENT), model, verifier.stats, not_run)
            plan = LimitsPlan(verifier.limiter, verifier.config, task.pause_budget_on_rate_limit, task.max_cost)
            options = {**task.options_for(HARNESS), "system_prompt": SYSTEM}
            budget_s = parse_duration(settings.verify_budget)
            prepared = {variant: PreparedData(data, task_hash, counts)}

            def one(job: tuple[str, str]) -> None:
                run_id, prompt = job
                _retire(run_dir(root, run_id))
                one_task = replace(task, instructions=prompt, artifacts=[VERDICT_FILE], policies=POLICIES, followups=[])
                spec = RunSpec(
                    run_id, task.name, str(task.task_dir), HARNESS, model, settings.verify_budget,
                    budget_s, 0, variant, None, options,
                )  # fmt: skip
                verifier.run(Runner(one_task, root, prepared, progress=recorder, limits=plan), spec)

            try:
                with ThreadPoolExecutor(settings.verify_concurrency, thread_name_prefix="verify") as pool:
                    list(pool.map(one, todo))
            finally:
                lock.close()
    return {iid: read_verification(root, run_id, not_run.get(run_id)) for iid, (run_id, _) in jobs.items()}


def verify_root(results: Path) -> Path:
    return tournament_dir(results) / VERIFY_DIR


def environment_hash(task: Task, data: Path | None) -> str:
    """What a verifier's sandbox is made of: the data it mounts, the image, the sandbox limits."""
    blob = orjson.dumps([hash_tree(data), task.image, asdict(task.limits)])
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def verifier_run_id(env: str, key: str) -> str:
    return f"verify__{slug(env)}__{key.split(':', 1)[-1][:16]}"


def _retire(path: Path) -> None:
    """A finished run that settled nothing (no usable verdict, or a cost cap stopped it) goes to its
    attempts/, so the runner makes it again rather than skipping it as finished."""
    from benchctl.run.runner import move_attempt_aside

    meta = read_meta(path) if path.is_dir() else None
    if meta and meta.get("status") in FINAL_STATUSES and not settled(path):
        move_attempt_aside(path)


def _pin_problem(task: Task) -> str | None:
    """An imported task whose files left their pin is not the environment the auditors saw."""
    if task.pin is None or task.data_dir is None:
        return None
    from benchctl.task_import.pin import verify

    check = verify(task.pin, task.data_dir)
    return None if check.ok else f"the imported files changed since their pin ({check.describe()})"


class _Recorder:
    """The runner's progress hooks: counts runs, and appends each verifier model call's cost to the
    tournament's spend log as it happens (so `--max-cost` of a later session counts it)."""

    def __init__(self, spend_log: Path, model: str, stats: VerifyStats, not_run: dict[str, str]) -> None:
        from benchctl.limits.run import event_cost  # the gateway's layer: imported when verifiers run

        self.spend_log, self.model, self.stats, self.not_run = spend_log, model, stats, not_run
        self.event_cost = event_cost

    def started(self, spec: Any) -> None:
        with self.stats._lock:
            self.stats.runs += 1

    def event(self, spec: Any, ev: dict[str, Any]) -> None:
        if ev.get("type") == "model_call" or self.event_cost(ev):
            cost = ev.get("cost_usd")
            append_spend(
                self.spend_log, judge=self.model, subject=f"{VERIFY_DIR}/{spec.run_id}", ask="verify",
                attempt=1, cost_usd=cost,
            )  # fmt: skip
            self.stats.add_cost(cost)

    def finished(self, spec: Any, meta: dict[str, Any]) -> None:
        pass

    def skipped(self, spec: Any, meta: dict[str, Any] | None) -> None:
        pass

    def not_started(self, spec: Any, reason: str) -> None:
        with self.stats._lock:
            self.stats.not_started += 1
        self.not_run[spec.run_id] = f"{reason} (the grading cost cap, --max-cost); raise it and rerun"
