"""Model id → Upstream, with retries wrapped in.

`resolve_upstream("anthropic/claude-sonnet-5-5")` gives an upstream that talks to the vendor
over HTTP (see `http_upstreams` for base URLs and keys); `scripted/<spec>` gives the scripted
fake (imported lazily so real runs never load it). Every upstream comes back wrapped in
`RetryingUpstream`, so all callers (gateway, judges) retry the same way.
"""
from __future__ import annotations

from typing import Callable

from benchctl.gateway.retry import RetryingUpstream, RetryPolicy
from benchctl.gateway.upstream import ModelId, Upstream


def raw_upstream(model: ModelId, policy: RetryPolicy | None = None) -> Upstream:
    """The provider's upstream without retries (HTTP ones with the policy's idle timeouts)."""
    if model.provider == "scripted":
        from benchctl.gateway.scripted import ScriptedUpstream
        return ScriptedUpstream(model.name)
    from benchctl.gateway.http_upstreams import http_upstream
    policy = policy or RetryPolicy()
    return http_upstream(model, policy.idle_timeout, policy.answer_timeout)


def resolve_upstream(model: ModelId | str, retry: RetryPolicy | None = None,
                     deadline: Callable[[], float | None] | None = None) -> Upstream:
    """`deadline()` (unix seconds or None), when given, stops retries that would wait past it."""
    model_id = model if isinstance(model, ModelId) else ModelId.parse(model)
    policy = retry or RetryPolicy()
    return RetryingUpstream(raw_upstream(model_id, policy), policy, deadline)
