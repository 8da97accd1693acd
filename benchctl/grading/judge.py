"""The judge: one model called through `benchctl.gateway.complete`, with a shared concurrency limit.

Every judge call of a grading session — the rubric graders' and the tournament's — goes through
one `Judge`, whose semaphore caps calls in flight (`--concurrency`), so 1,000 reports x 8
batches are spread over K parallel calls rather than 8,000 at once, and whose `calls` counts
them all for the grade summary. Retries live in `benchctl.gateway.complete`; a call that still fails, or
that the judge refuses, raises `JudgeFailed` here, and callers turn that into unscored items —
never a score of 0, and never a re-ask (a refusal is the judge's answer, not a format slip).

`Judge.ask_structured` is the one "ask, then re-ask once" loop: ask, parse; when `parse` raises
`JudgeParseError`, send the answer back with a re-ask prompt and parse the second answer.

Each exchange is recorded in the `Tally` of the grade it belongs to, and `write_judge_log`
writes them to `grades/<grader>/judge_log/<name>.json` (format: docs/formats/grades.md, "Judge logs").
Each call's cost is also appended to its grader's spend log as soon as the answer arrives
(`spend.py`), which `benchctl grade --max-cost` reads to continue its count on a rerun.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from benchctl.gateway.wire import CUT_OFF_REASONS
from benchctl.grading.cache_gate import PrefixGate, prefix_keys
from benchctl.grading.judge_json import JudgeParseError
from benchctl.grading.spend import JUDGE_LOG_DIR, append_spend, spend_log_path
from benchctl.grading.templates import prompt_text
from benchctl.jsonio import write_json_atomic
from benchctl.layout import GRADES

if TYPE_CHECKING:
    from benchctl.grading.batches import BatchCollector

T = TypeVar("T")

JUDGE_LOG_SCHEMA = 1
DEFAULT_MAX_TOKENS = 4096


class JudgeFailed(Exception):
    """A judge call failed after retries (or the judge refused); its items stay unscored."""


@dataclass
class Tally:
    """Usage, cost and exchanges of the judge calls behind one grade record (or one tournament
    environment or extraction); `exchanges` become its judge log. `spend_log`: where each call's
    cost is appended as it arrives (spend.py; None: not recorded, for a Tally outside a results dir)."""

    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    calls: int = 0
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    spend_log: Path | None = None
    subject: str = ""  # the judge log's name: run_id, run_id~followup-1, env, run_id~extract

    @classmethod
    def for_grade(cls, results: Path, grader: str, subject: str) -> Tally:
        """A Tally whose calls' costs go to the grader's spend log in `results`."""
        return cls(spend_log=spend_log_path(results, grader), subject=subject)

    def add(self, completion: Any) -> None:
        self.calls += 1
        for k, v in (completion.usage or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.usage[k] = self.usage.get(k, 0) + int(v)
        if completion.cost_usd is None or self.cost_usd is None:
            self.cost_usd = None  # an unknown price makes the total unknown, not smaller
        else:
            self.cost_usd += completion.cost_usd


@dataclass
class Structured(Generic[T]):
    """What `ask_structured` got: the parsed value, or None with the reason after one re-ask."""

    value: T | None
    answer: str  # the judge's last answer text
    error: str | None  # why the last answer was unusable (None when value is set)


class Judge:
    def __init__(
        self,
        model: str,
        *,
        concurrency: int = 16,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float | None = 0.0,
        max_cost: float | None = None,
        spent: float = 0.0,
        batch: BatchCollector | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
        self.model = model
        # `benchctl grade --max-cost`: once the grading spend reaches it — `spent`, what the spend logs
        # of the graders being run already hold (spend.py), plus this session's priced judge calls —
        # no new judge call starts; their items stay unscored (never 0) and a rerun with a higher cap
        # scores them. Calls already in flight finish, so the spend can pass the cap by those calls.
        self.max_cost = max_cost
        self.spent = float(spent)
        self.capped = 0  # judge calls not made because of the cap
        self.max_tokens = max_tokens  # default; call sites whose answers grow pass their own
        # 0 for repeatable grades; benchctl.gateway.complete drops it for models that reject temperature
        self.temperature = temperature
        self.concurrency = concurrency
        self._sem: asyncio.Semaphore | None = None
        self._gate: PrefixGate | None = None  # the first call with a cached prefix goes alone (cache_gate.py)
        self.calls = 0
        self.log_extra: dict[str, Any] = {}  # added to each exchange in the judge log (a panel's judge, repeat)
        self._parent: Judge | None = None
        # batch mode (--batch): every judge call of the session goes through this collector
        # (grading/batches.py); siblings use their root's
        self.batch = batch
        self._reserved = 0.0  # batch mode under a cost cap: estimates held for requests out at the vendor
        self._settled = asyncio.Event()

    def sibling(self, model: str, temperature: float | None, *, repeat: int = 0) -> Judge:
        """A judge for `model` that shares this one's concurrency limit, call count and cost cap
        (a panel's other judge, or a repeat at another temperature); its exchanges are logged with
        the model and the repeat."""
        sib = Judge(model, concurrency=self.concurrency, max_tokens=self.max_tokens, temperature=temperature)
        sib._parent = self._root()
        sib.log_extra = {"judge": model, "repeat": repeat}
        return sib

    def _root(self) -> Judge:
        return self if self._parent is None else self._parent._root()

    async def _complete(
        self, messages: list[dict[str, Any]], system: str, tally: Tally, max_tokens: int, log: dict[str, Any]
    ) -> Any:
        """One call (retried in benchctl.gateway.complete, or one request of a vendor's batch in
        batch mode); the Completion, or JudgeFailed. Fills `log`."""
        root = self._root()  # a panel's judges share one limit, one count, one cost cap and one batch collector
        charge = True
        if root.batch is not None:
            completion, charge = await self._batched(root, messages, system, tally, max_tokens, log)
        else:
            completion = await self._sync(root, messages, system, tally, max_tokens, log)
        tally.add(completion)
        if charge:  # a batch answer counted already (an earlier session read it) is not new spend
            root.spent += completion.cost_usd or 0.0  # an unknown price counts 0 (allowed by --allow-unpriced)
            if tally.spend_log is not None:  # on disk at once: an interrupted session's spend counts too
                append_spend(
                    tally.spend_log,
                    judge=self.model,
                    subject=tally.subject,
                    ask=str(log.get("ask", "")),
                    attempt=int(log.get("attempt", 1)),
                    cost_usd=completion.cost_usd,
                    batch=(log["batch_id"], log["custom_id"]) if "custom_id" in log else None,
                    usage=completion.usage,
                )
        log.update(
            answer=completion.text or "",
            stop_reason=completion.stop_reason,
            refusal=completion.refusal,
            served_model=completion.served_model,
            usage=dict(completion.usage or {}),
            cost_usd=completion.cost_usd,
            latency_s=round(completion.latency_s, 4),
        )
        if completion.refusal:
            log["error"] = "the judge refused to answer"
            raise JudgeFailed(log["error"])
        return completion

    def _cap_reached(self, root: Judge, log: dict[str, Any]) -> JudgeFailed:
        root.capped += 1
        log["error"] = (
            f"not asked: the grading cost cap of ${root.max_cost:.2f} is reached "
            f"(${root.spent:.2f} spent); rerun with a higher --max-cost to score this"
        )
        return JudgeFailed(log["error"])

    async def _sync(
        self,
        root: Judge,
        messages: list[dict[str, Any]],
        system: str,
        tally: Tally,
        max_tokens: int,
        log: dict[str, Any],
    ) -> Any:
        from benchctl.gateway.complete import ModelCallError, acomplete

        if root._sem is None:
            root._sem = asyncio.Semaphore(root.concurrency)
            root._gate = PrefixGate()
        assert root._gate is not None
        # waits (holding no concurrency slot) while another call writes this call's cached prefix
        async with root._gate.first(prefix_keys(self.model, system, messages)), root._sem:
            if root.max_cost is not None and root.spent >= root.max_cost:
                raise self._cap_reached(root, log)
            root.calls += 1
            t0 = time.perf_counter()
            try:
                return await acomplete(
                    self.model, messages, system=system, max_tokens=max_tokens, temperature=self.temperature
                )
            except ModelCallError as e:
                tally.calls += 1
                log.update(latency_s=round(time.perf_counter() - t0, 4), error=f"judge call failed after retries: {e}")
                raise JudgeFailed(log["error"]) from None

    async def _batched(
        self,
        root: Judge,
        messages: list[dict[str, Any]],
        system: str,
        tally: Tally,
        max_tokens: int,
        log: dict[str, Any],
    ) -> tuple[Any, bool]:
        """One request of a vendor's batch (grading/batches.py): no concurrency slot (nothing is in
        flight on our side), the body the synchronous call would send. Under a cost cap a new request
        reserves a generous estimate of its cost first and waits while other requests' reservations
        are out; one that cannot fit even with nothing out is not asked (see docs/grading.md)."""
        from benchctl.gateway.complete import build_request
        from benchctl.gateway.upstream import ModelId
        from benchctl.grading.batches import BatchRequestFailed, estimate_usd

        assert root.batch is not None
        model = ModelId.parse(self.model)
        temperature = self.temperature
        while True:
            call = build_request(model, messages, system, max_tokens, temperature)
            req = root.batch.request(
                model,
                call,
                sample=int(self.log_extra.get("repeat", 0)),
                spend_log=tally.spend_log,
                subject=tally.subject,
                ask=str(log.get("ask", "")),
            )
            reserved = 0.0
            if root.max_cost is not None and not root.batch.on_vendor(req):  # a resumed request is paid for
                reserved = estimate_usd(req, max_tokens) or 0.0
                if not await root._reserve(reserved):
                    raise self._cap_reached(root, log)
            root.calls += 1
            log.update(custom_id=req.custom_id)
            try:
                answer = await root.batch.ask(req)
            except BatchRequestFailed as e:
                if temperature is not None and "temperature" in str(e).lower():
                    # as the synchronous call does: a model that rejects temperature is asked without it
                    temperature = None
                    log["dropped_params"] = ["temperature"]
                    continue
                tally.calls += 1
                log["error"] = f"judge call failed in a batch: {e}"
                raise JudgeFailed(log["error"]) from None
            finally:
                root._release(reserved)
            log.update(batch_id=answer.batch_id)
            return answer.completion, answer.charge

    async def _reserve(self, usd: float) -> bool:
        """Hold `usd` of the cost cap for a batch request; False when it cannot fit even once every
        outstanding reservation is settled. Runs on the root judge."""
        assert self.max_cost is not None
        while self.spent + self._reserved + usd > self.max_cost:
            if self._reserved <= 0:
                return False
            await self._settled.wait()
        self._reserved += usd
        return True

    def _release(self, usd: float) -> None:
        """A reservation is settled (its answer's real cost is in `spent` by the time a waiter runs)."""
        if usd:
            self._reserved -= usd
            self._settled.set()
            self._settled = asyncio.Event()

    async def ask_structured(
        self,
        prompt: str | list[dict[str, Any]],
        parse: Callable[[str], T],
        reask_prompt: str | Callable[[JudgeParseError], str],
        *,
        system: str,
        tally: Tally,
        max_tokens: int | None = None,
        label: str = "",
    ) -> Structured[T]:
        """Ask `prompt` (a string, or text blocks with prompt-cache breakpoints: templates.render_prompt);
        `parse` the answer. When parse raises JudgeParseError, send the answer back
        followed by `reask_prompt` (a string, or built from that error) and parse once more.

        Returns the value, or value None with the last parse error. Raises JudgeFailed when a call
        fails after retries or the judge refuses. `label` names the ask in the judge log."""
        max_tokens = max_tokens or self.max_tokens
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        answer, error = "", None
        for attempt in (1, 2):
            log: dict[str, Any] = {"ask": label, "attempt": attempt, "max_tokens": max_tokens, **self.log_extra}
            if attempt == 1:  # the prompt holds the graded text: it is hashed, not stored again
                text = prompt_text(prompt)
                log.update(prompt_sha256=_sha256(system + "\0" + text), prompt_chars=len(text))
            else:
                log["prompt"] = messages[-1]["content"]
            tally.exchanges.append(log)
            completion = await self._complete(messages, system, tally, max_tokens, log)
            answer = completion.text or ""
            try:
                return Structured(parse(answer), answer, None)
            except JudgeParseError as exc:
                error = str(exc)
                if completion.stop_reason in CUT_OFF_REASONS:
                    error += f" (the answer was cut off at max_tokens={max_tokens})"
                log["error"] = error
                if attempt == 1:
                    again = reask_prompt if isinstance(reask_prompt, str) else reask_prompt(exc)
                    messages = messages + [
                        {"role": "assistant", "content": answer or "(empty)"},
                        {"role": "user", "content": again},
                    ]
        return Structured(None, answer, error)


def _sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def judge_log_path(results: Path, grader: str, name: str) -> Path:
    """grades/<grader>/judge_log/<name>.json; name as the grade file's (run_id or run_id~tag), or
    a tournament environment."""
    return Path(results) / GRADES / grader / JUDGE_LOG_DIR / f"{name}.json"


def write_judge_log(path: Path, *, grader: str, subject: str, judge: str, tally: Tally, **extra: Any) -> None:
    """The one judge-log writer (every grader and the tournament): the exchanges behind one grade."""
    write_json_atomic(
        path,
        {
            "schema": JUDGE_LOG_SCHEMA,
            "grader": grader,
            "subject": subject,
            "judge": judge,
            "created_at": time.time(),
            "calls": tally.calls,
            "cost_usd": tally.cost_usd,
            **extra,
            "exchanges": tally.exchanges,
        },
    )
