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

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from benchctl.grading.config import TournamentSettings
from benchctl.grading.spend import append_spend, spend_log_path
from benchctl.jsonio import read_jsonl
from benchctl.layout import ARTIFACTS, FINAL_STATUSES, TRANSCRIPT, read_meta, run_dir, slug
from benchctl.limits.run import event_cost
from benchctl.output_cap import head_and_tail
from benchctl.policies import EarlyExitPolicy, RunPolicies, parse_duration
from benchctl.tasks import Task, hash_tree
from benchctl.tournament.canonical import tournament_dir
from benchctl.tournament.schema import (
    TOURNAMENT,
    VERDICTS,
    VERIFY_DIR,
    AuditorIssue,
    CanonicalIssue,
    Verification,
    VerifierCommand,
)
from benchctl.tournament.verify_prompt import SYSTEM, VERDICT_FILE, claims_of, instructions, verification_key

VARIANTS_DIR = ".variants"  # variant copies of environments' data, remade each session
MAX_TEXT = 2000  # characters of one command, or of its output, kept in the canonical list
MAX_REASON = 4000
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
    models: set[str] = field(default_factory=set)
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
    def start(cls, results: Path, model: str | None, max_cost: float | None, spent: float) -> Verifier:
        from benchctl.limits.config import LimitsConfig
        from benchctl.limits.local import LocalLimiter

        # unpriced models were refused up front (or allowed) by `benchctl grade`'s own check
        config = LimitsConfig(max_cost=max_cost, allow_unpriced=True)
        return cls(Path(results), model, LocalLimiter(config, spent), config)

    def stop(self) -> None:
        """Cancel: no verifier starts any more, and the running ones are stopped now."""
        self.cancel.set()
        with self._lock:
            live = list(self._live)
        for runner in live:
            runner.request_cancel()

    def _run(self, runner: Any, spec: Any) -> None:
        with self._lock:
            self._live.add(runner)
        try:
            if not self.cancel.is_set():
                runner.run_all([spec])
        finally:
            with self._lock:
                self._live.discard(runner)


def verify_root(results: Path) -> Path:
    return tournament_dir(results) / VERIFY_DIR


def unverified(reason: str, run_id: str | None = None, commands: list[VerifierCommand] | None = None) -> Verification:
    return Verification(verdict=None, reason=reason, verifier_run=run_id, commands=commands or [])


def environment_hash(task: Task, data: Path | None) -> str:
    """What a verifier's sandbox is made of: the data it mounts, the image, the sandbox limits."""
    blob = orjson.dumps([hash_tree(data), task.image, asdict(task.limits)])
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def verifier_run_id(env: str, key: str) -> str:
    return f"verify__{slug(env)}__{key.split(':', 1)[-1][:16]}"


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
    todo = [job for job in jobs.values() if not _settled(run_dir(root, job[0]))]
    verifier.stats.reused += len(jobs) - len(todo)
    verifier.stats.models.add(model)
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
                verifier._run(Runner(one_task, root, prepared, progress=recorder, limits=plan), spec)

            try:
                with ThreadPoolExecutor(settings.verify_concurrency, thread_name_prefix="verify") as pool:
                    list(pool.map(one, todo))
            finally:
                lock.close()
    return {iid: read_verification(root, run_id, not_run.get(run_id)) for iid, (run_id, _) in jobs.items()}


def read_verification(root: Path, run_id: str, not_run: str | None = None) -> Verification:
    """The verification a verifier run left: its verdict file, and its tool calls with their outputs."""
    path = run_dir(root, run_id)
    meta = read_meta(path) if path.is_dir() else None
    if meta is None:
        why = not_run or "the verifier run did not finish"
        return unverified(f"not verified: {why}", run_id if path.is_dir() else None)
    commands = commands_of(path / TRANSCRIPT)
    verdict, reason = read_verdict(path / ARTIFACTS / VERDICT_FILE)
    if verdict is None:
        ended = f"{meta.get('status')}" + (f" ({meta['error']})" if meta.get("error") else "")
        return unverified(f"not verified: {reason}; the verifier run ended {ended}", run_id, commands)
    return Verification(verdict=verdict, reason=reason, verifier_run=run_id, commands=commands)  # type: ignore[typeddict-item]


def read_verdict(path: Path) -> tuple[str | None, str]:
    """(verdict, reason) from a verdict.json, or (None, what is wrong with it)."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None, f"the verifier wrote no /work/{VERDICT_FILE}"
    except orjson.JSONDecodeError as e:
        return None, f"/work/{VERDICT_FILE} is not JSON ({e})"
    verdict = str(data.get("verdict", "")).strip().lower() if isinstance(data, dict) else ""
    if verdict not in VERDICTS:
        return None, f'/work/{VERDICT_FILE} has no "verdict" of {", ".join(VERDICTS)}'
    return verdict, str(data.get("reason") or "")[:MAX_REASON]


def commands_of(transcript: Path) -> list[VerifierCommand]:
    """Every tool call of a verifier run, in order, with its exit code and (cut) output."""
    calls: dict[str, dict[str, Any]] = {}
    out: list[VerifierCommand] = []
    try:
        events = read_jsonl(transcript)
    except OSError:
        return out
    for ev in events:
        if ev.get("type") == "tool_call":
            calls[str(ev.get("id"))] = ev
        elif ev.get("type") == "tool_result" and str(ev.get("id")) in calls:
            call = calls.pop(str(ev.get("id")))
            out.append(_command(call, ev.get("exit_code"), str(ev.get("output") or "")))
    return out + [_command(call, None, "(no result: the run ended first)") for call in calls.values()]


def _command(call: dict[str, Any], exit_code: Any, output: str) -> VerifierCommand:
    inp = call.get("input")
    if isinstance(inp, dict) and isinstance(inp.get("command" if call.get("name") == "bash" else "code"), str):
        text = inp["command" if call.get("name") == "bash" else "code"]
    else:
        text = orjson.dumps(inp).decode()
    return VerifierCommand(
        tool=str(call.get("name")),
        command=head_and_tail(text, MAX_TEXT)[0],
        exit_code=exit_code if isinstance(exit_code, int) else None,
        output=head_and_tail(output, MAX_TEXT)[0],
    )


def _settled(path: Path) -> bool:
    """A finished verifier run with a usable verdict: its verification is reused as it is."""
    meta = read_meta(path) if path.is_dir() else None
    return bool(meta and meta.get("status") in FINAL_STATUSES and read_verdict(path / ARTIFACTS / VERDICT_FILE)[0])


def _retire(path: Path) -> None:
    """A finished run that settled nothing (no usable verdict, or a cost cap stopped it) goes to its
    attempts/, so the runner makes it again rather than skipping it as finished."""
    from benchctl.run.runner import move_attempt_aside

    meta = read_meta(path) if path.is_dir() else None
    if meta and meta.get("status") in FINAL_STATUSES and not _settled(path):
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
        self.spend_log, self.model, self.stats, self.not_run = spend_log, model, stats, not_run

    def started(self, spec: Any) -> None:
        with self.stats._lock:
            self.stats.runs += 1

    def event(self, spec: Any, ev: dict[str, Any]) -> None:
        if ev.get("type") == "model_call" or event_cost(ev):
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
