"""The host side of benchctl's CLI hooks: a gateway route that applies the run's policies.

The in-sandbox hook script (hook.py) POSTs `{"event", "cli", "input"}` to
`/benchctl/hooks/<event>` on the gateway's unix socket. The agent runs as the same user and can
post the same itself, so nothing in a hook is taken on trust:

- a hook counts only when it matches what the gateway saw of the model traffic itself
  (ledger.py): a PostToolUse for a tool call the model issued in that session and whose result
  has not gone back yet; a Stop when the session's last model response ended the turn. Anything
  else is refused (answered `{}`), recorded as a `forged_hook` event (source `policy`) and counts
  nothing;
- each tool call gets its notices once, at its first PostToolUse, and each turn end its stop
  decision once: a second post for the same tool call or the same turn end (the CLI's own, after
  one the agent sent first) gets the same answer again and changes no counter;
- the length-policy file is read by the host from the container (Sandbox.get_file), never taken
  from the hook, so no marker or file in the sandbox decides whether a word count is due.

`HookHost.handle` answers with the hook output JSON both Claude Code and Codex understand:

- post_tool_use: `{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext":
  "<time remaining>[\n<word count>]"}}` (the word count only when the length-policy file
  changed since the previous tool call), or `{}` when there is nothing to say;
- stop: `{"decision": "block", "reason": <message>}` while `benchctl.policies.stop_decision`
  says reprompt or revision, else `{}`. After a refusal that made the gateway switch to its
  fallback model, a stop with no assistant text (Codex drops refused turns silently) is
  blocked once with a plain "continue" so the fallback model gets the turn.

Every honoured call writes transcript events: `hook`, and `notice` / `reprompt` /
`revision_request` with the same fields the ReAct harness writes, so transcripts look alike
across harnesses. `tool_id` is the model's tool-call id; for Codex, whose stream names tool calls
by its own item ids, `hook` and `notice` events also carry `item_id` (see
harnesses/codex/stream.py).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from benchctl.harness import HarnessContext, cost_stopped, fallback_count, tool_notices
from benchctl.policies import stop_decision
from benchctl.sandbox.base import WORK_DIR
from harnesses.hooks.ledger import HookLedger

ROUTE_PREFIX = "/benchctl/hooks/"
FALLBACK_CONTINUE = (
    "Your previous response was not delivered. Continue the task from where you left off; "
    "do not stop until the work is complete."
)

MAX_FILE_BYTES = 20_000_000  # the length-policy file is read whole from the container up to this size
Response = tuple[int, dict[str, str], bytes]


def policy_file_path(ctx: HarnessContext) -> str | None:
    """Absolute in-sandbox path of the length-policy file (relative paths live under /work)."""
    lp = ctx.policies.length
    if lp is None:
        return None
    return lp.file if lp.file.startswith("/") else f"{WORK_DIR}/{lp.file}"


class HookHost:
    """Applies the run's policies when a CLI hook fires. One per run (per HarnessContext)."""

    def __init__(
        self, ctx: HarnessContext, cli: str, clock: Callable[[], float] = time.time, ledger: HookLedger | None = None
    ) -> None:
        self.ctx = ctx
        self.cli = cli
        self.clock = clock
        self.ledger = ledger if ledger is not None else HookLedger()
        self.counts: dict[str, int] = {}  # honoured hooks (a forged or repeated one counts nothing)
        self._lock = threading.Lock()
        self._fallbacks_nudged = 0
        self._tool_answers: dict[str, dict[str, Any]] = {}  # tool call -> its PostToolUse answer
        self._stop_answers: dict[str, dict[str, Any]] = {}  # turn end (ledger) -> stop answer
        self._file_digest: bytes | None = None  # the length-policy file as of the last tool call
        # Set per phase by a CLI whose stream ids differ from the model's call ids (Codex:
        # harnesses/codex/stream.ToolItems); the hook event then records both.
        self.tool_items: Any = None
        self._tokens: Any = None  # benchctl.targets token budget, when the run has one
        if ctx.token_budget is not None:
            from benchctl.targets.token_budget import TokenBudgetHook

            self._tokens = TokenBudgetHook()

    # -- the gateway route ------------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes) -> Response:
        event = path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if method != "POST" or event not in ("post_tool_use", "stop"):
            return self._json(
                404, {"error": f"no hook {method} {path}; expected POST {ROUTE_PREFIX}post_tool_use|stop"}
            )
        try:
            payload = orjson.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("payload is not a JSON object")
            inp = payload.get("input") or {}
            if not isinstance(inp, dict):
                raise ValueError("input is not a JSON object")
        except ValueError as e:  # recorded like a forged hook: the first few, then only counted
            count = getattr(self.ctx.gateway, "refused", None)
            if count is None or count("bad_hook", str(e)):
                self.ctx.transcript.emit("error", "harness", message=f"bad hook payload for {event}: {e}")
            return self._json(400, {"error": f"bad hook payload: {e}"})
        try:
            with self._lock:  # one decision at a time: stop counters must not race
                out = self.post_tool_use(inp) if event == "post_tool_use" else self.stop(inp)
        except Exception as e:  # a policy bug must not take the agent down; record it loudly
            self.ctx.transcript.emit(
                "error", "harness", message=f"hook {event} failed on the host: {type(e).__name__}: {e}"
            )
            out = {}
        return self._json(200, out)

    @staticmethod
    def _json(status: int, obj: dict[str, Any]) -> Response:
        return status, {"content-type": "application/json"}, orjson.dumps(obj)

    def _forged(self, event: str, why: str, **fields: Any) -> dict[str, Any]:
        """Refuse a hook the gateway's own view contradicts: record it (the first few; see
        Gateway.refused) and answer as if no hook had run."""
        count = getattr(self.ctx.gateway, "refused", None)
        if count is None or count("forged_hook", why):
            self.ctx.transcript.emit("forged_hook", "policy", cli=self.cli, event=event, reason=why, **fields)
        return {}

    def _count(self, event: str) -> None:
        self.counts[event] = self.counts.get(event, 0) + 1

    # -- the length-policy file, read by the host ---------------------------------------------

    def _read_policy_file(self) -> bytes | None:
        path = policy_file_path(self.ctx)
        if path is None:
            return None
        try:
            return self.ctx.sandbox.get_file(path, max_bytes=MAX_FILE_BYTES)
        except FileNotFoundError:
            return None
        except Exception as e:  # a symlink, a directory, too big, the sandbox gone: no word count
            self.ctx.transcript.emit("error", "harness", message=f"could not read {path} for its word count: {e}")
            return None

    def _changed_policy_file(self) -> str | None:
        """The length-policy file's text when it changed since the previous tool call, else None."""
        data = self._read_policy_file()
        digest = None if data is None else hashlib.sha256(data).digest()
        changed, self._file_digest = digest != self._file_digest, digest
        return data.decode("utf-8", errors="replace") if changed and data is not None else None

    # -- policies ----------------------------------------------------------------------------

    def post_tool_use(self, inp: dict[str, Any]) -> dict[str, Any]:
        tr, now = self.ctx.transcript, self.clock()
        tool_id, tool_name = inp.get("tool_use_id"), inp.get("tool_name")
        why = self.ledger.check_tool_call(inp.get("session_id"), tool_id)
        if why is not None:
            return self._forged("PostToolUse", why, tool_id=tool_id, tool_name=tool_name)
        assert isinstance(tool_id, str)  # the ledger passes only a tool call it issued, whose id is a str
        if tool_id in self._tool_answers:  # its notices were given: the same answer, nothing counted
            tr.emit(
                "hook", "harness", cli=self.cli, event="PostToolUse", tool_name=tool_name, tool_id=tool_id, repeat=True
            )
            return self._tool_answers[tool_id]
        self._count("post_tool_use")
        ids: dict[str, Any] = {}
        if self.tool_items is not None:
            ids["item_id"] = self.tool_items.claim(tool_name, inp.get("tool_input"))
        text = self._changed_policy_file()
        tr.emit(
            "hook",
            "harness",
            cli=self.cli,
            event="PostToolUse",
            tool_name=tool_name,
            tool_id=tool_id,
            file_changed=text is not None,
            **ids,
        )
        parts = tool_notices(self.ctx, tool_id, text, now, **ids)
        stop = self.ctx.stop
        if (
            stop is not None and stop.is_set()
        ):  # the final notice (recorded when the cap was reached); the CLI ends next
            parts.append(str(stop.info.get("notice") or stop.reason))
        if self._tokens is not None:
            tokens = self._tokens.after_tool(self.ctx, tool_id, now)
            if tokens:
                parts.append(tokens)
        answer = (
            {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "\n".join(parts)}}
            if parts
            else {}
        )
        self._tool_answers[tool_id] = answer
        return answer

    def stop(self, inp: dict[str, Any]) -> dict[str, Any]:
        ctx, tr, pol, now = self.ctx, self.ctx.transcript, self.ctx.policies, self.clock()
        key, why = self.ledger.check_turn_end(inp.get("session_id"))
        if key is None:
            return self._forged("Stop", str(why))
        if key in self._stop_answers:  # this turn end was decided: the same answer, nothing counted
            tr.emit(
                "hook", "harness", cli=self.cli, event="Stop", stop_hook_active=inp.get("stop_hook_active"), repeat=True
            )
            return self._stop_answers[key]
        self._count("stop")
        if cost_stopped(ctx):  # a cost cap: let it stop, never ask for more
            tr.emit(
                "hook",
                "harness",
                cli=self.cli,
                event="Stop",
                stop_hook_active=inp.get("stop_hook_active"),
                decision="stop",
            )
            self._stop_answers[key] = {}
            return {}
        data = self._read_policy_file() if pol.length is not None else None
        text = data.decode("utf-8", errors="replace") if data is not None else None
        decision = stop_decision(ctx.budget, now, ctx.stop_state, pol.early_exit, pol.length, text)
        last = inp.get("last_assistant_message")
        kind, message = decision.kind, decision.message
        if kind == "stop" and not last and not ctx.budget.expired(now):
            fallbacks = fallback_count(ctx)
            if fallbacks > self._fallbacks_nudged:
                self._fallbacks_nudged = fallbacks
                kind, message = "fallback_continue", FALLBACK_CONTINUE
        tr.emit(
            "hook", "harness", cli=self.cli, event="Stop", stop_hook_active=inp.get("stop_hook_active"), decision=kind
        )
        elapsed = round(now - ctx.budget.start, 3)
        answer: dict[str, Any] = {}
        if kind == "revision":
            tr.emit(
                "revision_request",
                "policy",
                text=message,
                elapsed_s=elapsed,
                reprompts=ctx.stop_state.reprompts,
                revisions=ctx.stop_state.revisions,
            )
        elif kind != "stop":
            tr.emit(
                "reprompt",
                "policy",
                text=message,
                elapsed_s=elapsed,
                reason=kind,
                reprompts=ctx.stop_state.reprompts,
                revisions=ctx.stop_state.revisions,
            )
        if kind != "stop":
            answer = {"decision": "block", "reason": message or "Continue."}
        self._stop_answers[key] = answer
        return answer


def install(ctx: HarnessContext, cli: str, clock: Callable[[], float] = time.time) -> HookHost:
    """Create the run's HookHost and register it on the run's gateway: its route, and its ledger as
    an observer of the model traffic (before the CLI's first call)."""
    host = HookHost(ctx, cli, clock)
    ctx.gateway.add_observer(host.ledger)
    ctx.gateway.add_route(ROUTE_PREFIX, host.handle)
    return host
