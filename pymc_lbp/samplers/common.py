"""Pure proposal math: categorical draws, ordered draws without replacement, MH acceptance.

Every function takes arrays (and a ``numpy.random.Generator`` where it draws) and returns arrays or
numbers; none keeps state. Step methods are thin shells around these functions, and the
exact-enumeration tests check the same functions against independent numpy code.

All probabilities are handled in log space. A weight of ``-inf`` means "never proposed"; a vector
whose weights are all ``-inf`` has no move (the step then stays where it is).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp


def log_normalize(log_w: np.ndarray) -> np.ndarray:
    """Normalise log-weights into log-probabilities.

    Parameters
    ----------
    log_w : ndarray
        Log-weights; ``-inf`` entries are allowed. ``+inf`` and NaN are not.

    Returns
    -------
    ndarray
        ``log_w - logsumexp(log_w)``; all ``-inf`` if every weight is ``-inf``.
    """
    log_w = np.asarray(log_w, dtype=float)
    top = np.max(log_w)
    if not np.isfinite(top):
        return np.full_like(log_w, -np.inf)
    return log_w - (top + np.log(np.sum(np.exp(log_w - top))))


def draw_categorical(log_p: np.ndarray, rng: np.random.Generator) -> int:
    """Draw an index with probability proportional to ``exp(log_p)``.

    A zero-probability entry is never returned. ``log_p`` need not be normalised, but must have
    at least one finite entry.
    """
    top = np.max(log_p)
    w = np.exp(log_p - top)
    c = np.cumsum(w)
    return int(np.searchsorted(c, rng.random() * c[-1], side="right"))


def prepare_weights(log_w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Precompute what drawing from ``exp(log_w)`` and scoring draws needs.

    Returns
    -------
    (log_w, cdf, log_z) or None
        ``cdf`` is the unnormalised cumulative sum of ``exp(log_w - max)``, ``log_z`` the
        log-normaliser ``logsumexp(log_w)``; ``None`` when every weight is zero.
    """
    top = np.max(log_w)
    if not np.isfinite(top):
        return None
    cdf = np.cumsum(np.exp(log_w - top))
    return log_w, cdf, float(top + np.log(cdf[-1]))


def draw_from_cdf(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """Draw an index from an unnormalised cumulative sum (see :func:`prepare_weights`) with one
    uniform from ``rng``; never a zero-weight index (as the graph's ``draw_slot``)."""
    idx = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return min(idx, int(np.argmax(cdf)))


def mh_log_ratio(logp_x: float, logp_y: float, log_q_fwd: float, log_q_rev: float) -> float:
    """Log Metropolis-Hastings ratio ``f(y) - f(x) + log q(x|y) - log q(y|x)``.

    Returns ``-inf`` when the proposal or its reverse is impossible or anything is NaN, and never
    NaN; ``+inf`` (certain acceptance) from an impossible current state (``f(x) = -inf``). The
    rule of every MH accept in the package (:mod:`pymc_lbp.samplers.mh_graph`).
    """
    if not (math.isfinite(logp_y) and math.isfinite(log_q_rev) and math.isfinite(log_q_fwd)):
        return -math.inf
    ratio = float(logp_y - logp_x + log_q_rev - log_q_fwd)
    return -math.inf if math.isnan(ratio) else ratio


def mh_log_ratios(
    logp_x: np.ndarray, logp_y: np.ndarray, log_q_fwd: np.ndarray, log_q_rev: np.ndarray
) -> np.ndarray:
    """:func:`mh_log_ratio` elementwise over arrays (the same rule, never NaN)."""
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = logp_y - logp_x + log_q_rev - log_q_fwd
        ok = np.isfinite(logp_y) & np.isfinite(log_q_fwd) & np.isfinite(log_q_rev)
        return np.where(ok & ~np.isnan(ratio), ratio, -np.inf)


def mh_accept_probs(log_ratio: np.ndarray) -> np.ndarray:
    """``min(1, exp(log_ratio))`` elementwise (0 for ``-inf`` and NaN, 1 for ``+inf``)."""
    log_ratio = np.asarray(log_ratio, dtype=float)
    nan = np.isnan(log_ratio)
    return np.where(nan, 0.0, np.exp(np.minimum(np.where(nan, 0.0, log_ratio), 0.0)))


def mh_accept(log_ratio: float, u: float) -> tuple[float, bool]:
    """Accept with probability ``min(1, exp(log_ratio))``, given the step's uniform ``u``.

    The numpy twin of :func:`pymc_lbp.samplers.mh_graph.mh_accept`, which takes its uniform the
    same way: ``-inf`` and NaN reject, ``+inf`` accepts, whatever ``u``.

    Returns
    -------
    accept_prob : float
        ``min(1, exp(log_ratio))``.
    accepted : bool
        ``u < accept_prob``.
    """
    if not math.isfinite(log_ratio):
        return (1.0, True) if log_ratio > 0 else (0.0, False)
    prob = math.exp(min(log_ratio, 0.0))
    return prob, bool(u < prob)


__all__ = [
    "draw_categorical",
    "log_normalize",
    "logsumexp",
    "mh_accept",
    "mh_log_ratio",
    "prepare_weights",
    "draw_from_cdf",
]
