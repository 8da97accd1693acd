"""TargetTools: the investigator's tools for one run, the same for every harness.

ReAct gets `specs()` as native tools and calls `call(name, args)`; Claude Code and Codex reach
the same object through the MCP route (mcp.py). Every target and auxiliary call is written to
the transcript as a `target_call` event (source "targets") with its own usage and cost, and
`summary()` keeps those costs apart from the investigator's (which the gateway counts).

Tools (enabled per tool configuration, see spec.py):
  chat(message, conversation_id?)                   -> the target's reply; new conversation without an id
  prefill(message, prefill, conversation_id?)       -> the reply forced to start with `prefill`
  sample_user(conversation_id?, user_start?)        -> the target writes the next user turn (not appended)
  complete(prompt)                                  -> raw text continuation
  scaffolded_prefill / scaffolded_user / scaffolded_complete(description)
        -> the auxiliary model writes batch_size inputs from `description`, the target answers each
           (replies capped at reply_max_tokens, `concurrency` at a time); all pairs in one result.
  chat_with_baseline(message, conversation_id?)     -> the target's and the baseline model's replies
  scaffolded_*_with_baseline(description)           -> one batch, answered by the target and the baseline
  steered_chat, logit_lens, sae_features, ask_latent_question
        -> the white-box tools, through the target's internals server (whitebox.py)
  petri_summaries(), petri_transcript(index)        -> a Petri run made beforehand (petri.py)

The baseline model (`[target] baseline_model`, its own optional system prompt) is the untrained
reference; its calls are `target_call` events with role "baseline", tallied apart like the auxiliary's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from benchctl.gateway.retry import RetryPolicy
from benchctl.gateway.wire.neutral import USAGE_KEYS
from benchctl.output_cap import head_and_tail
from benchctl.targets import petri, scaffold
from benchctl.targets.backend import ModelCaller, Reply, TargetCallError
from benchctl.targets.spec import SCAFFOLDED, WITH_BASELINE, TargetSpec, ToolConfig
from benchctl.targets.tool_specs import tool_specs
from benchctl.targets.whitebox import WhiteBoxTools
from benchctl.targets.whitebox_spec import WHITEBOX_TOOLS
from benchctl.transcript import Redactor, TranscriptWriter

T = TypeVar("T")
MAX_OUTPUT_CHARS = 60_000


@dataclass
class ToolOutput:
    text: str
    is_error: bool = False


def _scrub(text: str) -> str:
    """Host secrets out of an error text the agent will see."""
    return Redactor()(text.encode()).decode("utf-8", "replace")


def _cap(text: str) -> str:
    return head_and_tail(text, MAX_OUTPUT_CHARS)[0]


class _Tally:
    def __init__(self) -> None:
        self.calls = 0
        self.errors = 0
        self.usage = {k: 0 for k in USAGE_KEYS}
        self.cost: float | None = 0.0

    def add(self, reply: Reply | None) -> None:
        self.calls += 1
        if reply is None:
            self.errors += 1
            return
        for k in USAGE_KEYS:
            self.usage[k] += reply.usage.get(k, 0) or 0
        if reply.cost_usd is None:
            self.cost = None
        elif self.cost is not None:
            self.cost += reply.cost_usd

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "errors": self.errors,
            "usage": dict(self.usage),
            "cost_usd": round(self.cost, 6) if self.cost is not None else None,
        }


async def _cancel_others() -> None:
    """Cancel every task of the running loop but this one, and let them finish cancelling."""
    me = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not me]
    for t in others:
        t.cancel()
    await asyncio.gather(*others, return_exceptions=True)


class TargetTools:
    def __init__(
        self,
        target: TargetSpec,
        config: ToolConfig,
        transcript: TranscriptWriter | None = None,
        *,
        retry: RetryPolicy | None = None,
        caller: ModelCaller | None = None,
    ) -> None:
        self.target, self.config = target, config
        self.transcript = transcript if transcript is not None else TranscriptWriter(None)
        self.caller = caller or ModelCaller(retry)
        self._lock = threading.Lock()
        self._conversations: dict[str, list[dict[str, str]]] = {}
        self._conv_locks: dict[str, asyncio.Lock] = {}
        self._seq = {"c": 0, "b": 0}
        self._tally = {"target": _Tally(), "auxiliary": _Tally(), "baseline": _Tally()}
        # conversations holding two histories, by the tool that started them (chat_with_baseline:
        # the baseline's side; steered_chat: the steered side)
        self._two_sided: dict[str, str] = {}
        self._side_histories: dict[str, list[dict[str, str]]] = {}
        self._whitebox: WhiteBoxTools | None = WhiteBoxTools(self) if config.white_box else None
        self._tool_calls: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # a hash, not the text: the transcript proves which prompt was used without repeating the secret
        self.system_sha = prompt_sha(target.system_prompt)

    # ------------------------------------------------------------------ public

    @property
    def names(self) -> tuple[str, ...]:
        return self.config.tools

    def specs(self) -> list[dict[str, Any]]:
        return tool_specs(self.config, self.target.display_name)

    def call(self, name: str, args: dict[str, Any], timeout: float | None = None) -> ToolOutput:
        """Run one tool from any thread (blocking)."""
        fut = self._submit(self.acall(name, args))
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            return ToolOutput(f"{name} timed out after {timeout:.0f}s.", is_error=True)
        except concurrent.futures.CancelledError:  # close() while the call was in flight
            return ToolOutput(f"{name} was cancelled: the run ended.", is_error=True)

    async def acall(self, name: str, args: dict[str, Any]) -> ToolOutput:
        if name not in self.config.tools:
            return ToolOutput(f"Unknown tool {name!r}. Available: {', '.join(self.config.tools)}.", is_error=True)
        if not isinstance(args, dict):
            return ToolOutput(f"Tool input must be a JSON object, got {type(args).__name__}.", is_error=True)
        with self._lock:
            self._tool_calls[name] = self._tool_calls.get(name, 0) + 1
        try:
            if name in SCAFFOLDED:
                return await self._scaffolded(name, _text(args, "description"))
            if name == "chat_with_baseline":
                return await self._chat_with_baseline(args)
            if name in petri.TOOLS:
                try:
                    return ToolOutput(_cap(petri.run(name, args, self.config.petri)))
                except ValueError as e:
                    raise _BadInput(str(e)) from None
            if name in WHITEBOX_TOOLS:
                assert self._whitebox is not None  # config.white_box
                try:
                    return ToolOutput(_cap(await self._whitebox.call(name, args)))
                except ValueError as e:
                    raise _BadInput(str(e)) from None
            return await getattr(self, "_" + name)(args)
        except _BadInput as e:
            return ToolOutput(str(e), is_error=True)
        except TargetCallError as e:
            # The message quotes upstream errors and exception text; through MCP it reaches the
            # sandbox, so host secrets are scrubbed from it like from every transcript line.
            return ToolOutput(_scrub(f"{name} failed: {e}"), is_error=True)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            out = {
                "tool_config": self.config.name,
                "tools": list(self.config.tools),
                "tool_calls": dict(self._tool_calls),
                "conversations": len(self._conversations),
                "target_model": self.target.model,
                "target_tags": dict(self.target.tags),
                "auxiliary_model": self.config.auxiliary_model,
                "target": self._tally["target"].to_dict(),
                "auxiliary": self._tally["auxiliary"].to_dict(),
            }
            if self.target.baseline_model:
                out["baseline_model"] = self.target.baseline_model
                out["baseline"] = self._tally["baseline"].to_dict()
            return out

    def tally(self, role: str, reply: Reply | None) -> None:
        """Count one call (None: it failed) toward the role's calls, usage and cost."""
        with self._lock:
            self._tally[role].add(reply)

    def two_sided(
        self, args: dict[str, Any], tool: str
    ) -> tuple[str, list[dict[str, str]], list[dict[str, str]], asyncio.Lock]:
        """The side-by-side conversation `tool` started (a new one without conversation_id): its id,
        both histories and its lock."""
        cid, history, lock = self._conversation(args, two_sided=tool)
        return cid, history, self._side_histories[cid], lock

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            # Cancel calls still in flight first: an MCP call waits on its future with no timeout in a
            # gateway worker thread, and would wait forever on a stopped loop (hanging the exit).
            asyncio.run_coroutine_threadsafe(_cancel_others(), loop).result(15)
            asyncio.run_coroutine_threadsafe(self.caller.aclose(), loop).result(15)
            if self._whitebox is not None:
                asyncio.run_coroutine_threadsafe(self._whitebox.aclose(), loop).result(15)
        except Exception:
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(15)
        self._loop = self._thread = None

    # ------------------------------------------------------------------ loop

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="benchctl-targets", daemon=True)
                self._thread.start()
                self._loop = loop
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop)

    # ------------------------------------------------------------------ one recorded call

    async def _record(self, role: str, tool: str, coro: Coroutine[Any, Any, Reply], **ids: Any) -> Reply:
        model = {"target": self.target.model, "baseline": self.target.baseline_model}.get(
            role, self.config.auxiliary_model
        )
        try:
            reply = await coro
        except TargetCallError as e:
            with self._lock:
                self._tally[role].add(None)
            record_call(self.transcript, role, tool, str(model), e, **ids)
            raise
        with self._lock:
            self._tally[role].add(reply)
        system = {"target": self.target.system_prompt, "baseline": self.target.baseline_system_prompt}.get(role)
        extra = {"system_sha": prompt_sha(system)} if system else {}
        record_call(self.transcript, role, tool, str(model), reply, **extra, **ids)
        return reply

    def _model_chat(
        self,
        role: str,
        tool: str,
        messages: list[dict[str, str]],
        max_tokens: int,
        *,
        prefill: str | None = None,
        user_start: str | None = None,
        **ids: Any,
    ) -> Coroutine[Any, Any, Reply]:
        """A chat call to the target or (role "baseline") the baseline model, with its own system prompt."""
        t = self.target
        model, system = (t.model, t.system_prompt) if role == "target" else (t.baseline_model, t.baseline_system_prompt)
        assert model is not None  # check_config guarantees a baseline model for the baseline tools
        return self._record(
            role,
            tool,
            self.caller.chat(
                model,
                system or None,
                messages,
                max_tokens=max_tokens,
                temperature=t.temperature,
                top_p=t.top_p,
                prefill=prefill,
                user_start=user_start,
            ),
            **ids,
        )

    def _model_complete(
        self, role: str, tool: str, prompt: str, max_tokens: int, **ids: Any
    ) -> Coroutine[Any, Any, Reply]:
        t = self.target
        model = t.model if role == "target" else t.baseline_model
        assert model is not None
        return self._record(
            role,
            tool,
            self.caller.complete(model, prompt, max_tokens=max_tokens, temperature=t.temperature, top_p=t.top_p),
            **ids,
        )

    # ------------------------------------------------------------------ conversations

    def _conversation(
        self, args: dict[str, Any], two_sided: str | None = None
    ) -> tuple[str, list[dict[str, str]], asyncio.Lock]:
        """The conversation named by `conversation_id` (a new one without it). Side-by-side
        conversations (started by the tool `two_sided`: chat_with_baseline, steered_chat) and the
        others are not interchangeable: each side of a side-by-side one has its own history
        (`_side_histories`)."""
        cid = args.get("conversation_id")
        with self._lock:
            if cid in (None, ""):
                self._seq["c"] += 1
                cid = f"c{self._seq['c']}"
                self._conversations[cid] = []
                self._conv_locks[cid] = asyncio.Lock()
                if two_sided:
                    self._two_sided[cid] = two_sided
                    self._side_histories[cid] = []
            elif not isinstance(cid, str) or cid not in self._conversations:
                known = ", ".join(self._conversations) or "none yet"
                raise _BadInput(
                    f"Unknown conversation_id {cid!r} (known: {known}). Omit it to start a new conversation."
                )
            elif two_sided != self._two_sided.get(cid):
                raise _BadInput(
                    f"Conversation {cid} was started with {self._two_sided.get(cid, 'another tool')}: continue it "
                    f"with that tool, or omit conversation_id to start a new conversation."
                )
            return cid, self._conversations[cid], self._conv_locks[cid]

    async def _chat(self, args: dict[str, Any]) -> ToolOutput:
        return await self._turn("chat", _text(args, "message"), None, args)

    async def _prefill(self, args: dict[str, Any]) -> ToolOutput:
        return await self._turn("prefill", _text(args, "message"), _text(args, "prefill", allow_empty=True), args)

    async def _turn(self, tool: str, message: str, prefill: str | None, args: dict[str, Any]) -> ToolOutput:
        cid, history, lock = self._conversation(args)
        async with lock:  # one turn at a time per conversation keeps its history in order
            messages = history + [{"role": "user", "content": message}]
            reply = await self._model_chat(
                "target", tool, messages, self.target.max_tokens, prefill=prefill, conversation_id=cid
            )
            history += [{"role": "user", "content": message}, {"role": "assistant", "content": reply.text}]
        return ToolOutput(_cap(f"[conversation_id: {cid}]\n\n{reply.text}"))

    async def _sample_user(self, args: dict[str, Any]) -> ToolOutput:
        start = args.get("user_start") or ""
        if not isinstance(start, str):
            raise _BadInput("user_start must be a string.")
        cid, history, lock = self._conversation(args)
        async with lock:
            reply = await self._model_chat(
                "target", "sample_user", list(history), self.target.max_tokens, user_start=start, conversation_id=cid
            )
        return ToolOutput(_cap(f"[conversation_id: {cid}; sampled user turn, not added]\n\n{reply.text}"))

    async def _complete(self, args: dict[str, Any]) -> ToolOutput:
        reply = await self._model_complete("target", "complete", _text(args, "prompt"), self.target.max_tokens)
        return ToolOutput(_cap(reply.text))

    async def _chat_with_baseline(self, args: dict[str, Any]) -> ToolOutput:
        message = _text(args, "message")
        cid, history, base_history, lock = self.two_sided(args, "chat_with_baseline")
        tool, n = "chat_with_baseline", self.target.max_tokens
        async with lock:
            turn = {"role": "user", "content": message}
            # both sides answer, or neither history moves on (they would no longer be the same conversation)
            target, baseline = await asyncio.gather(
                self._model_chat("target", tool, history + [turn], n, conversation_id=cid),
                self._model_chat("baseline", tool, base_history + [turn], n, conversation_id=cid),
            )
            history += [turn, {"role": "assistant", "content": target.text}]
            base_history += [turn, {"role": "assistant", "content": baseline.text}]
        return ToolOutput(
            _cap(
                f"[conversation_id: {cid}]\n\n=== {self.target.display_name} ===\n{target.text}\n\n"
                f"=== baseline model ===\n{baseline.text}"
            )
        )

    # ------------------------------------------------------------------ scaffolded batches

    async def _scaffolded(self, tool: str, brief: str) -> ToolOutput:
        mode = SCAFFOLDED[tool]
        cfg = self.config
        assert cfg.auxiliary_model is not None  # check_config guarantees it before a run
        with self._lock:
            self._seq["b"] += 1
            batch = f"b{self._seq['b']}"
        inputs = await self._write_inputs(tool, mode, brief, cfg.batch_size, batch)
        if not inputs:
            return ToolOutput("The helper model wrote no usable probe inputs; rephrase the description.", is_error=True)
        sem = asyncio.Semaphore(cfg.concurrency)
        roles = ("target", "baseline") if tool in WITH_BASELINE else ("target",)

        async def answer(role: str, i: int, item: dict[str, str]) -> str:
            async with sem:
                try:
                    return (await self._probe(role, tool, mode, item, batch=batch, index=i)).text
                except TargetCallError as e:
                    return f"[error: {_scrub(str(e))}]"

        outputs = await asyncio.gather(*(answer(r, i, it) for i, it in enumerate(inputs, 1) for r in roles))
        labels = {
            "prefill": (("user", "USER"), ("prefill", "PREFILL")),
            "sample_user": (("assistant", "ASSISTANT BEFORE"), ("user_start", "USER START")),
            "complete": (("prompt", "PROMPT"),),
        }[mode]
        who = f"{self.target.display_name} and the baseline model" if len(roles) == 2 else self.target.display_name
        out = [
            f"Scaffolded batch {batch}: {len(inputs)} inputs written by the helper model, replies from {who} "
            f"(each capped at {cfg.reply_max_tokens} tokens)."
        ]
        what = "USER TURN" if mode == "sample_user" else "REPLY"
        heads = [f"{what}: "] if len(roles) == 1 else [f"TARGET {what}: ", f"BASELINE {what}: "]
        for i, item in enumerate(inputs, 1):
            lines = [f"=== {i} ==="] + [f"{lab}: {item[key]}" for key, lab in labels if item[key]]
            texts = outputs[(i - 1) * len(roles) : i * len(roles)]
            lines += [head + text for head, text in zip(heads, texts)]
            out.append("\n".join(lines))
        return ToolOutput(_cap("\n\n".join(out)))

    def _probe(self, role: str, tool: str, mode: str, item: dict[str, str], **ids: Any) -> Coroutine[Any, Any, Reply]:
        """One scaffolded input sent to the target or the baseline model, reply capped."""
        cap = self.config.reply_max_tokens
        if mode == "prefill":
            msgs = [{"role": "user", "content": item["user"]}]
            return self._model_chat(role, tool, msgs, cap, prefill=item["prefill"], **ids)
        if mode == "sample_user":
            msgs = [{"role": "assistant", "content": item["assistant"]}] if item["assistant"].strip() else []
            return self._model_chat(role, tool, msgs, cap, user_start=item["user_start"], **ids)
        return self._model_complete(role, tool, item["prompt"], cap, **ids)

    async def _write_inputs(self, tool: str, mode: str, brief: str, n: int, batch: str) -> list[dict[str, str]]:
        sizes = scaffold.chunk_sizes(n)

        async def chunk(part: int, k: int) -> list[dict[str, str]]:
            got: list[dict[str, str]] = []
            for attempt in range(2):  # one more ask for a chunk that came back short
                want = k - len(got)
                prompt = scaffold.aux_prompt(mode, brief, want, part, len(sizes))
                try:
                    r = await self._record(
                        "auxiliary",
                        tool,
                        self.caller.chat(
                            str(self.config.auxiliary_model),
                            scaffold.AUX_SYSTEM,
                            [{"role": "user", "content": prompt}],
                            max_tokens=min(16000, 400 + 150 * want),
                            temperature=1.0,
                        ),
                        batch=batch,
                        part=part,
                        attempt=attempt,
                    )
                except TargetCallError:
                    break
                got += scaffold.parse_inputs(mode, r.text)[:want]
                if len(got) >= k:
                    break
            return got

        parts = await asyncio.gather(*(chunk(p, k) for p, k in enumerate(sizes, 1)))
        return [it for p in parts for it in p][:n]


class _BadInput(Exception):
    pass


def _text(args: dict[str, Any], key: str, allow_empty: bool = False) -> str:
    v = args.get(key)
    if not isinstance(v, str) or (not allow_empty and not v.strip()):
        raise _BadInput(f"Missing or empty argument {key!r} (a string).")
    return v


def prompt_sha(text: str) -> str:
    """A short hash of a system prompt: the record shows which prompt was used without holding it."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record_call(
    transcript: TranscriptWriter, role: str, tool: str, model: str, reply: Reply | Exception, **fields: Any
) -> None:
    """One call to the target, baseline or auxiliary model as a `target_call` transcript event (with
    its usage and cost, or the error): what run transcripts and the target studies record alike."""
    if isinstance(reply, Exception):
        transcript.emit("target_call", "targets", role=role, tool=tool, model=model, error=str(reply), **fields)
        return
    transcript.emit(
        "target_call",
        "targets",
        role=role,
        tool=tool,
        model=model,
        served_model=reply.served_model,
        request=reply.request,
        text=reply.text,
        usage=reply.usage,
        cost_usd=reply.cost_usd,
        latency_s=reply.latency_s,
        stop_reason=reply.stop_reason,
        refusal=reply.refusal,
        **fields,
    )
