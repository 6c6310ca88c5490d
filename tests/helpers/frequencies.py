"""Comparing MCMC visit frequencies with exact probabilities, with thresholds from the run.

Each state's indicator series gives a visit frequency; its standard error uses the exact
probability p and ArviZ's effective sample size of the indicator,
``se = sqrt(p (1 - p) / ess)``. The largest |z| over states is compared with a Bonferroni bound at
family-wise level ``alpha`` (default 1e-3), so the threshold comes from the sample, not tuning.

That standard error is sound only from a large enough ESS: every indicator tested (one the chains
both visited and left) must have an ESS of at least ``MIN_ESS`` (:mod:`tests.helpers.ess`), or
the helpers fail.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from tests.helpers.ess import checked_ess


def state_indices(draws: np.ndarray, states: np.ndarray) -> np.ndarray:
    """Index into ``states`` of every draw; ``draws`` has shape (chain, draw, n_sites)."""
    lookup = {tuple(s): k for k, s in enumerate(states)}
    flat = draws.reshape(-1, draws.shape[-1])
    idx = np.array([lookup[tuple(row)] for row in flat])
    return idx.reshape(draws.shape[:2])


def state_z_scores(
    draws: np.ndarray, states: np.ndarray, probs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per state, the |z| of its visit frequency against ``probs`` and the ESS behind it.

    Parameters
    ----------
    draws : numpy.ndarray
        Block states, shape ``(chain, draw, n_sites)``.
    states : numpy.ndarray
        Every state, shape ``(n_states, n_sites)``.
    probs : numpy.ndarray
        Exact probability of every state.

    Returns
    -------
    zs : numpy.ndarray
        ``|freq - p| / sqrt(p (1 - p) / ess)`` per state, NaN where ``p = 0`` (such a state must
        never be visited: asserted).
    ess : numpy.ndarray
        ArviZ's bulk ESS of the state's indicator series, asserted at least ``MIN_ESS``, at most
        the number of draws; the number of draws when the series is constant (|z| is then as
        large as it gets); NaN where ``p = 0``.
    """
    idx = state_indices(draws, states)
    n_total = idx.size
    zs, ess_all = np.full(len(probs), np.nan), np.full(len(probs), np.nan)
    for k, p in enumerate(probs):
        ind = (idx == k).astype(float)
        if p == 0:
            assert ind.sum() == 0, f"state {states[k]} has probability 0 but was visited"
            continue
        ess = float(n_total)
        if 0 < ind.mean() < 1:
            ess = min(checked_ess(ind, f"state {states[k]}", method="bulk"), ess)
        zs[k] = abs(ind.mean() - p) / np.sqrt(p * (1 - p) / ess)
        ess_all[k] = ess
    return zs, ess_all


def max_z_score(draws: np.ndarray, states: np.ndarray, probs: np.ndarray) -> tuple[float, float]:
    """``(max |z|, Bonferroni critical value at 1e-3)`` of :func:`state_z_scores`."""
    zs = state_z_scores(draws, states, probs)[0]
    tested = zs[np.asarray(probs) > 0]
    crit = stats.norm.isf(1e-3 / (2 * tested.size))
    return float(tested.max()), float(crit)


def posterior_draws(idata, names: list[str]) -> np.ndarray:
    """Block states (chain, draw, n_sites) from the posterior group, variables concatenated."""
    parts = []
    for n in names:
        v = idata.posterior[n].values
        parts.append(v.reshape(v.shape[0], v.shape[1], -1))
    return np.concatenate(parts, axis=-1).astype(np.int64)


def marginal_z_scores(
    draws: dict[int, np.ndarray], exact: list[np.ndarray], alpha: float = 1e-3
) -> tuple[np.ndarray, float, list[tuple[int, int, float, float]]]:
    """z-scores of per-variable marginal frequencies against exact marginals.

    Parameters
    ----------
    draws : dict of int to numpy.ndarray
        Per network variable, its ``(chain, draw)`` values.
    exact : list of numpy.ndarray
        Exact marginal of every network variable.
    alpha : float
        Family-wise level of the Bonferroni bound.

    Returns
    -------
    zs : numpy.ndarray
        ``|freq - p| / sqrt(p (1 - p) / ess)`` for every tested entry: each category of each
        variable with ``0 < p < 1`` (binary variables: category 1 only, category 0 is the same
        test), ``ess`` ArviZ's bulk ESS of the indicator series, asserted at least
        ``MIN_ESS`` (the number of draws when the series is constant: |z| is then as large
        as it gets).
    crit : float
        Two-sided Bonferroni critical value at ``alpha`` over the tested entries.
    violations : list of (variable, category, p, freq)
        Entries with exact ``p`` in {0, 1} whose frequency differs from ``p``.
    """
    zs, violations = [], []
    for v, x in draws.items():
        probs = exact[v]
        cats = [1] if probs.size == 2 else range(probs.size)
        for k in cats:
            ind = (x == k).astype(float)
            p, freq = float(probs[k]), float(ind.mean())
            if p in (0.0, 1.0):
                if freq != p:
                    violations.append((v, k, p, freq))
                continue
            ess = (
                checked_ess(ind, f"variable {v} = {k}", method="bulk")
                if 0 < freq < 1
                else float(ind.size)
            )
            zs.append(abs(freq - p) / np.sqrt(p * (1 - p) / min(ess, ind.size)))
    crit = float(stats.norm.isf(alpha / (2 * max(len(zs), 1))))
    return np.array(zs), crit, violations


def marginal_violations(
    draws: dict[int, np.ndarray], exact: list[np.ndarray]
) -> list[tuple[int, int, float, float]]:
    """The entries with exact probability 0 or 1 whose frequency differs from it:
    ``(variable, category, p, freq)``, as :func:`marginal_z_scores` reports them, without its
    z-scores (nor their ESS floor)."""
    out = []
    for v, x in draws.items():
        for k, p in enumerate(exact[v]):
            freq = float(np.mean(x == k))
            if p in (0.0, 1.0) and freq != p:
                out.append((v, k, float(p), freq))
    return out
