"""The `claude-code` harness: Claude Code (headless `claude -p`) in the sandbox."""

from harnesses.claude_code.harness import ClaudeCodeHarness

__all__ = ["ClaudeCodeHarness"]
