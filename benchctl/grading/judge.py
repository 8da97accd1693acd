"""The judge: one model called through `benchctl.models`, with a shared concurrency limit.

Every judge call of a grading session goes through one `Judge`, whose semaphore caps calls in
flight (`--concurrency`), so 1,000 reports x 8 batches are spread over K parallel calls rather
than 8,000 at once. Retries live in `benchctl.models`; a call that still fails raises
`JudgeFailed` here, and graders turn that into unscored items — never a score of 0.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


class JudgeFailed(Exception):
    """A judge call failed after retries (or the judge refused); its items stay unscored."""


@dataclass
class Tally:
    """Usage and cost of the judge calls behind one grade record."""
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    calls: int = 0

    def add(self, completion: Any) -> None:
        self.calls += 1
        for k, v in (completion.usage or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.usage[k] = self.usage.get(k, 0) + int(v)
        if completion.cost_usd is None or self.cost_usd is None:
            self.cost_usd = None   # an unknown price makes the total unknown, not smaller
        else:
            self.cost_usd += completion.cost_usd


class Judge:
    def __init__(self, model: str, *, concurrency: int = 16, max_tokens: int = 4096,
                 temperature: float | None = 0.0) -> None:
        if concurrency < 1:
            raise ValueError("--concurrency must be at least 1")
        self.model = model
        self.max_tokens = max_tokens
        # 0 for repeatable grades; benchctl.models drops it for models that reject temperature
        self.temperature = temperature
        self.concurrency = concurrency
        self._sem: asyncio.Semaphore | None = None
        self.calls = 0

    async def ask(self, messages: list[dict[str, Any]], *, system: str, tally: Tally) -> str:
        """The judge's answer text. Raises JudgeFailed when the call fails or the judge refuses."""
        from benchctl.models import ModelCallError, acomplete
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        async with self._sem:
            self.calls += 1
            try:
                completion = await acomplete(self.model, messages, system=system, max_tokens=self.max_tokens,
                                             temperature=self.temperature)
            except ModelCallError as e:
                raise JudgeFailed(f"judge call failed after retries: {e}") from None
        tally.add(completion)
        if completion.refusal:
            raise JudgeFailed("the judge refused to answer")
        return completion.text or ""
