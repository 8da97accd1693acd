"""The test suite: one folder per package, shared helpers in tests/rigs (docs/contributing.md)."""
