"""Live progress of a sweep: a rich table with one line per active run, or JSON lines.

The runner calls `started`, `event` (every transcript event, as a transcript listener: must be
fast and never raise), `finished` and `skipped`. On a TTY a rich Live table shows harness, model,
budget, elapsed/budget, turns, tokens, cost so far and status; otherwise each start/finish is
one JSON line on stderr, so logs of a sweep stay greppable.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson

from benchctl.policies import format_duration


@dataclass
class RunLine:
    run_id: str
    harness: str
    model: str
    budget: str
    budget_s: float
    started: float = field(default_factory=time.time)
    turns: int = 0
    tokens: int = 0
    cost: float = 0.0
    cost_unknown: bool = False
    status: str = "starting"
    ended: float | None = None


def rate_limit_wait(meta: dict[str, Any]) -> float:
    """Seconds the run's calls were held back by rate limits (overlapping waits once; meta rate_limits.paused_s)."""
    rl = meta.get("rate_limits")
    v = rl.get("paused_s") if isinstance(rl, dict) else None
    return float(v) if isinstance(v, (int, float)) else 0.0


def _tokens(usage: Any) -> int:
    if not isinstance(usage, dict):
        return 0
    return int(
        sum(v for k, v in usage.items() if k in ("input_tokens", "output_tokens") and isinstance(v, (int, float)))
    )


