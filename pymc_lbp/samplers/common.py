"""Pure proposal math: categorical draws, ordered draws without replacement, MH acceptance.

Every function takes arrays (and a ``numpy.random.Generator`` where it draws) and returns arrays or
numbers; none keeps state. Step methods are thin shells around these functions, and the
exact-enumeration tests check the same functions against independent numpy code.

All probabilities are handled in log space. A weight of ``-inf`` means "never proposed"; a vector
whose weights are all ``-inf`` has no move (the step then stays where it is).

Each rule is written once: the scalar MH rule (:func:`mh_log_ratio`, :func:`mh_accept`) is plain
Python that the numba kernels compile too (``register_jitable``:
:mod:`pymc_lbp.samplers.pairwise.kernel`), and the array rules (:func:`mh_log_ratios`,
:func:`mh_accept_probs`, :func:`inverse_cdf`, :func:`draw_slot_rows`) take the array module
``xp``, numpy by default, ``jax.numpy`` in the JAX twins
(:mod:`pymc_lbp.samplers.self_balancing.jax_steps`). Their pytensor twins are
:mod:`pymc_lbp.samplers.mh_graph` and :func:`pymc_lbp.samplers.single_site.graph.draw_slot`.
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba ships with pytensor
    from numba.extending import register_jitable
except ImportError:  # pragma: no cover

    def register_jitable(fn):
        return fn


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
    return draw_from_cdf(np.cumsum(np.exp(log_p - np.max(log_p))), rng)


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


def draw_slot(cdf: np.ndarray, u: float) -> int:
    """Inverse-CDF draw from an unnormalised nondecreasing ``cdf`` with the uniform ``u``, as the
    graph's ``draw_slot`` (:mod:`pymc_lbp.samplers.single_site.graph`): ``u * cdf[-1]`` rounding
    up to the total goes to the last slot of positive weight, never to a zero-weight slot or out
    of range."""
    return int(inverse_cdf(np.asarray(cdf), np.float64(u)))


def draw_from_cdf(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """:func:`draw_slot` with one uniform from ``rng`` (``cdf`` as :func:`prepare_weights` makes
    it)."""
    return draw_slot(cdf, rng.random())


def inverse_cdf(cdf, u, xp=np):
    """:func:`draw_slot` along the last axis: the index drawn from each unnormalised
    nondecreasing ``cdf[..., :]`` with its uniform ``u[...]`` (``u``'s shape is
    ``cdf.shape[:-1]``), never one of zero weight (0 where every weight is zero); ``xp`` the
    array module."""
    count = xp.sum(cdf <= (u * cdf[..., -1])[..., None], axis=-1)
    return xp.minimum(count, xp.argmax(cdf, axis=-1))


def draw_slot_rows(log_w, u, xp=np) -> tuple:
    """:func:`draw_slot` of every row of the log-weights ``log_w`` (B, S) with its uniform
    ``u[i]`` (:func:`inverse_cdf` of the weights ``exp(log_w - max)``); ``xp`` the array
    module.

    Returns
    -------
    slot : (B,) int
        Each row's slot; 0 on a row without any positive weight.
    log_q : (B,)
        ``log_w[i, slot[i]]`` normalised: the slot's log-probability (NaN on a row without any
        positive weight).
    movable : (B,) bool
        Whether the row has a positive weight.
    """
    rows = xp.arange(log_w.shape[0])
    top = xp.max(log_w, axis=1)
    movable = xp.isfinite(top)
    top = xp.where(movable, top, 0.0)
    cdf = xp.cumsum(xp.exp(log_w - top[:, None]), axis=1)
    slot = xp.where(movable, inverse_cdf(cdf, u, xp), 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_q = log_w[rows, slot] - (top + xp.log(cdf[:, -1]))
    return slot, log_q, movable


@register_jitable
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
    logp_x: np.ndarray, logp_y: np.ndarray, log_q_fwd: np.ndarray, log_q_rev: np.ndarray, xp=np
) -> np.ndarray:
    """:func:`mh_log_ratio` elementwise over arrays (the same rule, never NaN); ``xp`` the array
    module."""
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = logp_y - logp_x + log_q_rev - log_q_fwd
        ok = xp.isfinite(logp_y) & xp.isfinite(log_q_fwd) & xp.isfinite(log_q_rev)
        return xp.where(ok & ~xp.isnan(ratio), ratio, -xp.inf)


def mh_accept_probs(log_ratio: np.ndarray, xp=np) -> np.ndarray:
    """``min(1, exp(log_ratio))`` elementwise (0 for ``-inf`` and NaN, 1 for ``+inf``); ``xp``
    the array module."""
    log_ratio = xp.asarray(log_ratio, dtype=float)
    nan = xp.isnan(log_ratio)
    return xp.where(nan, 0.0, xp.exp(xp.minimum(xp.where(nan, 0.0, log_ratio), 0.0)))


@register_jitable
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
    "draw_slot",
    "draw_slot_rows",
    "inverse_cdf",
    "log_normalize",
    "mh_accept",
    "mh_accept_probs",
    "mh_log_ratio",
    "mh_log_ratios",
    "prepare_weights",
    "draw_from_cdf",
]
