"""The scripted provider: a fake model that replays a script, in whatever wire API the caller speaks.

It is a real `Upstream` (benchctl/gateway/upstream.py): the gateway, `benchctl.gateway.complete`
and the fake upstream HTTP server (benchctl/testing/fake_upstream.py) all drive it the same way.
Model ids:

    scripted/<path>                      a JSON or TOML script; relative paths resolve against the cwd
    scripted/py:package.module:function  a Python callable: function(ScriptRequest) -> turn dict

    script.py    the script format (turns and their fields, documented there), loading and checking it
    request.py   ScriptRequest: what a script sees of a request, in any wire API
    upstream.py  ScriptedUpstream: choose a turn, render it in the caller's wire API

A Python callable gets a `ScriptRequest` (wire_api, model, system, messages as [{"role", "text"}],
tool_names (namespace members flat, plus tools a tool search loaded and `tool_search` itself),
last_user_text, full_text, body) and returns one turn dict, validated like a script turn. It runs
on the caller's event loop: keep it fast and use the turn's `delay` (an asyncio sleep) to simulate
latency, never time.sleep. Token counting (/v1/messages/count_tokens) is answered from the request
and consumes no turn.

State (which turn is next) belongs to one ScriptedUpstream instance and is thread-safe.
"""

from __future__ import annotations

from benchctl.gateway.scripted.request import ScriptRequest, script_request
from benchctl.gateway.scripted.script import (
    AFTER_END,
    SHIPPED,
    Script,
    ScriptError,
    Turn,
    load_script,
    parse_script,
    parse_turn,
)
from benchctl.gateway.scripted.upstream import RenderedReply, ScriptedUpstream, estimate_tokens, render_turn
from benchctl.gateway.wire.responses import TOOL_SEARCH

__all__ = [
    "AFTER_END",
    "SHIPPED",
    "TOOL_SEARCH",
    "RenderedReply",
    "Script",
    "ScriptError",
    "ScriptRequest",
    "ScriptedUpstream",
    "Turn",
    "estimate_tokens",
    "load_script",
    "parse_script",
    "parse_turn",
    "render_turn",
    "script_request",
]
