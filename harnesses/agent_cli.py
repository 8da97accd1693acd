"""What the Claude Code and Codex adapters keep of each CLI phase: its raw output files
(PhaseFiles) and what the gateway saw of its model calls (CallTracker). The CLI itself runs
through the Sandbox seam's `exec_stream` (see cli_harness.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from benchctl.gateway.wire import GENERATION_APIS
from benchctl.jsonio import write_json_atomic
from benchctl.sandbox.base import StreamResult
from benchctl.transcript import Redactor


class PhaseFiles:
    """The CLI's raw stdout, stderr and exit status for one phase, kept in the run dir (redacted)."""

    def __init__(self, run_dir: Path, cli: str, phase: int) -> None:
        self.dir = Path(run_dir) / "harness"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.prefix = f"{cli}.{phase}"
        self._redact = Redactor()
        self._stdout = open(self.dir / f"{self.prefix}.stdout.jsonl", "ab", buffering=0)
        self._lock = threading.Lock()

    def stdout_line(self, line: str) -> None:
        with self._lock:
            self._stdout.write(self._redact(line.encode()) + b"\n")

    def finish(self, argv: list[str], result: StreamResult, status: str, error: str | None) -> None:
        self._stdout.close()
        (self.dir / f"{self.prefix}.stderr.txt").write_bytes(self._redact(result.stderr.encode()))
        write_json_atomic(
            self.dir / f"{self.prefix}.exit.json",
            {
                "argv": argv,
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "cancelled": result.cancelled,
                "duration_s": round(result.duration_s, 3),
                "first_output_s": None if result.first_output_s is None else round(result.first_output_s, 3),
                "status": status,
                "error": error,
            },
        )


class CallTracker:
    """Watches the gateway's transcript events during one phase (a transcript listener)."""

    def __init__(self) -> None:
        self.first_call_t: float | None = None
        self.calls = 0
        self.last_refused = False
        self.refusals = 0
        self.fallbacks = 0
        self.served: dict[str, int] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("source") != "gateway":
            return
        kind = event.get("type")
        if kind == "model_call" and event.get("wire_api") in GENERATION_APIS and not event.get("answered_by"):
            self.calls += 1
            if self.first_call_t is None:
                self.first_call_t = float(event.get("t", time.time())) - float(event.get("latency_ms") or 0) / 1000
            self.last_refused = bool(event.get("refusal"))
            served = str(event.get("served_model"))
            self.served[served] = self.served.get(served, 0) + 1
        elif kind == "refusal":
            self.refusals += 1
        elif kind == "fallback":
            self.fallbacks += 1
