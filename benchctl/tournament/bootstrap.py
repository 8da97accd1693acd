"""Confidence intervals for Bradley-Terry Elo by resampling environments, and interval ranks.

Matches inside one environment share the same canonical issue list, so they are correlated; the
unit of resampling is therefore the environment. Each round draws E environments with replacement;
because the fit only needs the summed wins matrix, a round's matrix is counts @ per-env matrices --
one matrix product for all rounds -- and all rounds are then fitted together by the batched Newton
solver, warm-started from the full-data fit (a few iterations each).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchctl.tournament.bradley_terry import Fit, fit_batch, strongly_connected
from benchctl.tournament.schema import PairwiseRow

DEFAULT_ROUNDS = 1000
DEFAULT_SEED = 0
CI = (2.5, 97.5)


@dataclass
class Intervals:
    lo: np.ndarray  # (A,) Elo
    hi: np.ndarray  # (A,)
    samples: np.ndarray  # (rounds, A) Elo of each bootstrap round
    rounds_with_prior: int
    converged: bool


def resample_counts(n_env: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """(rounds, n_env) how often each environment was drawn in each round."""
    draws = rng.integers(0, n_env, size=(rounds, n_env))
    flat = draws + (np.arange(rounds)[:, None] * n_env)
    return np.bincount(flat.ravel(), minlength=rounds * n_env).reshape(rounds, n_env).astype(float)


def bootstrap(
    env_wins: np.ndarray,
    full: Fit,
    *,
    prior_weight: float,
    rounds: int = DEFAULT_ROUNDS,
    seed: int = DEFAULT_SEED,
    ci: tuple[float, float] = CI,
    chunk: int = 250,
) -> Intervals:
    """env_wins: (E, A, A) wins matrix of each environment; full: the fit on their sum.

    A round uses the prior when the full fit did, or when its own resample has no MLE (e.g. an
    auditor that appears in only a few environments drew none of them).

    Fewer than two environments give no interval (NaN, and no rounds): every resample of one
    environment is that environment, so the percentiles would collapse onto the estimate and claim
    a certainty the data cannot give."""
    w_env = np.asarray(env_wins, dtype=float)
    e, a, _ = w_env.shape
    if a == 0 or e < 2 or rounds <= 0:
        z = np.full(a, np.nan)
        return Intervals(z, z.copy(), np.zeros((0, a)), 0, True)
    rng = np.random.default_rng(seed)
    counts = resample_counts(e, rounds, rng)
    flat = w_env.reshape(e, a * a)
    samples = np.empty((rounds, a))
    with_prior = 0
    converged = True
    # chunks bound memory (rounds x A x A floats) without changing the result
    for lo in range(0, rounds, chunk):
        c = counts[lo : lo + chunk]
        w = (c @ flat).reshape(len(c), a, a)
        need = ~strongly_connected(w) | bool(full.prior_used)
        fit = fit_batch(w, prior_weight=prior_weight, use_prior=need, start=full.strength)
        samples[lo : lo + len(c)] = fit.elo
        with_prior += int(need.sum())
        converged &= fit.converged
    lo_b, hi_b = np.percentile(samples, list(ci), axis=0)
    return Intervals(lo_b, hi_b, samples, with_prior, converged)


def interval_ranks(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """rank_i = 1 + number of auditors whose lower bound is above i's upper bound."""
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    return 1 + (lo[None, :] > hi[:, None]).sum(axis=1)


def pairwise(
    samples: np.ndarray, elo: np.ndarray, names: list[str], rated: np.ndarray, ci: tuple[float, float] = CI
) -> list[PairwiseRow]:
    """Elo(b) − Elo(a) for every pair of rated auditors (a before b by name): the full-data difference,
    the percentile interval and standard error of the per-round differences, and the two-sided
    bootstrap p, 2·(min(#rounds ≤ 0, #rounds ≥ 0) + 1) / (rounds + 1), capped at 1 (the +1s keep a
    p from being 0 with finitely many rounds). Without rounds (fewer than two environments) a row
    keeps its difference, with no interval, standard error or p."""
    order = sorted((i for i in range(len(names)) if rated[i]), key=lambda i: names[i])
    rounds = samples.shape[0]
    out: list[PairwiseRow] = []
    for x, i in enumerate(order):
        for j in order[x + 1 :]:
            diff = round(float(elo[j] - elo[i]), 2)
            if rounds == 0:
                out.append(PairwiseRow(a=names[i], b=names[j], diff=diff, lo=None, hi=None, se=None, p=None))
                continue
            d = samples[:, j] - samples[:, i]
            lo, hi = np.percentile(d, list(ci))
            tail = min(int((d <= 0).sum()), int((d >= 0).sum()))
            out.append(
                PairwiseRow(
                    a=names[i],
                    b=names[j],
                    diff=diff,
                    lo=round(float(lo), 2),
                    hi=round(float(hi), 2),
                    se=round(float(d.std(ddof=1)), 4) if rounds > 1 else 0.0,
                    p=min(1.0, 2 * (tail + 1) / (rounds + 1)),
                )
            )
    return out
