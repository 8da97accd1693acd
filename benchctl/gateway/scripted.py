"""The scripted provider: a fake model that replays a script, in whatever wire API the caller speaks.

It is a real `Upstream` (see upstream.py): the gateway, `benchctl.gateway.complete.complete` and the
fake upstream HTTP server all drive it the same way. Model ids:

    scripted/<path>                      a JSON or TOML script; relative paths resolve against the cwd
    scripted/py:package.module:function  a Python callable: function(ScriptRequest) -> turn dict

Script format (JSON shown; TOML uses the same keys with [[turns]] tables):

    {"turns": [
       {"text": "Let me look.", "tool_calls": [{"name": "bash", "input": {"command": "ls /data"}}]},
       {"text": "Done.", "chunks": 5, "chunk_delay": 0.05, "delay": 0.2},
       {"refusal": true, "text": "I can't help with that."},
       {"error": {"status": 529, "message": "overloaded", "retry_after": 1}},
       {"match": "finding ids: .*F3", "text": "{\"F3\": 0.7}"}
     ],
     "after_end": "repeat_last"}

Turn fields (all optional, but a turn needs text, tool_calls, refusal or error):
  text          assistant text (for a refusal: the refusal message)
  thinking      reasoning before the answer: an Anthropic thinking block (with a dummy signature),
                a Responses reasoning item with a summary, Gemini `thought` parts, and chat
                `reasoning_content` (the OpenAI-compatible servers' field); counted as reasoning tokens
  tool_calls    [{"name": str, "input": object, "id"?: str, "namespace"?: str}]; ids are generated when
                absent. A string input is a free-form tool call (Responses `custom_tool_call`, e.g.
                Codex apply_patch); APIs without free-form tools receive it as {"input": "<string>"}.
                Responses: a member of a `namespace` tool (named flat, `mcp__target__chat`, or with
                its namespace) is called with `namespace`; `tool_search` and tools hidden behind a
                client-side tool search become `tool_search_call`s (place_responses_calls). Other
                APIs get the flat name `<namespace>__<name>`
  refusal       true -> Anthropic stop_reason "refusal", Responses refusal part, chat
                `refusal` + finish_reason "content_filter", Gemini finishReason SAFETY
  error         {"status": int, "message"?: str, "retry_after"?: seconds, "type"?: vendor error type}
                -> that HTTP status with the vendor's error body (and retry-after header)
  stop_reason   override: end_turn | tool_use | max_tokens | refusal | stop_sequence
  usage         {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                 "reasoning_tokens"}; missing counts are estimated (~4 characters per token).
                input_tokens is uncached input; output_tokens includes reasoning_tokens
  model         the served model name reported in the response (default: the requested one)
  delay         seconds before the response starts (headers)
  chunks        split the streamed text (and tool arguments) into about this many pieces
  chunk_delay   seconds between stream events
  match         regex (Python `re.search`, dot matches newline); the turn is a *rule*: chosen whenever
                it matches (the first matching rule in file order wins), never consumed. Turns
                without `match` are consumed in order, so concurrent judge calls get the right
                answer from rules whatever order they arrive in.
  match_in      what `match` searches: "last_user" (default: the text of the last user message,
                including tool results) or "request" (system + every message)

Script fields: `turns` (required, non-empty list), `after_end` ("repeat_last" (default): replay
the last in-order turn; "stop": answer "[script finished]" with no tool calls; "error": HTTP 400
naming the script), `description` (free text). Unknown keys are errors, so a typo never
silently does nothing; errors name the file, the turn index and the field.

A Python callable gets a `ScriptRequest` (wire_api, model, system, messages as
[{"role", "text"}], tool_names (namespace members flat, plus tools a tool search loaded and
`tool_search` itself), last_user_text, full_text, body) and returns one turn dict,
validated like a script turn. It runs on the caller's event loop: keep it fast and use the
turn's `delay` (an asyncio sleep) to simulate latency, never time.sleep.
Token counting (/v1/messages/count_tokens) is answered from the request and consumes no turn.

State (which turn is next) belongs to one ScriptedUpstream instance and is thread-safe.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import threading
import tomllib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchctl.gateway import wire_format as wf
from benchctl.gateway.upstream import ModelId, UpstreamCall, UpstreamResponse

AFTER_END = ("repeat_last", "stop", "error")
TOOL_SEARCH = "tool_search"  # the name scripts call a Responses client-side tool search by
_TURN_KEYS = {
    "text",
    "thinking",
    "tool_calls",
    "refusal",
    "error",
    "stop_reason",
    "usage",
    "model",
    "delay",
    "chunks",
    "chunk_delay",
    "match",
    "match_in",
}
_USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"}


class ScriptError(ValueError):
    """A script that cannot be loaded or is malformed; the message names file, turn and field."""


@dataclass
class Turn:
    text: str = ""
    thinking: str = ""
    tool_calls: list[wf.ToolCall] = field(default_factory=list)
    refusal: bool = False
    error: dict[str, Any] | None = None
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    delay: float = 0.0
    chunks: int | None = None
    chunk_delay: float = 0.0
    match: re.Pattern[str] | None = None
    match_in: str = "last_user"


@dataclass
class Script:
    turns: list[Turn]
    after_end: str = "repeat_last"
    source: str = "<script>"


def _where(source: str, index: int | None, key: str | None = None) -> str:
    s = f"script {source}"
    if index is not None:
        s += f", turn {index}"
    if key:
        s += f", field {key!r}"
    return s


def parse_turn(d: Any, source: str = "<script>", index: int | None = None) -> Turn:
    """Validate one turn dict; errors name the source, the turn index and the field."""
    if not isinstance(d, dict):
        raise ScriptError(f"{_where(source, index)}: a turn must be an object, got {type(d).__name__}")
    unknown = set(d) - _TURN_KEYS
    if unknown:
        raise ScriptError(
            f"{_where(source, index, sorted(unknown)[0])}: unknown field; known fields: {', '.join(sorted(_TURN_KEYS))}"
        )

    def need(key: str, types: type | tuple[type, ...], what: str) -> Any:
        v = d[key]
        if not isinstance(v, types) or (
            isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,))
        ):
            raise ScriptError(f"{_where(source, index, key)}: must be {what}, got {v!r}")
        return v

    t = Turn()
    if "text" in d:
        t.text = need("text", str, "a string")
    if "thinking" in d:
        t.thinking = need("thinking", str, "a string")
    if "refusal" in d:
        t.refusal = need("refusal", bool, "true or false")
    for key in ("delay", "chunk_delay"):
        if key in d:
            v = need(key, (int, float), "a number of seconds")
            if v < 0:
                raise ScriptError(f"{_where(source, index, key)}: must be >= 0, got {v}")
            setattr(t, key, float(v))
    if "chunks" in d:
        t.chunks = need("chunks", int, "a positive integer")
        if t.chunks < 1:
            raise ScriptError(f"{_where(source, index, 'chunks')}: must be >= 1, got {t.chunks}")
    if "model" in d:
        t.model = need("model", str, "a model name string")
    if "stop_reason" in d:
        t.stop_reason = need("stop_reason", str, "a string")
        if t.stop_reason not in wf.STOP_REASONS:
            raise ScriptError(
                f"{_where(source, index, 'stop_reason')}: {t.stop_reason!r} is not one of {', '.join(wf.STOP_REASONS)}"
            )
    if "usage" in d:
        u = need("usage", dict, "an object of token counts")
        for k, v in u.items():
            if k not in _USAGE_KEYS:
                raise ScriptError(
                    f"{_where(source, index, 'usage.' + str(k))}: unknown usage key; "
                    f"known: {', '.join(sorted(_USAGE_KEYS))}"
                )
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ScriptError(f"{_where(source, index, 'usage.' + k)}: must be a non-negative integer, got {v!r}")
        t.usage = dict(u)
    if "tool_calls" in d:
        calls = need("tool_calls", list, "a list of {name, input}")
        for j, c in enumerate(calls):
            key = f"tool_calls[{j}]"
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
                raise ScriptError(f"{_where(source, index, key)}: needs a non-empty string 'name', got {c!r}")
            extra = set(c) - {"name", "input", "id", "namespace"}
            if extra:
                raise ScriptError(
                    f"{_where(source, index, key + '.' + sorted(extra)[0])}: unknown field; "
                    f"a tool call has name, input, id, namespace"
                )
            namespace = c.get("namespace", "")
            if not isinstance(namespace, str):
                raise ScriptError(f"{_where(source, index, key + '.namespace')}: must be a string, got {namespace!r}")
            inp = c.get("input", {})
            if not isinstance(inp, (dict, str)):
                raise ScriptError(
                    f"{_where(source, index, key + '.input')}: must be a JSON object (or a string for a "
                    f"free-form tool), got {inp!r}"
                )
            tid = c.get("id", "")
            if not isinstance(tid, str):
                raise ScriptError(f"{_where(source, index, key + '.id')}: must be a string, got {tid!r}")
            t.tool_calls.append(wf.ToolCall(c["name"], inp, tid, namespace))
    if "error" in d:
        e = need("error", dict, "an object {status, message, retry_after}")
        status = e.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise ScriptError(
                f"{_where(source, index, 'error.status')}: must be an HTTP error status 400-599, got {status!r}"
            )
        ra = e.get("retry_after")
        if ra is not None and (not isinstance(ra, (int, float)) or isinstance(ra, bool) or ra < 0):
            raise ScriptError(f"{_where(source, index, 'error.retry_after')}: must be seconds >= 0, got {ra!r}")
        extra = set(e) - {"status", "message", "retry_after", "type"}
        if extra:
            raise ScriptError(
                f"{_where(source, index, 'error.' + sorted(extra)[0])}: unknown field; "
                f"an error has status, message, retry_after, type"
            )
        t.error = {
            "status": status,
            "message": str(e.get("message", f"scripted error {status}")),
            "retry_after": ra,
            "type": e.get("type"),
        }
    if "match" in d:
        pat = need("match", str, "a regular expression string")
        try:
            t.match = re.compile(pat, re.S)
        except re.error as err:
            raise ScriptError(f"{_where(source, index, 'match')}: bad regular expression {pat!r}: {err}") from None
    if "match_in" in d:
        t.match_in = need("match_in", str, '"last_user" or "request"')
        if t.match_in not in ("last_user", "request"):
            raise ScriptError(
                f'{_where(source, index, "match_in")}: must be "last_user" or "request", got {t.match_in!r}'
            )
    if not (t.text or t.tool_calls or t.refusal or t.error):
        raise ScriptError(f"{_where(source, index)}: a turn needs at least one of text, tool_calls, refusal, error")
    return t


def parse_script(data: Any, source: str = "<script>") -> Script:
    if not isinstance(data, dict):
        raise ScriptError(f"script {source}: top level must be an object with a 'turns' list")
    unknown = set(data) - {"turns", "after_end", "description"}
    if unknown:
        raise ScriptError(
            f"{_where(source, None, sorted(unknown)[0])}: unknown top-level field; known: turns, after_end, description"
        )
    turns = data.get("turns")
    if not isinstance(turns, list) or not turns:
        raise ScriptError(f"{_where(source, None, 'turns')}: must be a non-empty list of turns")
    after_end = data.get("after_end", "repeat_last")
    if after_end not in AFTER_END:
        raise ScriptError(
            f"{_where(source, None, 'after_end')}: must be one of {', '.join(AFTER_END)}, got {after_end!r}"
        )
    return Script([parse_turn(t, source, i) for i, t in enumerate(turns)], after_end, source)


# Scripts shipped with a run to a machine without the file (a Ray node): the path as written in
# the model id -> the file's bytes. Filled by benchctl/executors/ray_node.py; load_script looks here first.
SHIPPED: dict[str, bytes] = {}


def load_script(path: str | Path) -> Script:
    """Load a .json or .toml script; relative paths resolve against the current directory."""
    if str(path) in SHIPPED:
        return _parse_script_bytes(SHIPPED[str(path)], Path(path))
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = Path.cwd() / p
    if not p.is_file():
        raise ScriptError(
            f"script {p}: file not found (model ids look like scripted/<path to .json or .toml>, "
            f"relative to the current directory {Path.cwd()})"
        )
    return _parse_script_bytes(p.read_bytes(), p)


def _parse_script_bytes(raw: bytes, p: Path) -> Script:
    try:
        data = tomllib.loads(raw.decode()) if p.suffix == ".toml" else orjson.loads(raw)
    except (orjson.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ScriptError(f"script {p}: not valid {'TOML' if p.suffix == '.toml' else 'JSON'}: {e}") from None
    return parse_script(data, str(p))


# ---------------------------------------------------------------- what the script sees of a request


@dataclass
class ScriptRequest:
    """A wire-neutral view of one request, for match rules and Python-callable scripts."""

    wire_api: str
    model: str
    system: str
    messages: list[dict[str, str]]  # [{"role": "user"|"assistant"|"tool", "text": ...}]
    tool_names: list[str]
    last_user_text: str  # the last user-side message (user text and/or tool results)
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def full_text(self) -> str:
        return "\n".join(t for t in [self.system] + [m["text"] for m in self.messages] if t)


def _text_of(content: Any) -> str:
    """Plain text of any vendor content value (string, parts list, tool results...)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_text_of(c) for c in content) if t)
    if isinstance(content, dict):
        for key in ("text", "content", "output", "refusal"):
            if key in content and content[key] is not None:
                return _text_of(content[key])
        if "input" in content and content.get("type") in ("tool_use", "custom_tool_call"):
            inp = content["input"]
            return inp if isinstance(inp, str) else orjson.dumps(inp).decode()
        if "functionResponse" in content:
            resp = content["functionResponse"].get("response", {})
            return _text_of(resp) or orjson.dumps(resp).decode()
        if "functionCall" in content:
            return orjson.dumps(content["functionCall"].get("args", {})).decode()
        if "arguments" in content:
            return str(content["arguments"])
    return ""