class Progress:
    """Collects per-run state; subclasses render it."""

    def __init__(self) -> None:
        self.lines: dict[str, RunLine] = {}
        self.finished_metas: list[dict[str, Any]] = []
        self.skipped_ids: list[str] = []
        self.not_started_ids: list[str] = []  # kept from starting by the sweep's cost cap
        self._lock = threading.Lock()

    def started(self, spec: Any) -> None:
        with self._lock:
            self.lines[spec.run_id] = RunLine(spec.run_id, spec.harness, spec.model, spec.budget, spec.budget_s)

    def event(self, spec: Any, ev: dict[str, Any]) -> None:
        line = self.lines.get(spec.run_id)
        if line is None:
            return
        t = ev.get("type")
        if t == "model_call":
            line.tokens += _tokens(ev.get("usage"))
            cost = ev.get("cost_usd")
            if isinstance(cost, (int, float)):
                line.cost += cost
            elif "cost_usd" in ev:
                line.cost_unknown = True
        elif t == "assistant" and (ev.get("text") or ev.get("turn") or not ev.get("reasoning")):
            # a CLI's reasoning-only event (its thinking before a tool call) is part of a turn, not one
            line.turns = max(line.turns + 1, int(ev.get("turn") or 0))
        elif t == "run_start":
            line.status = "running"
            line.started = ev.get("t", line.started)
        elif t in ("reprompt", "revision_request", "followup"):
            line.status = t.replace("_", " ")
        elif t == "tool_call":
            line.status = f"tool: {ev.get('name')}"

    def finished(self, spec: Any, meta: dict[str, Any]) -> None:
        with self._lock:
            line = self.lines.get(spec.run_id)
            if line:
                line.status, line.ended = str(meta.get("status")), time.time()
                if isinstance(meta.get("cost_usd"), (int, float)):
                    line.cost = meta["cost_usd"]
            self.finished_metas.append(dict(meta))

    def skipped(self, spec: Any, meta: dict[str, Any] | None) -> None:
        with self._lock:
            self.skipped_ids.append(spec.run_id)

    def not_started(self, spec: Any, reason: str) -> None:
        with self._lock:
            self.not_started_ids.append(spec.run_id)

    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        cost, unknown = 0.0, False
        for m in self.finished_metas:
            counts[m.get("status", "?")] = counts.get(m.get("status", "?"), 0) + 1
            if isinstance(m.get("cost_usd"), (int, float)):
                cost += m["cost_usd"]
            elif m.get("status") != "error":
                unknown = True
        out = {
            "finished": len(self.finished_metas),
            "skipped": len(self.skipped_ids),
            "by_status": counts,
            "cost_usd": None if unknown else round(cost, 6),
        }
        if self.not_started_ids:
            out["not_started"] = len(self.not_started_ids)
        return out

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class JsonLinesProgress(Progress):
    """One JSON object per line on `stream` for run start / finish / skip and the summary."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__()
        self.stream = stream or sys.stderr

    def _out(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self.stream.write(orjson.dumps(obj).decode() + "\n")
            self.stream.flush()

    def started(self, spec: Any) -> None:
        super().started(spec)
        self._out({"event": "run_started", "run_id": spec.run_id, "t": time.time()})

    def finished(self, spec: Any, meta: dict[str, Any]) -> None:
        super().finished(spec, meta)
        self._out(
            {
                "event": "run_finished",
                "run_id": spec.run_id,
                "status": meta.get("status"),
                "elapsed_s": meta.get("elapsed_s"),
                "turns": meta.get("turns"),
                "cost_usd": meta.get("cost_usd"),
                "rate_limit_wait_s": rate_limit_wait(meta),
                "error": meta.get("error"),
            }
        )

    def skipped(self, spec: Any, meta: dict[str, Any] | None) -> None:
        super().skipped(spec, meta)
        self._out({"event": "run_skipped", "run_id": spec.run_id, "status": (meta or {}).get("status")})

    def not_started(self, spec: Any, reason: str) -> None:
        super().not_started(spec, reason)
        self._out({"event": "run_not_started", "run_id": spec.run_id, "reason": reason})

    def __exit__(self, *exc: object) -> None:
        self._out({"event": "summary", **self.summary()})


class RichProgress(Progress):
    """A rich Live table refreshed a few times a second; finished runs drop off the table."""

    def __init__(self, total: int, console: Any = None) -> None:
        super().__init__()
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.total = total
        self._live: Any = None

    def _table(self) -> Any:
        from rich.table import Table

        done = len(self.finished_metas) + len(self.skipped_ids)
        table = Table(title=f"benchctl run: {done}/{self.total} done", expand=False)
        for col in ("run", "harness", "model", "elapsed/budget", "turns", "tokens", "cost", "status"):
            table.add_column(col, no_wrap=True)
        now = time.time()
        for line in list(self.lines.values()):
            if line.ended is not None:
                continue
            cost = f"${line.cost:.4f}" + ("+?" if line.cost_unknown else "")
            table.add_row(
                line.run_id[-40:],
                line.harness,
                line.model[-32:],
                f"{format_duration(now - line.started)}/{format_duration(line.budget_s)}",
                str(line.turns),
                f"{line.tokens:,}",
                cost,
                line.status,
            )
        return table

    def __enter__(self) -> RichProgress:
        from rich.live import Live

        self._live = Live(get_renderable=self._table, console=self.console, refresh_per_second=4, transient=True)
        self._live.__enter__()
        return self

    def finished(self, spec: Any, meta: dict[str, Any]) -> None:
        super().finished(spec, meta)
        status = meta.get("status")
        colour = {"completed": "green", "timeout": "yellow", "refused": "magenta", "budget_exhausted": "yellow"}.get(
            str(status), "red"
        )
        err = f" ({meta.get('error')})" if meta.get("error") else ""
        waited = rate_limit_wait(meta)
        wait = f"  rate-limit wait {format_duration(waited)}" if waited else ""
        self.console.print(
            f"[{colour}]{status:9}[/] {spec.run_id}  {format_duration(meta.get('elapsed_s') or 0)}"
            f"  turns={meta.get('turns')}{wait}{err}"
        )

    def not_started(self, spec: Any, reason: str) -> None:
        super().not_started(spec, reason)
        self.console.print(f"[red]not started[/] {spec.run_id}  ({reason})")

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
        s = self.summary()
        by = ", ".join(f"{k}={v}" for k, v in sorted(s["by_status"].items())) or "nothing run"
        cost = "unknown" if s["cost_usd"] is None else f"${s['cost_usd']:.4f}"
        not_started = f", {s['not_started']} not started (cost cap)" if s.get("not_started") else ""
        self.console.print(
            f"[bold]Summary:[/] {s['finished']} finished ({by}), {s['skipped']} skipped "
            f"(already finished){not_started}, cost {cost}"
        )


PROGRESS_MODES = ("auto", "rich", "json", "quiet")


def make_progress(total: int, mode: str = "auto") -> Progress:
    """mode: auto (rich on a TTY, JSON lines otherwise) | rich | json | quiet."""
    if mode not in PROGRESS_MODES:
        raise ValueError(f"--progress {mode!r}: use one of {', '.join(PROGRESS_MODES)}")
    if mode == "quiet":
        return Progress()
    if mode == "json" or (mode == "auto" and not sys.stderr.isatty()):
        return JsonLinesProgress()
    return RichProgress(total)
