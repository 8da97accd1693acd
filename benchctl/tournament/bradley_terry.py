"""Bradley-Terry strengths from fractional, weighted pairwise outcomes, on the Elo scale.

Input is a "wins" matrix W (A x A): W[i, j] = sum over matches of i against j of weight * share_i,
so W[i, j] + W[j, i] is the total weight of their matches. The model says i's expected share against
j is sigma(s_i - s_j); the log-likelihood is sum_ij W[i, j] * log sigma(s_i - s_j), which is exactly
the weighted log-likelihood of fractional outcomes (a 13/19 share at weight 19 counts as 13 points
won and 6 lost).

Solver: Newton's method, batched over many W matrices at once (the bootstrap fits 1,000 resamples in
one array operation), with the step length capped so a poor start cannot overshoot. The likelihood
is invariant to adding a constant to every s, so without a prior the Hessian is singular along the
all-ones direction; adding c * 11^T / A to it fixes that direction without changing the step
(the gradient is orthogonal to it).

The maximum-likelihood estimate exists only when the "won something against" graph (i -> j when
W[i, j] > 0) is strongly connected (Zermelo 1929, Ford 1957). Otherwise -- disconnected groups, or an
auditor that never lost a point -- a small prior is added: every auditor plays virtual drawn matches
of total weight `prior_weight` against a fixed anchor of strength 0. Callers flag when this happened.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ELO_MEAN = 1000.0
ELO_PER_NAT = 400.0 / math.log(10.0)  # 1 natural-log unit of strength = 173.7 Elo
MAX_STEP = 3.0  # cap on a Newton step, natural-log units (~520 Elo)


def to_elo(strength: np.ndarray) -> np.ndarray:
    """Natural-log strengths (..., A) -> Elo with mean 1000 over the last axis."""
    s = np.asarray(strength, dtype=float)
    return ELO_MEAN + ELO_PER_NAT * (s - s.mean(axis=-1, keepdims=True))


def strongly_connected(wins: np.ndarray) -> np.ndarray:
    """For W of shape (..., A, A): is the graph i -> j (W[i, j] > 0) strongly connected?

    Reachability from node 0 forwards and backwards by repeated boolean matrix-vector products
    (batched); stops as soon as nothing changes."""
    adj = np.asarray(wins) > 0
    batch = adj.shape[:-2]
    a = adj.shape[-1]
    if a <= 1:
        return np.ones(batch, dtype=bool)
    adj_f = adj.astype(np.float32)
    ok = np.ones(batch, dtype=bool)
    for mat in (adj_f, np.swapaxes(adj_f, -1, -2)):
        reach = np.zeros(batch + (a,), dtype=np.float32)
        reach[..., 0] = 1.0
        for _ in range(a):
            # nodes reachable in one more step: j with some reached i and edge i -> j
            nxt = np.minimum(reach + np.einsum("...i,...ij->...j", reach, mat), 1.0)
            nxt = (nxt > 0).astype(np.float32)
            if np.array_equal(nxt, reach):
                break
            reach = nxt
        ok &= reach.min(axis=-1) > 0
    return ok


def components(wins: np.ndarray) -> list[list[int]]:
    """Connected components of the undirected match graph (any weight between i and j)."""
    w = np.asarray(wins, dtype=float)
    a = w.shape[0]
    linked = (w + w.T) > 0
    seen = [False] * a
    out: list[list[int]] = []
    for start in range(a):
        if seen[start]:
            continue
        stack, comp = [start], []
        seen[start] = True
        while stack:
            i = stack.pop()
            comp.append(i)
            for j in np.flatnonzero(linked[i]):
                if not seen[j]:
                    seen[j] = True
                    stack.append(int(j))
        out.append(sorted(comp))
    return out


@dataclass
class Fit:
    strength: np.ndarray  # (..., A) natural-log scale, mean 0 over auditors
    elo: np.ndarray  # (..., A) Elo scale, mean 1000
    prior_used: np.ndarray  # (...) bool per fitted matrix
    iterations: int
    converged: bool


def fit_batch(
    wins: np.ndarray,
    *,
    prior_weight: float,
    use_prior: np.ndarray | bool | None = None,
    start: np.ndarray | None = None,
    tol: float = 1e-9,
    max_iter: int = 200,
) -> Fit:
    """Fit Bradley-Terry to each W in a batch (R, A, A) (or a single (A, A)).

    use_prior: per matrix, add the prior; None = only where the MLE does not exist.
    start: warm start strengths, broadcastable to (R, A)."""
    w = np.asarray(wins, dtype=float)
    single = w.ndim == 2
    if single:
        w = w[None]
    r, a, _ = w.shape
    if a == 0:
        empty = np.zeros((r, 0))
        return _finish(empty, np.zeros(r, dtype=bool), 0, True, single)
    if use_prior is None:
        use_prior = ~strongly_connected(w)
    prior = np.broadcast_to(np.asarray(use_prior, dtype=bool), (r,)).copy()
    if np.any(prior) and prior_weight <= 0:
        raise ValueError(
            "the match graph needs a prior (disconnected, or someone never lost) "
            "but prior_weight is 0; pass prior_weight > 0"
        )
    alpha = np.where(prior, prior_weight, 0.0)[:, None]  # (R, 1)
    n = w + np.swapaxes(w, 1, 2)  # total weight per pair
    s = np.zeros((r, a)) if start is None else np.array(np.broadcast_to(start, (r, a)), dtype=float)
    ones = np.full((a, a), 1.0 / a)
    active = np.ones(r, dtype=bool)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 (`it` is read after the loop)
        idx = np.flatnonzero(active)
        sa, wa, na, al = s[idx], w[idx], n[idx], alpha[idx]
        p = _sigmoid(sa[:, :, None] - sa[:, None, :])  # P(i beats j)
        grad = (wa - na * p).sum(axis=2)
        curv = na * p * (1.0 - p)
        hess = -curv
        diag = curv.sum(axis=2)
        # prior: virtual draws (half won, half lost) of weight alpha against an anchor at 0
        q = _sigmoid(sa)
        grad += al * (0.5 - q)
        diag = diag + al * q * (1.0 - q)
        idx_a = np.arange(a)
        hess[:, idx_a, idx_a] = diag
        # fix the translation null-space where there is no prior (gradient is orthogonal to it)
        scale = np.where(al[:, 0] > 0, 0.0, np.maximum(diag.mean(axis=1), 1e-12))
        hess = hess + scale[:, None, None] * ones
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        big = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, MAX_STEP / np.maximum(big, 1e-300))[:, None]
        s[idx] = sa + step
        active[idx] = big > tol
        if not active.any():
            break
    return _finish(s, prior, it, not active.any(), single)


def _finish(s: np.ndarray, prior: np.ndarray, it: int, converged: bool, single: bool) -> Fit:
    s = s - s.mean(axis=-1, keepdims=True) if s.shape[-1] else s
    elo = to_elo(s) if s.shape[-1] else s
    if single:
        return Fit(s[0], elo[0], prior[0], it, converged)
    return Fit(s, elo, prior, it, converged)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 0.5 * (1 + tanh(x/2)) is overflow-free for any x
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def default_prior_weight(match_weights: np.ndarray, strength: float = 1.0) -> float:
    """`strength` virtual matches' worth of weight per auditor, where a virtual match weighs what an
    average real match weighs (points at stake, or 1 when unweighted). Small next to real data."""
    mw = np.asarray(match_weights, dtype=float)
    mw = mw[mw > 0]
    return strength * (float(mw.mean()) if mw.size else 1.0)
