"""benchctl/stats.py: the one mean, and that grading, report and export all get it (exact, None
for nothing)."""

from __future__ import annotations

import pytest

from benchctl.grading.summary import _mean_cell
from benchctl.report.contests import _mean_known
from benchctl.report.stats import mean_ci
from benchctl.stats import mean_or_none

# A plain left-to-right `sum` loses the 1.0 (1e16 + 1.0 rounds back to 1e16); fsum does not.
CANCELS = [1e16, 1.0, -1e16]


def test_mean_or_none() -> None:
    assert mean_or_none([]) is None
    assert mean_or_none([2.0, 4.0]) == 3.0
    assert mean_or_none([0.1] * 10) == 0.1  # sum() gives 0.09999999999999999
    assert mean_or_none(CANCELS) == pytest.approx(1 / 3)
    assert mean_or_none(CANCELS) == mean_or_none(CANCELS[::-1])  # order does not matter


def test_every_mean_of_grading_and_report_is_the_exact_one() -> None:
    assert _mean_cell(CANCELS, 0) == "0.333 over 3"
    assert _mean_cell([], 2) == "n/a (no scored runs)"
    assert _mean_known([*CANCELS, None]) == (pytest.approx(1 / 3), 3)
    assert _mean_known([None]) == (None, 0)
    assert mean_ci(CANCELS)[0] == pytest.approx(1 / 3)
    assert mean_ci([]) == (None, None, None)