def _tool_names(tools: Any) -> list[str]:
    """Every tool a request offers, by the name a script calls it: a Responses `namespace` tool's
    members as `<namespace>__<name>` (Codex's MCP tools: mcp__target__chat, as Claude Code names
    them), a client-side Responses `tool_search` tool as `tool_search`."""
    names: list[str] = []
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if "functionDeclarations" in t:
            names += [f.get("name", "") for f in t["functionDeclarations"]]
        elif isinstance(t.get("function"), dict):
            names.append(t["function"].get("name", ""))
        elif t.get("type") == "namespace":
            names += [f"{t.get('name')}__{m.get('name')}" for m in t.get("tools") or [] if isinstance(m, dict)]
        elif t.get("type") == "tool_search":
            names.append(TOOL_SEARCH)
        elif "name" in t:
            names.append(t["name"])
    return [n for n in names if n]


def _offered_tools(body: dict[str, Any]) -> list[Any]:
    """The request's tools, plus (Responses) those a client-side tool search loaded earlier in the
    conversation: Codex sends them back inside `tool_search_output` items, not in `tools`."""
    tools = list(body.get("tools") or [])
    items = body.get("input")
    for it in items if isinstance(items, list) else []:
        if isinstance(it, dict) and it.get("type") == "tool_search_output":
            tools += list(it.get("tools") or [])
    return tools


