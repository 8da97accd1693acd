"""Where each vendor provider's key and base URL come from: the one table the gateway's upstreams,
judge calls (gateway/complete.py), the pre-run checks (run/preflight.py) and `benchctl doctor` all read.

Keys are read on the host only (by the gateway and by judges); a sandbox never sees them.
`openai-compatible/<name>` servers have per-name variables (see http_upstreams.py) and are not here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderEnv:
    keys: tuple[str, ...]  # the API key variables, the first one set wins
    base_url_var: str  # points the provider at another server (a proxy, a fake upstream)
    default_base_url: str

    def api_key(self) -> str:
        return next((os.environ[k] for k in self.keys if os.environ.get(k)), "")

    def base_url(self) -> str:
        return os.environ.get(self.base_url_var) or self.default_base_url

    def configured(self) -> bool:
        """A key is set, or a base URL that may need none (a local proxy)."""
        return bool(self.api_key() or os.environ.get(self.base_url_var))


PROVIDERS: dict[str, ProviderEnv] = {
    "anthropic": ProviderEnv(("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
    "openai": ProviderEnv(("OPENAI_API_KEY",), "OPENAI_BASE_URL", "https://api.openai.com/v1"),
    "google": ProviderEnv(
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"
    ),
}
