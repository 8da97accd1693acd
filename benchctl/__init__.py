"""benchctl: a benchmark harness for auditing agents."""

__version__ = "0.1.0"