def script_request(call: UpstreamCall) -> ScriptRequest:
    body = call.body or {}
    api = call.wire_api
    msgs: list[dict[str, str]] = []
    if api == "openai_responses":
        system = _text_of(body.get("instructions"))
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else (items or [])
        for it in items:
            kind = it.get("type", "message")
            if kind == "message":
                role = it.get("role", "user")
                if role in ("system", "developer"):
                    # Codex sends hook context as developer messages; it reaches the model as user-side text.
                    msgs.append(
                        {"role": "user" if role == "developer" else "system", "text": _text_of(it.get("content"))}
                    )
                else:
                    msgs.append({"role": role, "text": _text_of(it.get("content"))})
            elif kind.endswith("_output"):
                msgs.append({"role": "tool", "text": _text_of(it.get("output"))})
            elif kind.endswith("call"):
                msgs.append({"role": "assistant", "text": _text_of(it)})
    elif api == "openai_chat":
        system = ""
        for m in body.get("messages") or []:
            role = m.get("role", "user")
            if role in ("system", "developer"):
                system += _text_of(m.get("content"))
            else:
                text = _text_of(m.get("content"))
                for tc in m.get("tool_calls") or []:
                    text += "\n" + str(tc.get("function", {}).get("arguments", ""))
                msgs.append({"role": role, "text": text})
    elif api == "gemini":
        system = _text_of((body.get("systemInstruction") or body.get("system_instruction") or {}).get("parts"))
        for c in body.get("contents") or []:
            parts = c.get("parts") or []
            role = "tool" if parts and all("functionResponse" in p for p in parts) else c.get("role", "user")
            msgs.append({"role": "assistant" if role == "model" else role, "text": _text_of(parts)})
    else:  # anthropic_messages, anthropic_count_tokens
        system = _text_of(body.get("system"))
        for m in body.get("messages") or []:
            msgs.append({"role": m.get("role", "user"), "text": _text_of(m.get("content"))})
    last_user = ""
    for m in reversed(msgs):
        if m["role"] in ("user", "tool"):
            # Consecutive user-side messages (tool results plus notices) count as one.
            last_user = m["text"] + ("\n" + last_user if last_user else "")
        elif last_user:
            break
    model = body.get("model") or call.model.name
    return ScriptRequest(api, str(model), system, msgs, _tool_names(_offered_tools(body)), last_user, body)


