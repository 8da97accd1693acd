"""Overlap matrix: how much of what one auditor found (and supported) the other also found.

values[i][j] = share of row auditor i's supported issues that column auditor j also found
(supported or not), pooled over environments where both ran: numerator and denominator are summed
over every cross pair of their runs, each pair weighted 1/(n_i*n_j) so seeds do not inflate counts.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from benchctl.tournament.matches import credit_sets, runs_by_auditor
from benchctl.tournament.schema import CanonicalList, OverlapMatrix


def overlap_matrix(canons: Sequence[CanonicalList], auditor_of: Mapping[str, str],
                   auditors: Sequence[str]) -> OverlapMatrix:
    index = {a: k for k, a in enumerate(auditors)}
    n = len(auditors)
    num = np.zeros((n, n))
    den = np.zeros((n, n))
    for canon in canons:
        supported, found, _ = credit_sets(canon)
        groups = runs_by_auditor(list(supported), auditor_of)
        for a, runs_a in groups.items():
            for b, runs_b in groups.items():
                if a == b:
                    continue
                w = 1.0 / (len(runs_a) * len(runs_b))
                i, j = index[a], index[b]
                for ra in runs_a:
                    for rb in runs_b:
                        num[i, j] += w * len(supported[ra] & found[rb])
                        den[i, j] += w * len(supported[ra])
    values: list[list[float | None]] = []
    for i in range(n):
        row: list[float | None] = []
        for j in range(n):
            row.append(None if i == j or den[i, j] == 0 else round(float(num[i, j] / den[i, j]), 6))
        values.append(row)
    return OverlapMatrix(auditors=list(auditors), values=values)
