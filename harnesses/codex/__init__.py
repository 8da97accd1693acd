"""The `codex` harness: OpenAI Codex (`codex exec --json`) in the sandbox."""

from harnesses.codex.harness import CodexHarness

__all__ = ["CodexHarness"]
