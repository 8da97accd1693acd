"""The script format of scripted models: a JSON or TOML file of turns (see the package docstring).

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
  reasoning     [{"text": str, "signature"?: str, "summary"?: bool}, {"redacted": true, "signature"?: str}]:
                reasoning blocks before the answer, each in the caller's wire API's own shape:
                Anthropic thinking (signature) / redacted_thinking (data); a Responses reasoning item
                (text as a summary when `summary`, else reasoning_text content; the signature as its
                encrypted_content, sent when the request asks include: ["reasoning.encrypted_content"]);
                Gemini thought parts with a thoughtSignature (a redacted block: an empty part with
                one); chat `reasoning_content` (visible text only). A missing signature is made up
                (random base64); a Gemini one must be base64 (the google-genai SDK checks)
  thinking      the short form of one block: "thinking": "..." = "reasoning": [{"text": "...",
                "summary": true}]. Reasoning counts as reasoning tokens (estimated when not given)
  tool_calls    [{"name": str, "input": object, "id"?: str, "namespace"?: str, "signature"?: str}]; ids
                are generated when absent; `signature`: Gemini's thoughtSignature on the functionCall
                part (other APIs have none). A string input is a free-form tool call (Responses `custom_tool_call`, e.g.
                Codex apply_patch); APIs without free-form tools receive it as {"input": "<string>"}.
                Responses: a member of a `namespace` tool (named flat, `mcp__target__chat`, or with
                its namespace) is called with `namespace`; `tool_search` and tools hidden behind a
                client-side tool search become `tool_search_call`s (wire/responses.py place_calls).
                Other APIs get the flat name `<namespace>__<name>`
  refusal       true -> Anthropic stop_reason "refusal", Responses refusal part, chat
                `refusal` + finish_reason "content_filter", Gemini finishReason SAFETY
  error         {"status": int, "message"?: str, "retry_after"?: seconds, "type"?: vendor error type}
                -> that HTTP status with the vendor's error body (and retry-after header)
  stop_reason   override: end_turn | tool_use | max_tokens | refusal | stop_sequence
  usage         {"input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
                 "reasoning_tokens"}; missing counts are estimated (~4 characters per token).
                input_tokens is uncached input; output_tokens includes reasoning_tokens.
                `cache_read_tokens` is the old name of cached_input_tokens, still read
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
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from benchctl.gateway.wire.neutral import STOP_REASONS, Part, ToolCall, reasoning

AFTER_END = ("repeat_last", "stop", "error")
_TURN_KEYS = {
    "text",
    "thinking",
    "reasoning",
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
_REASONING_KEYS = {"text", "signature", "redacted", "summary"}
_USAGE_KEYS = {"input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens", "reasoning_tokens"}
_OLD_USAGE_NAMES = {"cache_read_tokens": "cached_input_tokens"}  # scripts on disk may still say so


class ScriptError(ValueError):
    """A script that cannot be loaded or is malformed; the message names file, turn and field."""


@dataclass
class Turn:
    text: str = ""
    reasoning: list[Part] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
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
    if "thinking" in d and "reasoning" in d:
        raise ScriptError(f"{_where(source, index, 'thinking')}: give reasoning or thinking, not both")
    if "thinking" in d:  # the short form: one block whose text Responses sends as a summary
        t.reasoning = [reasoning(need("thinking", str, "a string"), summary=True)]
    if "reasoning" in d:
        blocks = need("reasoning", list, "a list of reasoning blocks")
        t.reasoning = [_reasoning_block(b, source, index, f"reasoning[{j}]") for j, b in enumerate(blocks)]
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
        if t.stop_reason not in STOP_REASONS:
            raise ScriptError(
                f"{_where(source, index, 'stop_reason')}: {t.stop_reason!r} is not one of {', '.join(STOP_REASONS)}"
            )
    if "usage" in d:
        u = need("usage", dict, "an object of token counts")
        for old, new in _OLD_USAGE_NAMES.items():
            if old in u and new in u:
                raise ScriptError(f"{_where(source, index, 'usage.' + old)}: give {new} only ({old} is its old name)")
        u = {_OLD_USAGE_NAMES.get(k, k): v for k, v in u.items()}
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
            extra = set(c) - {"name", "input", "id", "namespace", "signature"}
            if extra:
                raise ScriptError(
                    f"{_where(source, index, key + '.' + sorted(extra)[0])}: unknown field; "
                    f"a tool call has name, input, id, namespace, signature"
                )
            sig = c.get("signature")
            if sig is not None and not isinstance(sig, str):
                raise ScriptError(f"{_where(source, index, key + '.signature')}: must be a string, got {sig!r}")
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
            t.tool_calls.append(ToolCall(tid, c["name"], inp, namespace, signature=sig))
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


def _reasoning_block(b: Any, source: str, index: int | None, key: str) -> Part:
    """One block of a turn's `reasoning`: {"text"?, "signature"?, "redacted"?, "summary"?}."""
    if not isinstance(b, dict):
        raise ScriptError(f"{_where(source, index, key)}: a reasoning block must be an object, got {b!r}")
    extra = set(b) - _REASONING_KEYS
    if extra:
        raise ScriptError(
            f"{_where(source, index, key + '.' + sorted(extra)[0])}: unknown field; "
            f"a reasoning block has {', '.join(sorted(_REASONING_KEYS))}"
        )
    for k, kind, what in (
        ("text", str, "a string"),
        ("signature", str, "a string"),
        ("redacted", bool, "true or false"),
        ("summary", bool, "true or false"),
    ):
        if k in b and not isinstance(b[k], kind):
            raise ScriptError(f"{_where(source, index, key + '.' + k)}: must be {what}, got {b[k]!r}")
    if b.get("redacted") and b.get("text"):
        raise ScriptError(f"{_where(source, index, key + '.text')}: a redacted block has no visible text")
    if not b.get("redacted") and not b.get("text"):
        raise ScriptError(f"{_where(source, index, key)}: needs text, or redacted: true")
    return reasoning(
        b.get("text", ""),
        summary=b.get("summary", False),
        redacted=b.get("redacted", False),
        signature=b.get("signature"),
    )


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
