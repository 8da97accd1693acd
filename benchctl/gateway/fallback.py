"""Refusal policy and the run's current model.

A refusal is detected by `benchctl.gateway.wire.summarize` (Anthropic `stop_reason: "refusal"`, OpenAI
refusal content or `content_filter`, Gemini safety/prohibited-content blocks). What happens
next is the run's policy:

  none      record the refusal only; the client gets the refusal as the model sent it
  retry     ask the same model again, up to N more times, before the client sees anything;
            with this policy the gateway holds each response until it is complete (it cannot
            un-send a streamed refusal), so streaming becomes whole-response for the run
  fallback  the refusal is passed to the client as is, and every later call of the run is
            served by the fallback model (the switch is recorded once, with its reason)

"auto" means fallback when a fallback model is configured, else none.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchctl.gateway.upstream import ModelId

POLICIES = ("auto", "none", "retry", "fallback")


class PolicyError(ValueError):
    pass


@dataclass
class ModelRouter:
    """Which model serves the next call. Thread-safe; the switch to the fallback is one-way."""

    primary: ModelId
    fallback: ModelId | None = None
    policy: str = "auto"
    retries: int = 1
    current: ModelId = field(init=False)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise PolicyError(f"refusal policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.policy == "auto":
            self.policy = "fallback" if self.fallback else "none"
        if self.policy == "fallback" and self.fallback is None:
            raise PolicyError("refusal policy 'fallback' needs a fallback model (--fallback provider/name)")
        if self.retries < 0:
            raise PolicyError(f"refusal_retries must be >= 0, got {self.retries}")
        self.current = self.primary

    @property
    def switched(self) -> bool:
        return self.current != self.primary

    def on_refusal(self, served: ModelId, reason: str = "refusal", **detail: Any) -> dict[str, Any] | None:
        """Apply the policy after `served` refused; returns the fallback entry when the run switches:
        {"t": unix seconds, "from": model, "to": model, "reason": "refusal", **detail} (the gateway's
        detail: call_id, and upstream_stop_reason when the vendor said more than "refusal")."""
        with self._lock:
            if (
                self.policy != "fallback"
                or self.fallback is None
                or self.current == self.fallback
                or served != self.current
            ):
                return None
            event = {"t": time.time(), "from": str(self.current), "to": str(self.fallback), "reason": reason, **detail}
            self.current = self.fallback
            self.fallbacks.append(event)
            return event
