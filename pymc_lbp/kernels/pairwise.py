"""Locally balanced transitions on a pairwise binary block, every step of a draw in one numba call.

On a pairwise binary block (:mod:`pymc_lbp.pairwise`) the exact one-site differences are
``Delta_i(x) = (1 - 2 x_i) h_i(x)`` with the field ``h = b + W x``, and flipping site ``j``
changes the fields of ``j``'s neighbours only (``h_i += W_ij (1 - 2 x_j)``) and the logp by
``Delta_j``. A transition then needs no model evaluation at all. One transition, read top to
bottom (the math of :mod:`pymc_lbp.path_proposals`, whose numpy functions are the reference):

1. the path length: a single-site step (``R = 1``) with probability ``share``, else ``R`` the
   stochastic rounding of the scale ``U`` (``E[R] = U``), within ``[1, n]``. ``share = 1`` is the
   single-site proposal of :class:`~pymc_lbp.LocallyBalanced` and
   :class:`~pymc_lbp.GibbsWithGradients`;
2. ``R`` distinct sites drawn without replacement, each pick proportional to the locally
   balanced site weight ``g(e^{Delta_i})`` among the sites not yet picked (sequential
   inverse-CDF picks for short paths, the exponential race for long ones: the same
   distribution), scored by :func:`pymc_lbp.path_kernels.log_prob_order`;
3. the flips applied one after the other: the logp moves by ``Delta_j`` at the current state,
   the neighbours' fields are updated (their old values saved for a rejection);
4. the weights at the proposal ``y`` (``O(n)``) and the reverse path (same sites, reversed
   order) scored with them;
5. the MH accept, with the semantics of :func:`pymc_lbp.proposals.mh_accept` (a non-finite
   ratio is a rejection);
6. while tuning, the path scale's Robbins-Monro update on the path steps
   (:meth:`pymc_lbp.adaptation.PathLengthAdaptation.update`, the same arithmetic).

Randomness: the step's own ``self.rng`` (numba draws from a numpy ``Generator`` passed in, and
its state advances as if the draws were made in Python), so seeding, ``set_rng`` and pickling are
PyMC's. The tests check the one-step
transition probabilities against the exact kernel enumerated with the numpy reference.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from pymc_lbp.path_kernels import CANCEL, linear_weights_into, log_prob_order, njit, race

BALANCING_CODES = {"sqrt": 0, "barker": 1, "min": 2, "max": 3}
"""The balancing functions the kernel implements (a custom callable takes the general path)."""

RACE_FROM = 16
"""Paths of at least this many sites are drawn by the exponential race (``O(n log R)``), shorter
ones by sequential inverse-CDF picks (``O(R n)``, no exponential per site)."""


class PairwiseSteps(NamedTuple):
    """What :func:`pairwise_steps` returns (the block state is updated in place)."""

    logp: float
    sum_accept: float
    n_accepted: int
    sum_length: int
    sum_moved: int
    log_u: float
    log_u_bar: float
    adapt_count: int
    doubling: bool


@njit(cache=True, nogil=True)
def log_g(d: float, code: int) -> float:
    """``log g(e^d)`` of the balancing function ``code`` (see :data:`BALANCING_CODES`)."""
    if code == 0:
        return 0.5 * d
    if code == 1:  # -log(1 + e^-d), stable on both sides
        neg = -d
        top = neg if neg > 0.0 else 0.0
        return -(top + math.log1p(math.exp(-abs(d))))
    if code == 2:
        return d if d < 0.0 else 0.0
    return d if d > 0.0 else 0.0


@njit(cache=True, nogil=True)
def site_weights(x: np.ndarray, h: np.ndarray, code: int, w: np.ndarray, lin: np.ndarray):
    """Fill ``lin`` with ``exp(w - max w)``, ``w_i = log g(e^{Delta_i})``; return
    ``(total, number of positive weights)``."""
    for i in range(x.shape[0]):
        w[i] = log_g((1.0 - 2.0 * x[i]) * h[i], code)
    _, total, n_pos = linear_weights_into(w, lin)
    return total, n_pos


@njit(cache=True, nogil=True)
def pick_sequential(
    lin: np.ndarray, total: float, size: int, taken: np.ndarray, out: np.ndarray, rng
):
    """``size`` distinct sites into ``out``, each pick proportional to ``lin`` among the sites not
    yet picked (``taken`` is all False on entry and on exit)."""
    n = lin.shape[0]
    remaining = total
    for r in range(size):
        u = rng.random() * remaining
        acc = 0.0
        chosen = -1
        last = -1
        for i in range(n):
            if taken[i] or not lin[i] > 0.0:
                continue
            last = i
            acc += lin[i]
            if acc > u:
                chosen = i
                break
        if chosen < 0:  # u at the rounding edge of the sum: the last positive site
            chosen = last
        taken[chosen] = True
        out[r] = chosen
        remaining -= lin[chosen]
        if remaining < CANCEL * total:  # most of the mass is on the path: sum the rest directly
            remaining = 0.0
            for i in range(n):
                if not taken[i]:
                    remaining += lin[i]
    for r in range(size):
        taken[out[r]] = False


@njit(cache=True, nogil=True)
def adapt_update(
    log_u, log_u_bar, count, accept, doubling, target, max_length, gamma0, t0, kappa, avg_kappa
):
    """:meth:`pymc_lbp.adaptation.PathLengthAdaptation.update`, the same arithmetic."""
    log_max = math.log(max_length)
    if doubling:
        if accept >= target and log_u < log_max:
            log_u = min(log_u + math.log(2.0), log_max)
            return log_u, log_u, 0, True
        doubling = False
    gain = gamma0 * (count + 1 + t0) ** (-kappa)
    log_u = min(max(log_u + gain * (accept - target), 0.0), log_max)
    eta = (count + 1) ** (-avg_kappa)
    log_u_bar = eta * log_u + (1.0 - eta) * log_u_bar
    return log_u, log_u_bar, count + 1, doubling


@njit(cache=True, nogil=True)
def _steps(
    x, h, logp, indptr, indices, data, n_steps, code, share, scale, adapt,
    log_u, log_u_bar, count, doubling, target, gamma0, t0, kappa, avg_kappa, rng,
):  # fmt: skip
    n = x.shape[0]
    w = np.empty(n)
    lin_x = np.empty(n)
    lin_y = np.empty(n)
    total_x, pos_x = site_weights(x, h, code, w, lin_x)
    taken = np.zeros(n, dtype=np.bool_)
    sites = np.empty(n, dtype=np.int64)
    saved_i = np.empty(max(indices.shape[0], 1), dtype=np.int64)
    saved_v = np.empty(max(indices.shape[0], 1))
    noise = np.empty(n)
    sum_accept = 0.0
    n_accepted = 0
    sum_length = 0
    sum_moved = 0
    for _ in range(n_steps):
        # 1. the path length
        path_step = True
        if rng.random() < share:
            length = 1
            path_step = False
        else:
            u_scale = math.exp(log_u) if adapt else scale
            lo = math.floor(u_scale)
            length = int(lo) + (1 if rng.random() < u_scale - lo else 0)
            length = min(max(length, 1), n)
        sum_length += length
        if pos_x < length:  # fewer movable sites than the path needs: no proposal
            if adapt and path_step:
                log_u, log_u_bar, count, doubling = adapt_update(
                    log_u, log_u_bar, count, 0.0, doubling, target, n, gamma0, t0, kappa,
                    avg_kappa,
                )  # fmt: skip
            continue
        # 2. the sites, in order
        path = sites[:length]
        if length < RACE_FROM:
            pick_sequential(lin_x, total_x, length, taken, path, rng)
        else:
            for i in range(n):
                noise[i] = -math.log(1.0 - rng.random())
            path[:] = race(lin_x, noise, length)
        log_q_fwd = log_prob_order(lin_x, total_x, path)
        # 3. the flips, one after the other
        logp_y = logp
        n_saved = 0
        for r in range(length):
            j = path[r]
            s = 1.0 - 2.0 * x[j]
            logp_y += s * h[j]
            x[j] = 1 - x[j]
            for k in range(indptr[j], indptr[j + 1]):
                i = indices[k]
                saved_i[n_saved] = i
                saved_v[n_saved] = h[i]
                n_saved += 1
                h[i] += data[k] * s
        # 4. the weights at y and the reverse path
        total_y, pos_y = site_weights(x, h, code, w, lin_y)
        log_q_rev = log_prob_order(lin_y, total_y, path[::-1])
        # 5. the MH accept
        ratio = -np.inf
        if math.isfinite(logp_y) and math.isfinite(log_q_fwd) and math.isfinite(log_q_rev):
            ratio = logp_y - logp + log_q_rev - log_q_fwd
        if math.isfinite(ratio):
            prob = math.exp(min(ratio, 0.0))
            accepted = rng.random() < prob
        else:
            prob = 1.0 if ratio > 0.0 else 0.0
            accepted = ratio > 0.0
        sum_accept += prob
        if accepted:
            n_accepted += 1
            sum_moved += length
            logp = logp_y
            lin_x, lin_y = lin_y, lin_x
            total_x, pos_x = total_y, pos_y
        else:
            for r in range(length):
                j = path[r]
                x[j] = 1 - x[j]
            for k in range(n_saved - 1, -1, -1):  # the first saved value of a field last
                h[saved_i[k]] = saved_v[k]
        # 6. the path scale, while tuning
        if adapt and path_step:
            log_u, log_u_bar, count, doubling = adapt_update(
                log_u, log_u_bar, count, prob, doubling, target, n, gamma0, t0, kappa, avg_kappa
            )
    return (logp, sum_accept, n_accepted, sum_length, sum_moved, log_u, log_u_bar, count, doubling)


def pairwise_steps(
    x: np.ndarray,
    h: np.ndarray,
    logp: float,
    couplings: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_steps: int,
    balancing: str,
    rng: np.random.Generator,
    *,
    share: float = 1.0,
    scale: float = 1.0,
    adaptation=None,
    adapt_state: tuple[float, float, int, bool] = (0.0, 0.0, 0, False),
) -> PairwiseSteps:
    """Run ``n_steps`` transitions from ``x`` (int64, updated in place) with field ``h``
    (float64, updated in place) and logp ``logp``.

    Parameters
    ----------
    couplings : tuple of ndarray
        ``(indptr, indices, data)``: ``W`` as a symmetric CSR matrix without diagonal.
    balancing : {"sqrt", "barker", "min", "max"}
    rng : numpy.random.Generator
        The step's generator (its state advances).
    share : float
        Probability of a single-site step (1: single-site steps only).
    scale : float
        The path scale ``U`` when it is not being tuned.
    adaptation : PathLengthAdaptation, optional
        Tune ``U`` on the path steps, starting from ``adapt_state`` =
        ``(log U, log Ubar, count, doubling)``.
    """
    indptr, indices, data = couplings
    adapt = adaptation is not None
    a = adaptation
    log_u, log_u_bar, count, doubling = adapt_state
    out = _steps(
        x,
        h,
        float(logp),
        indptr,
        indices,
        data,
        int(n_steps),
        BALANCING_CODES[balancing],
        float(share),
        float(scale),
        adapt,
        float(log_u),
        float(log_u_bar),
        int(count),
        bool(doubling),
        float(a.target) if adapt else 0.0,
        float(a.gamma0) if adapt else 0.0,
        float(a.t0) if adapt else 0.0,
        float(a.kappa) if adapt else 0.0,
        float(a.avg_kappa) if adapt else 0.0,
        rng,
    )
    return PairwiseSteps(
        float(out[0]), float(out[1]), int(out[2]), int(out[3]), int(out[4]),
        float(out[5]), float(out[6]), int(out[7]), bool(out[8]),
    )  # fmt: skip


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernel once, not inside a timed draw."""
    indptr = np.array([0, 1, 2], dtype=np.int64)
    indices = np.array([1, 0], dtype=np.int64)
    data = np.array([0.5, 0.5])
    for adapt in (False, True):
        _steps(
            np.zeros(2, dtype=np.int64), np.zeros(2), 0.0, indptr, indices, data, 2, 0, 0.5, 1.0,
            adapt, 0.0, 0.0, 0, True, 0.5, 1.0, 10.0, 0.6, 0.75, np.random.default_rng(0),
        )  # fmt: skip


__all__ = [
    "BALANCING_CODES",
    "PairwiseSteps",
    "adapt_update",
    "log_g",
    "pairwise_steps",
    "pick_sequential",
    "site_weights",
]
