"""Test doubles that plug into benchctl's real seams (no mocks): FakeUpstreamServer, a
scripted vendor API over real HTTP. Shipped in the package so graders' and harnesses' tests,
benchmarks and users' own tests can use them."""
from benchctl.testing.fake_upstream import FakeUpstreamServer, RecordedRequest

__all__ = ["FakeUpstreamServer", "RecordedRequest"]