# ---------------------------------------------------------------- rendering a turn


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


def _search_query(flat_name: str) -> str:
    return " ".join(w for w in flat_name.split("_") if w)


def place_responses_calls(
    calls: list[wf.ToolCall], body: dict[str, Any]
) -> tuple[list[wf.ToolCall], list[wf.ToolCall]]:
    """The turn's tool calls shaped the way a Responses model calls this request's tools, and the
    tool searches to make first.

    A call names a tool flat (`mcp__target__chat`) or with its `namespace`. A member of a
    `namespace` tool is called as {"namespace", "name"} (Codex offers each MCP server that way
    to models it has no metadata for); `tool_search` is a `tool_search_call` when the request
    has a client-side tool search. A tool the request does not offer while it has a client-side
    tool search (Codex defers MCP tools behind one for the models it knows) is searched for
    first — once per query: after that the call goes out as it is, and the CLI rejects it."""
    offered: set[str] = set()
    members: dict[str, str] = {}  # flat name -> namespace
    can_search = False
    for t in _offered_tools(body):
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            members.update(
                {
                    f"{t.get('name')}__{m.get('name')}": str(t.get("name"))
                    for m in t.get("tools") or []
                    if isinstance(m, dict)
                }
            )
        elif t.get("type") == TOOL_SEARCH:
            can_search = can_search or t.get("execution", "client") == "client"
        elif t.get("name"):
            offered.add(str(t["name"]))
    searched = {
        str(it["arguments"].get("query"))
        for it in body.get("input") or []
        if isinstance(it, dict) and it.get("type") == "tool_search_call" and isinstance(it.get("arguments"), dict)
    }
    placed: list[wf.ToolCall] = []
    searches: list[wf.ToolCall] = []
    for tc in calls:
        flat = tc.flat_name
        if flat in offered:
            placed.append(wf.ToolCall(flat, tc.input, tc.id))
        elif flat in members:
            ns = members[flat]
            placed.append(wf.ToolCall(flat[len(ns) + 2 :], tc.input, tc.id, ns))
        elif flat == TOOL_SEARCH and can_search:
            placed.append(wf.ToolCall(flat, tc.object_input, tc.id, kind="tool_search"))
        else:
            placed.append(tc)
            query = _search_query(flat)
            if can_search and query not in searched and query not in {s.object_input["query"] for s in searches}:
                searches.append(wf.ToolCall(TOOL_SEARCH, {"query": query}, kind="tool_search"))
    return placed, searches


