"""Shared test helpers, one module per topic, imported as `from tests.rigs.<topic> import ...`."""
