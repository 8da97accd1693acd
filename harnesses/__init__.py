"""benchctl's built-in harnesses: react, claude-code and codex.

They are declared in pyproject.toml as entry points of the group `benchctl.harnesses`, as a plugin
distribution declares its own, and are written against the contract of `benchctl.harness`. benchctl
itself never imports this package: it finds each harness by name (benchctl.harness.HARNESSES).
"""
