"""ScriptedUpstream: the Upstream that answers from a script or a Python callable, rendering the
chosen turn in the caller's wire API (benchctl.gateway.wire)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchctl.gateway import wire
from benchctl.gateway.scripted.request import ScriptRequest, script_request
from benchctl.gateway.scripted.script import Script, ScriptError, Turn, load_script, parse_script, parse_turn
from benchctl.gateway.upstream import ModelId, UpstreamCall, UpstreamResponse
from benchctl.gateway.wire.sse import error_headers, pieces_for


def estimate_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


@dataclass
class RenderedReply:
    """A fully rendered response: what to send and how to pace it (used by send() and the fake server)."""

    status: int
    headers: dict[str, str]
    pieces: list[bytes]
    delay: float = 0.0
    chunk_delay: float = 0.0
    served_model: str | None = None
    deferred: bool = False  # the turn was not given (a tool search went first): it answers the next request


def render_turn(
    turn: Turn, call: UpstreamCall, req: ScriptRequest, cached: tuple[int, int] | None = None
) -> RenderedReply:
    """The turn as the caller's wire API answers it. `cached`: (tokens read from, tokens written to)
    the prompt cache, when a simulated cache served the request (the fake upstream's PromptCache);
    they are taken out of the estimated input, unless the turn gives its own usage."""
    if turn.error:
        e = turn.error
        return RenderedReply(
            e["status"],
            error_headers(e["retry_after"]),
            [wire.error_body(call.wire_api, e["status"], e["message"], e["type"])],
            turn.delay,
        )
    spoken = wire.wire(call.wire_api)
    body = call.body or {}
    calls, text, deferred = turn.tool_calls, turn.text, False
    if calls:
        calls, searches = spoken.place_calls(calls, body)
        if searches:  # search first; the turn itself answers the next request
            calls, text, deferred = searches, "", True
    served = turn.model or req.model
    out_text = text + "".join(tc.arguments_json() + tc.name for tc in calls)
    # reasoning tokens, when the script gives none: estimated from the visible text (a redacted block's from its data)
    thinking = "".join(p.text or p.signature or "" for p in turn.reasoning)
    u = turn.usage
    reasoning_tokens = u.get("reasoning_tokens", estimate_tokens(thinking) if thinking else 0)
    prompt = estimate_tokens(req.full_text)
    given = any(k in u for k in ("input_tokens", "cached_input_tokens", "cache_write_tokens"))
    read, write = (0, 0) if cached is None or given else cached
    read = min(read, prompt)
    write = min(write, prompt - read)
    usage = wire.Usage(
        input_tokens=u.get("input_tokens", prompt - read - write),
        cached_input_tokens=u.get("cached_input_tokens", read),
        cache_write_tokens=u.get("cache_write_tokens", write),
        output_tokens=u.get("output_tokens", estimate_tokens(out_text) + reasoning_tokens),
        reasoning_tokens=reasoning_tokens,
    )
    reply = wire.Reply(text, list(calls), turn.refusal, turn.stop_reason, usage, served, reasoning=turn.reasoning)
    longest = max([len(text)] + [len(p.text) for p in turn.reasoning] + [len(tc.arguments_json()) for tc in calls])
    reply.chunk_chars = pieces_for(longest, turn.chunks)
    ctype, pieces = spoken.encode(reply, call.stream, body, call.query)
    headers = {"content-type": ctype}
    if ctype == "text/event-stream":
        headers["cache-control"] = "no-cache"
    return RenderedReply(200, headers, pieces, turn.delay, turn.chunk_delay if call.stream else 0.0, served, deferred)


TurnFunction = Callable[[ScriptRequest], Any]


def load_callable(spec: str) -> TurnFunction:
    """`py:package.module:function` -> the function."""
    target = spec[len("py:") :]
    mod_name, sep, fn_name = target.partition(":")
    if not sep or not mod_name or not fn_name:
        raise ScriptError(f"scripted model {spec!r}: a Python script must look like py:package.module:function")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ScriptError(f"scripted model {spec!r}: cannot import module {mod_name!r}: {e}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise ScriptError(f"scripted model {spec!r}: module {mod_name!r} has no callable {fn_name!r}")
    return fn


class ScriptedUpstream:
    """An Upstream that answers from a script (file, dict, Script) or a Python callable."""

    def __init__(self, spec: str | ModelId | Path | dict[str, Any] | Script | TurnFunction) -> None:
        self._fn: TurnFunction | None = None
        self.script: Script | None = None
        if isinstance(spec, ModelId):
            spec = spec.name
        if isinstance(spec, str) and spec.startswith("scripted/"):
            spec = spec[len("scripted/") :]
        if isinstance(spec, Script):
            self.script = spec
        elif isinstance(spec, dict):
            self.script = parse_script(spec, "<inline>")
        elif isinstance(spec, str) and spec.startswith("py:"):
            self._fn = load_callable(spec)
            self.source = spec
        elif isinstance(spec, (str, Path)):
            self.script = load_script(spec)
        elif callable(spec):
            self._fn = spec
            self.source = getattr(spec, "__qualname__", repr(spec))
        else:
            raise ScriptError(f"cannot make a scripted model from {spec!r}")
        if self.script is not None:
            self.source = self.script.source
        self._lock = threading.Lock()
        self._next = 0  # index into the in-order (non-match) turns
        self.calls = 0  # requests answered, for tests and stats

    # -- choosing a turn
    def choose(self, req: ScriptRequest) -> Turn:
        if self._fn is not None:
            with self._lock:
                self.calls += 1
                n = self.calls
            # Called outside the lock: a callable may be slow, and judges call concurrently.
            return self._call_fn(req, n - 1)
        with self._lock:
            self.calls += 1
            assert self.script is not None
            for t in self.script.turns:
                if t.match is not None:
                    hay = req.full_text if t.match_in == "request" else req.last_user_text
                    if t.match.search(hay):
                        return t
            ordered = [t for t in self.script.turns if t.match is None]
            if self._next < len(ordered):
                self._next += 1
                return ordered[self._next - 1]
            used = f"{len(ordered)} in-order turn(s) used, no match rule matched"
            if self.script.after_end == "stop":
                return Turn(text="[script finished]")
            if self.script.after_end == "repeat_last" and ordered:
                return ordered[-1]
            return Turn(
                error={
                    "status": 400,
                    "retry_after": None,
                    "type": None,
                    "message": f"scripted model {self.source}: script exhausted ({used}); add turns or set after_end",
                }
            )

    def _call_fn(self, req: ScriptRequest, index: int) -> Turn:
        out = self._fn(req)  # type: ignore[misc]
        if inspect.isawaitable(out):
            if inspect.iscoroutine(out):
                out.close()
            raise ScriptError(f"scripted model {self.source}: the function must be synchronous and return a turn dict")
        return parse_turn(out, self.source, index)

    def render(self, call: UpstreamCall, cached: tuple[int, int] | None = None) -> RenderedReply:
        """`cached`: see render_turn."""
        req = script_request(call)
        if call.wire_api == "anthropic_count_tokens":
            # A side call: answered from the request alone, so it never consumes a script turn.
            return RenderedReply(
                200,
                {"content-type": "application/json"},
                [orjson.dumps({"input_tokens": estimate_tokens(req.full_text)})],
            )
        turn = self.choose(req)
        rendered = render_turn(turn, call, req, cached)
        if rendered.deferred:
            self._put_back(turn)
        return rendered

    def _put_back(self, turn: Turn) -> None:
        """Undo using up an in-order turn (rules and callables are asked again anyway)."""
        with self._lock:
            if self.script is not None and turn.match is None and self._next > 0:
                ordered = [t for t in self.script.turns if t.match is None]
                if ordered[self._next - 1] is turn:
                    self._next -= 1

    # -- the Upstream protocol
    async def send(self, call: UpstreamCall) -> UpstreamResponse:
        rendered = self.render(call)
        if rendered.delay:
            await asyncio.sleep(rendered.delay)

        async def body() -> AsyncIterator[bytes]:
            for i, piece in enumerate(rendered.pieces):
                if i and rendered.chunk_delay:
                    await asyncio.sleep(rendered.chunk_delay)
                yield piece

        return UpstreamResponse(rendered.status, rendered.headers, body(), rendered.served_model)

    async def aclose(self) -> None:
        return None
