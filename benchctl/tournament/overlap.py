"""Overlap matrix: how much of what one auditor found (and supported) the other also found.

values[i][j] = share of row auditor i's supported issues that column auditor j also found
(supported or not), pooled over environments where both ran: numerator and denominator are summed
over every cross pair of their runs, each pair weighted 1/(n_i*n_j) so seeds do not inflate counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchctl.tournament.matches import EnvArrays
from benchctl.tournament.schema import OverlapMatrix


def overlap_matrix(envs: Sequence[EnvArrays], auditors: Sequence[str]) -> OverlapMatrix:
    n = len(auditors)
    num = np.zeros((n, n))
    den = np.zeros((n, n))
    for env in envs:
        if not env.runs:
            continue
        both = env.supported @ env.found.T  # |S_r & F_s|
        mine = np.broadcast_to(env.supported.sum(axis=1)[:, None], both.shape)  # |S_r|
        num += env.group @ (env.mult * both) @ env.group.T
        den += env.group @ (env.mult * mine) @ env.group.T
    values: list[list[float | None]] = []
    for i in range(n):
        values.append([None if i == j or den[i, j] == 0 else round(float(num[i, j] / den[i, j]), 6) for j in range(n)])
    return OverlapMatrix(auditors=list(auditors), values=values)
