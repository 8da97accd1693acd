"""The run transcript: one JSON event per line, appended live.

Every component of a run (gateway, harness, policies, runner) writes through one
`TranscriptWriter`, which is thread-safe, flushes each line (so `tail -f` and a crash both
see whole events) and scrubs secrets before anything reaches disk.

The format — the fields every event has and each type's own — is documented in
docs/formats/transcript.md; the event types and the sources are `EventType` and `Source` below.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import orjson

from benchctl.gateway.provider_env import PROVIDERS

SCHEMA_VERSION = 1
_DUMP_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE

# The event types and the writers, as the README's transcript schema lists them. mypy checks every
# `emit` against these lists; the README's table is checked against them (tests/test_readme_claims.py).
EventType = Literal[
    "run_start",  # runner: spec, task hash, image digest
    "run_end",  # runner: status, usage, cost, summary
    "model_call",  # gateway: one exchange with an upstream (see gateway docs)
    "model_error",  # gateway: a call that failed after retries
    "refusal",  # gateway: a model refused
    "fallback",  # gateway: the run switched to its fallback model
    "rate_limit_wait",  # gateway: a call held back by the limiter or a 429/529 backoff (reason, wait_s)
    "assistant",  # harness: assistant text
    "tool_call",  # harness: the agent called a tool (name, input)
    "tool_result",  # harness: what the tool returned (output, exit code, truncated)
    "hook",  # harness: a CLI hook fired
    "notice",  # policy: text injected into the agent's context (kind: time|words|tokens|cost_cap|...)
    "reprompt",  # policy: the agent tried to stop early and was told to continue
    "revision_request",  # policy: the report was over the length limit on stop
    "forged_hook",  # policy: a hook the gateway's own view of the model traffic contradicts (refused)
    "followup",  # runner: a follow-up prompt was sent
    "target_call",  # targets: a call to the audited target model
    "warning",  # any: the run went on but something is off (kind, message); listed in meta.json
    "harness_event",  # any: a raw CLI event with no better mapping
    "stderr",  # any: lines the agent CLI wrote to stderr
    "error",  # any: an error with a message
]
Source = Literal[
    "runner",  # the run body and the runner (benchctl/run, benchctl/executors)
    "gateway",  # the model gateway (benchctl/gateway)
    "harness",  # the harness driving the agent
    "policy",  # the run's policies (benchctl/policies.py, applied by the harness)
    "targets",  # a hidden-behaviour audit's target tools (benchctl/targets)
    "task_tests",  # an imported task's run_task_tests (benchctl/task_import)
    "grader",  # a judge call's log (benchctl/gateway/complete.py)
]

# Environment variables whose values must never be written anywhere: every provider's key
# variables (from provider_env.py, the one table of them) and other known credentials.
SECRET_ENV_VARS = tuple(k for env in PROVIDERS.values() for k in env.keys) + (
    "OPENAI_COMPATIBLE_API_KEY",
    "OPENROUTER_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
)
# Any variable named like a credential counts too (e.g. OPENAI_COMPATIBLE_PRISM_API_KEY,
# HF_TOKEN behind a router, *_AUTH_TOKEN, *_ACCESS_TOKEN): a false positive only redacts a
# harmless string.
SECRET_SUFFIXES = ("_API_KEY", "_SECRET_KEY", "_TOKEN")


def secret_values(extra: Iterable[str] = ()) -> list[str]:
    """The secret strings present in this process's environment (long enough to be real)."""
    vals = [os.environ.get(k, "") for k in SECRET_ENV_VARS]
    vals += [v for k, v in os.environ.items() if k.endswith(SECRET_SUFFIXES) and k not in SECRET_ENV_VARS]
    vals += list(extra)
    return sorted({v for v in vals if v and len(v) >= 8}, key=len, reverse=True)


class Redactor:
    """Replaces known secret values in bytes with a marker. Cheap when there are none."""

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        self._secrets = [s.encode() for s in (secret_values() if secrets is None else secrets) if s]

    def __call__(self, data: bytes) -> bytes:
        for s in self._secrets:
            if s in data:
                data = data.replace(s, b"[REDACTED]")
        return data

    def stream(self) -> StreamRedactor:
        """A redactor for one byte stream that arrives in pieces (see StreamRedactor)."""
        return StreamRedactor(self._secrets)


