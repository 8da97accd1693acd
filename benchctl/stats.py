"""The one mean of the tool, below both grading and report (which each had their own).

`math.fsum` rather than `sum`: the exactly rounded sum, so a mean does not depend on the order
the values arrive in (runs are read in directory order, grades in completion order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean_or_none(values: Sequence[float]) -> float | None:
    """The arithmetic mean; None for no values (shown as "n/a", never as a misleading 0)."""
    return math.fsum(values) / len(values) if values else None
