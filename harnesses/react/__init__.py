"""The built-in ReAct harness (host-side loop; tools run in the sandbox)."""

from harnesses.react.harness import ReactHarness

__all__ = ["ReactHarness"]