def render_turn(turn: Turn, call: UpstreamCall, req: ScriptRequest) -> RenderedReply:
    if turn.error:
        e = turn.error
        return RenderedReply(
            e["status"],
            wf.error_headers(e["retry_after"]),
            [wf.error_body(call.wire_api, e["status"], e["message"], e["type"])],
            turn.delay,
        )
    calls, text, deferred = turn.tool_calls, turn.text, False
    if call.wire_api == "openai_responses" and calls:
        calls, searches = place_responses_calls(calls, call.body or {})
        if searches:  # search first; the turn itself answers the next request
            calls, text, deferred = searches, "", True
    served = turn.model or req.model
    out_text = text + "".join(tc.arguments_json() + tc.name for tc in calls)
    u = turn.usage
    reasoning = u.get("reasoning_tokens", estimate_tokens(turn.thinking) if turn.thinking else 0)
    usage = wf.Usage(
        input_tokens=u.get("input_tokens", estimate_tokens(req.full_text)),
        output_tokens=u.get("output_tokens", estimate_tokens(out_text) + reasoning),
        cache_read_tokens=u.get("cache_read_tokens", 0),
        cache_write_tokens=u.get("cache_write_tokens", 0),
        reasoning_tokens=reasoning,
    )
    reply = wf.Reply(text, list(calls), turn.refusal, turn.stop_reason, usage, served, thinking=turn.thinking)
    longest = max([len(text), len(turn.thinking)] + [len(tc.arguments_json()) for tc in calls])
    reply.chunk_chars = wf.pieces_for(longest, turn.chunks)
    body = call.body or {}
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    alt_sse = "alt=sse" in call.query
    ctype, pieces = wf.encode(
        call.wire_api, reply, stream=call.stream, include_usage=include_usage, gemini_alt_sse=alt_sse
    )
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

    def render(self, call: UpstreamCall) -> RenderedReply:
        req = script_request(call)
        if call.wire_api == "anthropic_count_tokens":
            # A side call: answered from the request alone, so it never consumes a script turn.
            return RenderedReply(
                200,
                {"content-type": "application/json"},
                [orjson.dumps({"input_tokens": estimate_tokens(req.full_text)})],
            )
        turn = self.choose(req)
        rendered = render_turn(turn, call, req)
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
