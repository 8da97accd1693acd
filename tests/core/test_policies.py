"""The shared pure policies: durations, notices, early exit, length, stop decisions."""

from __future__ import annotations

import pytest

from benchctl.policies import (
    Budget,
    EarlyExitPolicy,
    LengthPolicy,
    StopState,
    early_exit_reason,
    format_duration,
    length_notice,
    length_revision_reason,
    parse_duration,
    stop_decision,
    time_notice,
    word_count,
)


@pytest.mark.parametrize(
    "text, seconds",
    [("90s", 90), ("10m", 600), ("2h", 7200), ("1h30m", 5400), ("45", 45), ("1.5m", 90), (" 2m 30s ", 150)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "10 minutes", "m", "-5m"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(bad)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 45, 432, 3900, -3)] == ["0s", "45s", "7m 12s", "1h 05m", "0s"]


def test_budget_and_time_notice() -> None:
    b = Budget(start=1000.0, seconds=600)
    assert b.deadline == 1600 and b.remaining(1100) == 500 and b.remaining(2000) == 0
    assert b.fraction_used(1300) == 0.5 and not b.expired(1599.9) and b.expired(1600)
    assert time_notice(b, 1168) == "[benchctl] Time remaining: 7m 12s of 10m 00s."


def test_early_exit_fraction_and_cap() -> None:
    b = Budget(0, 100)
    p = EarlyExitPolicy(fraction=0.75, max_reprompts=2, message="{remaining} of {budget}")
    assert early_exit_reason(p, b, 10, 0) == "1m 30s of 1m 40s"
    assert early_exit_reason(p, b, 75, 0) is None  # past the fraction: may stop
    assert early_exit_reason(p, b, 10, 2) is None  # cap reached
    assert early_exit_reason(EarlyExitPolicy(enabled=False), b, 10, 0) is None


def test_word_count_and_length_notice() -> None:
    assert word_count("one two\nthree\t four  ") == 4
    p = LengthPolicy(file="report.md", min_words=3, max_words=5)
    assert "2 more to reach the minimum of 3" in length_notice(p, "a")
    assert "within the window 3-5 (1 words left)" in length_notice(p, "a b c d")
    assert "2 over the limit of 5" in length_notice(p, "a b c d e f g")
    assert length_notice(LengthPolicy(), "a b") == "[benchctl] report.md: 2 words."
    only_min = LengthPolicy(file="report.md", min_words=3)  # a minimum without a maximum still counts
    assert length_notice(only_min, "a") == "[benchctl] report.md: 1 words; 2 more to reach the minimum of 3."
    assert length_notice(only_min, "a b c") == "[benchctl] report.md: 3 words."


def test_length_revision_once_when_over() -> None:
    p = LengthPolicy(file="r.md", min_words=1, max_words=3, max_revisions=1)
    assert length_revision_reason(p, "a b c", 0) is None
    assert "r.md has 4 words, over the limit of 3" in length_revision_reason(p, "a b c d", 0)
    assert length_revision_reason(p, "a b c d", 1) is None
    assert length_revision_reason(p, None, 0) is None


def test_stop_decision_order_and_counters() -> None:
    b = Budget(0, 100)
    early = EarlyExitPolicy(fraction=0.5, max_reprompts=1)
    length = LengthPolicy(file="r.md", max_words=2)
    st = StopState()
    d1 = stop_decision(b, 10, st, early, length, "too many words here")
    assert d1.kind == "reprompt" and st.reprompts == 1
    d2 = stop_decision(b, 20, st, early, length, "too many words here")
    assert d2.kind == "revision" and "over the limit of 2" in d2.message and st.revisions == 1
    d3 = stop_decision(b, 30, st, early, length, "still too many words")
    assert d3.kind == "stop"
    assert stop_decision(b, 100, StopState(), early, length, "x y z").kind == "stop"  # deadline wins
    assert stop_decision(b, 10, StopState(), None, None, None).kind == "stop"