class StreamRedactor:
    """Scrubs secrets from a stream whose pieces may cut a secret in two.

    `feed(piece)` returns what may leave now: the piece (after any carried-over bytes) with
    every whole secret replaced, minus its tail when that tail is the start of some secret;
    those bytes are held back and joined to the next piece. `end()` returns what is still
    held. Only a tail that could begin a secret is held (at most the longest secret's length
    − 1 bytes), so a stream of SSE events, which end in a newline, is not delayed at all.
    """

    def __init__(self, secrets: list[bytes]) -> None:
        self._secrets = secrets
        self._held = b""
        # The bytes a proper prefix of a secret can end in: a piece that ends in any other byte (an SSE
        # event ends in a newline) holds nothing back, and the search for a held tail is skipped.
        self._prefix_ends = frozenset(b for s in secrets for b in s[:-1])

    def feed(self, data: bytes) -> bytes:
        if not self._secrets:
            return data
        buf = self._held + data
        for s in self._secrets:
            if s in buf:
                buf = buf.replace(s, b"[REDACTED]")
        cut = len(buf) - (self._secret_start_at_end(buf) if buf and buf[-1] in self._prefix_ends else 0)
        self._held = buf[cut:]
        return buf[:cut]

    def end(self) -> bytes:
        """The bytes still held back: the start of a secret that never completed."""
        held, self._held = self._held, b""
        return held

    def _secret_start_at_end(self, buf: bytes) -> int:
        """The length of the longest tail of `buf` that is a proper prefix of some secret."""
        longest = 0
        for s in self._secrets:
            window = buf[-(len(s) - 1) :] if len(s) > 1 else b""
            i = window.find(s[:1])
            while i >= 0 and len(window) - i > longest:
                if s.startswith(window[i:]):
                    longest = len(window) - i
                    break
                i = window.find(s[:1], i + 1)
        return longest


class WarningCounter:
    """A transcript listener that counts `warning` events by (kind, message): what meta.json lists."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") == "warning":
            key = (str(event.get("kind")), str(event.get("message")))
            with self._lock:
                self._counts[key] = self._counts.get(key, 0) + 1

    def summary(self) -> list[dict[str, Any]]:
        """[{"kind", "message", "count"}], in the order they first happened."""
        with self._lock:
            return [{"kind": k, "message": m, "count": n} for (k, m), n in self._counts.items()]


class ToolCallCounter:
    """A transcript listener that counts `tool_call` events by tool name: meta.json `tool_calls`
    (the report's tool-use table). A target tool reached over MCP counts under its own name
    (`mcp__target__chat` -> `chat`), so every harness's calls of one tool line up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") == "tool_call":
            name = tool_name(str(event.get("name")))
            with self._lock:
                self._counts[name] = self._counts.get(name, 0) + 1

    def summary(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


MCP_TARGET_PREFIX = "mcp__target__"  # how Claude Code names the target MCP server's tools


def tool_name(name: str) -> str:
    """A tool call's name as the tool-use table counts it (the target MCP prefix dropped)."""
    return name.removeprefix(MCP_TARGET_PREFIX)


class TranscriptWriter:
    """Append-only JSONL writer. `emit` may be called from any thread."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        redactor: Redactor | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> None:
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._seq = 0
        self._redact = redactor or Redactor()
        self._f = None
        # sink(line): also gets every written line, already redacted (a run on a Ray node streams
        # its lines to the driver this way; see benchctl/executors/ray_node.py)
        self._sink = sink
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "ab", buffering=0)
        # callables(event), e.g. live progress; must be fast. They get the event as emitted, BEFORE
        # redaction (only the written line is scrubbed): a listener must not print or store its text.
        self.listeners: list[Any] = []

    def emit(self, type: EventType, source: Source = "runner", **fields: Any) -> dict[str, Any]:
        return self._write({"v": SCHEMA_VERSION, "seq": 0, "t": time.time(), "type": type, "source": source, **fields})

    def append_line(self, line: bytes) -> dict[str, Any]:
        """Write an event another writer made (a run on a Ray node streaming back), keeping its
        time, type and fields; `seq` is renumbered so this transcript stays gapless."""
        return self._write({**orjson.loads(line), "v": SCHEMA_VERSION})

    def _write(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            event["seq"] = self._seq
            self._seq += 1
            line = self._redact(orjson.dumps(event, option=_DUMP_OPTIONS))
            if self._f is not None:
                self._f.write(line)
            if self._sink is not None:
                self._sink(line)
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # a broken progress display must never break a run
                pass
        return event

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None

    def __enter__(self) -> TranscriptWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
