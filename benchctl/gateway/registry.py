"""Model id → Upstream, with retries wrapped in.

`resolve_upstream("anthropic/claude-sonnet-5-5")` gives an upstream that talks to the vendor
over HTTP (see `http_upstreams` for base URLs and keys); `scripted/<spec>` gives the scripted
fake (imported lazily so real runs never load it). Every upstream comes back wrapped in
`RetryingUpstream`, so all callers (gateway, judges) retry the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


def resolve_upstream(
    model: ModelId | str,
    retry: RetryPolicy | None = None,
    deadline: Callable[[], float | None] | None = None,
    limits: Any = None,
) -> Upstream:
    """`deadline()` (unix seconds or None), when given, stops retries that would wait past it.
    `limits` (a run's benchctl.limits.run.RunLimits), when given, makes every attempt ask the
    sweep's shared limiter first and records rate-limit waits (benchctl/limits/upstream.py)."""
    model_id = model if isinstance(model, ModelId) else ModelId.parse(model)
    policy = retry or RetryPolicy()
    return wrap_upstream(raw_upstream(model_id, policy), model_id, policy, deadline, limits)


def wrap_upstream(
    inner: Upstream,
    model: ModelId,
    policy: RetryPolicy | None = None,
    deadline: Callable[[], float | None] | None = None,
    limits: Any = None,
) -> Upstream:
    """A provider's upstream with what every caller gets: the run's limits (when given), then retries."""
    if limits is not None:
        from benchctl.limits.upstream import LimitedUpstream

        inner = LimitedUpstream(inner, limits, model)
    return RetryingUpstream(inner, policy, deadline, waits=limits, model=str(model))
