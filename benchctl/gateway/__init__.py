"""The model gateway: every model call of a run goes through one host-side proxy.

Exports (imported lazily so `import benchctl.gateway.upstream` stays light):
  Gateway, GatewayConfig, SANDBOX_TOKEN         the server (server.py, exchange.py)
  resolve_upstream                              model id -> Upstream with retries (registry.py)
  summarize, ResponseSummary                    read a response in any wire API (wire/)
  RetryPolicy                                   retry settings (retry.py)
  PriceTable                                    cost table (pricing.py)
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Gateway": "benchctl.gateway.server",
    "GatewayConfig": "benchctl.gateway.server",
    "GatewayError": "benchctl.gateway.server",
    "SANDBOX_TOKEN": "benchctl.gateway.exchange",
    "resolve_upstream": "benchctl.gateway.registry",
    "summarize": "benchctl.gateway.wire",
    "ResponseSummary": "benchctl.gateway.wire",
    "RetryPolicy": "benchctl.gateway.retry",
    "PriceTable": "benchctl.gateway.pricing",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'benchctl.gateway' has no attribute {name!r}")
