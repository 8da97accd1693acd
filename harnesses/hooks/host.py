"""The host side of benchctl's CLI hooks: a gateway route that applies the run's policies.

The in-sandbox hook script (hook.py) POSTs `{"event", "cli", "input", "file"}` to
`/benchctl/hooks/<event>` on the gateway's unix socket. `HookHost.handle` answers with the
hook output JSON both Claude Code and Codex understand:

- post_tool_use: `{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext":
  "<time remaining>[\n<word count>]"}}` (the word count only when the length-policy file
  changed), or `{}` when there is nothing to say;
- stop: `{"decision": "block", "reason": <message>}` while `benchctl.policies.stop_decision`
  says reprompt or revision, else `{}`. After a refusal that made the gateway switch to its
  fallback model, a stop with no assistant text (Codex drops refused turns silently) is
  blocked once with a plain "continue" so the fallback model gets the turn.

Every call writes transcript events: `hook`, and `notice` / `reprompt` / `revision_request`
with the same fields the ReAct harness writes, so transcripts look alike across harnesses.
`tool_id` is the model's tool-call id; for Codex, whose stream names tool calls by its own item
ids, `hook` and `notice` events also carry `item_id` (see harnesses/codex/stream.py).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import orjson

from benchctl.policies import stop_decision
from benchctl.sandbox.base import WORK_DIR
from harnesses.base import HarnessContext, cost_stopped, fallback_count, tool_notices

ROUTE_PREFIX = "/benchctl/hooks/"
FALLBACK_CONTINUE = ("Your previous response was not delivered. Continue the task from where you left off; "
                     "do not stop until the work is complete.")

Response = tuple[int, dict[str, str], bytes]


def policy_file_path(ctx: HarnessContext) -> str | None:
    """Absolute in-sandbox path of the length-policy file (relative paths live under /work)."""
    lp = ctx.policies.length
    if lp is None:
        return None
    return lp.file if lp.file.startswith("/") else f"{WORK_DIR}/{lp.file}"


class HookHost:
    """Applies the run's policies when a CLI hook fires. One per run (per HarnessContext)."""

    def __init__(self, ctx: HarnessContext, cli: str, clock: Callable[[], float] = time.time) -> None:
        self.ctx = ctx
        self.cli = cli
        self.clock = clock
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._fallbacks_nudged = 0
        # Set per phase by a CLI whose stream ids differ from the model's call ids (Codex:
        # harnesses/codex/stream.ToolItems); the hook event then records both.
        self.tool_items: Any = None
        self._tokens: Any = None          # benchctl.targets token budget, when the run has one
        if ctx.token_budget is not None:
            from benchctl.targets.token_budget import TokenBudgetHook
            self._tokens = TokenBudgetHook()

    # -- the gateway route ------------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes) -> Response:
        event = path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if method != "POST" or event not in ("post_tool_use", "stop"):
            return self._json(404, {"error": f"no hook {method} {path}; expected POST {ROUTE_PREFIX}post_tool_use|stop"})
        try:
            payload = orjson.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("payload is not a JSON object")
        except ValueError as e:
            self.ctx.transcript.emit("error", "harness", message=f"bad hook payload for {event}: {e}")
            return self._json(400, {"error": f"bad hook payload: {e}"})
        try:
            with self._lock:          # one decision at a time: stop counters must not race
                self.counts[event] = self.counts.get(event, 0) + 1
                out = self.post_tool_use(payload) if event == "post_tool_use" else self.stop(payload)
        except Exception as e:  # a policy bug must not take the agent down; record it loudly
            self.ctx.transcript.emit("error", "harness", message=f"hook {event} failed on the host: {type(e).__name__}: {e}")
            out = {}
        return self._json(200, out)

    @staticmethod
    def _json(status: int, obj: dict[str, Any]) -> Response:
        return status, {"content-type": "application/json"}, orjson.dumps(obj)

    # -- policies ----------------------------------------------------------------------------

    def _file_text(self, payload: dict[str, Any]) -> str | None:
        f = payload.get("file")
        want = policy_file_path(self.ctx)
        if not isinstance(f, dict) or want is None or f.get("path") != want:
            return None
        text = f.get("text")
        return text if isinstance(text, str) else None

    def post_tool_use(self, payload: dict[str, Any]) -> dict[str, Any]:
        inp = payload.get("input") or {}
        tr, now = self.ctx.transcript, self.clock()
        tool_id = inp.get("tool_use_id")
        ids: dict[str, Any] = {}
        if self.tool_items is not None:
            ids["item_id"] = self.tool_items.claim(inp.get("tool_name"), inp.get("tool_input"))
        tr.emit("hook", "harness", cli=self.cli, event="PostToolUse", tool_name=inp.get("tool_name"),
                tool_id=tool_id, file_changed=payload.get("file") is not None, **ids)
        parts = tool_notices(self.ctx, tool_id, self._file_text(payload), now, **ids)
        if cost_stopped(self.ctx):     # the final notice (recorded when the cap was reached); the CLI ends next
            parts.append(str(self.ctx.stop.info.get("notice") or self.ctx.stop.reason))
        if self._tokens is not None:
            tokens = self._tokens.after_tool(self.ctx, tool_id, now)
            if tokens:
                parts.append(tokens)
        if not parts:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "\n".join(parts)}}

    def stop(self, payload: dict[str, Any]) -> dict[str, Any]:
        inp = payload.get("input") or {}
        ctx, tr, pol, now = self.ctx, self.ctx.transcript, self.ctx.policies, self.clock()
        if cost_stopped(ctx):          # a cost cap: let it stop, never ask for more
            tr.emit("hook", "harness", cli=self.cli, event="Stop", stop_hook_active=inp.get("stop_hook_active"),
                    decision="stop")
            return {}
        decision = stop_decision(ctx.budget, now, ctx.stop_state, pol.early_exit, pol.length, self._file_text(payload))
        last = inp.get("last_assistant_message")
        kind, message = decision.kind, decision.message
        if kind == "stop" and not last and not ctx.budget.expired(now):
            fallbacks = fallback_count(ctx)
            if fallbacks > self._fallbacks_nudged:
                self._fallbacks_nudged = fallbacks
                kind, message = "fallback_continue", FALLBACK_CONTINUE
        tr.emit("hook", "harness", cli=self.cli, event="Stop", stop_hook_active=inp.get("stop_hook_active"),
                decision=kind)
        elapsed = round(now - ctx.budget.start, 3)
        if kind == "stop":
            return {}
        if kind == "revision":
            tr.emit("revision_request", "policy", text=message, elapsed_s=elapsed,
                    reprompts=ctx.stop_state.reprompts, revisions=ctx.stop_state.revisions)
        else:
            tr.emit("reprompt", "policy", text=message, elapsed_s=elapsed, reason=kind,
                    reprompts=ctx.stop_state.reprompts, revisions=ctx.stop_state.revisions)
        return {"decision": "block", "reason": message or "Continue."}


def install(ctx: HarnessContext, cli: str, clock: Callable[[], float] = time.time) -> HookHost:
    """Create the run's HookHost and register it on the run's gateway."""
    host = HookHost(ctx, cli, clock)
    ctx.gateway.add_route(ROUTE_PREFIX, host.handle)
    return host
