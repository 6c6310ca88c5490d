"""Locally balanced transitions on a pairwise binary block, every step of a draw in one numba call.

On a pairwise binary block (:mod:`pymc_lbp.samplers.pairwise.couplings`) the exact one-site
differences are ``Delta_i(x) = (1 - 2 x_i) h_i(x)`` with the field ``h = b + W x``, and flipping
site ``j`` changes the fields of ``j``'s neighbours only (``h_i += W_ij (1 - 2 x_j)``) and the logp
by ``Delta_j``. A transition then needs no model evaluation at all. One transition, read top to
bottom (the math of :mod:`pymc_lbp.samplers.path.reference`, whose numpy functions are the
reference):

1. the path length: a single-site step (``R = 1``) with probability ``share``, else ``R`` the
   stochastic rounding of the scale ``U`` (``E[R] = U``), within ``[1, n]``
   (:func:`pymc_lbp.samplers.path.reference.draw_path_length`). ``share = 1`` is the
   single-site proposal of :class:`~pymc_lbp.LocallyBalanced` and
   :class:`~pymc_lbp.GibbsWithGradients`;
2. ``R`` distinct sites drawn without replacement, each pick proportional to the locally
   balanced site weight ``g(e^{Delta_i})`` among the sites not yet picked, from a sum tree of
   the weights (``O(log n)`` a pick), scored by
   :func:`log_prob_order_log` (the picked sites' weights in log space: a reverse move ``e^-800``
   below the others keeps its probability instead of underflowing to an impossible move);
3. the flips applied one after the other: the logp moves by ``Delta_j`` at the current state,
   the neighbours' fields are updated (their old values saved for a rejection);
4. the weights at the proposal ``y``: only the flipped sites and their neighbours change, so the
   sum tree is updated in ``O(R * degree * log n)`` (and restored on a rejection); the reverse
   path (same sites, reversed order) is scored with them. The linear weights are
   ``exp(w - top)`` for a ``top`` fixed until a weight would overflow or the total underflow
   (then all are rescaled, ``O(n)``);
5. the MH accept: :func:`pymc_lbp.samplers.common.mh_log_ratio` and
   :func:`~pymc_lbp.samplers.common.mh_accept` (a non-finite ratio is a rejection);
6. while tuning, the path scale's Robbins-Monro update on the path steps
   (:func:`pymc_lbp.samplers.path.adaptation.adapt_update`).

Those named functions are the numpy reference's own, plain Python compiled into the kernel.

Randomness: the step's own ``self.rng`` (numba draws from a numpy ``Generator`` passed in, and
its state advances as if the draws were made in Python), so seeding, ``set_rng`` and pickling are
PyMC's. The tests check the one-step
transition probabilities against the exact kernel enumerated with the numpy reference.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np

from pymc_lbp.samplers.common import mh_accept, mh_log_ratio
from pymc_lbp.samplers.path.adaptation import adapt_update
from pymc_lbp.samplers.path.reference import CANCEL, draw_path_length
from pymc_lbp.samplers.self_balancing.parametrizations import D_CLIP, GRID_DENSITY

ENABLED = os.environ.get("PYMC_LBP_NUMBA", "1") != "0"
"""Whether pairwise binary blocks run this kernel (``PYMC_LBP_NUMBA=0``: they take the general
differences and kernels, :mod:`pymc_lbp.samplers.pairwise.couplings` reads it)."""

try:  # pragma: no branch - numba ships with pytensor
    from numba import njit
except ImportError:  # pragma: no cover
    ENABLED = False

    def njit(*args, **kwargs):
        def wrap(fn):
            return fn

        return wrap(args[0]) if args and callable(args[0]) else wrap


BALANCING_CODES = {"sqrt": 0, "barker": 1, "min": 2, "max": 3}
"""The balancing functions the kernel implements (a custom callable takes the general path)."""

LEARNED_CODES = {"lsb1": 4, "table": 5}
"""SelfBalancing's learned functions (:mod:`pymc_lbp.samplers.self_balancing.parametrizations`),
their parameters passed as an array: ``"lsb1"`` the four mixture weights ``softmax(theta)`` (sqrt,
Barker, min, max), ``"table"`` the even part of an LSB2 function on its grid."""

_NO_PARAMS = np.zeros(0)


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
def log_g(d: float, code: int, params: np.ndarray = _NO_PARAMS) -> float:
    """``log g(e^d)`` of the balancing function ``code`` (see :data:`BALANCING_CODES` and
    :data:`LEARNED_CODES`; ``params`` for the learned ones), the arithmetic of
    :mod:`pymc_lbp.samplers.balancing` and
    :mod:`pymc_lbp.samplers.self_balancing.parametrizations`."""
    if code == 0:
        return 0.5 * d
    if code == 1:  # -log(1 + e^-d), stable on both sides
        neg = -d
        top = neg if neg > 0.0 else 0.0
        return -(top + math.log1p(math.exp(-abs(d))))
    if code == 2:
        return d if d < 0.0 else 0.0
    if code == 3:
        return d if d > 0.0 else 0.0
    u = abs(d)
    if code == 4:  # LSB1: d/2 + u/2 + log(w_max + w_sqrt z + w_barker z^2/(1+z^2) + w_min z^2)
        z = math.exp(-0.5 * u)
        z2 = z * z
        poly = params[3] + params[0] * z + params[1] * z2 / (1.0 + z2) + params[2] * z2
        return 0.5 * d + 0.5 * u + math.log(poly)
    # LSB2: d/2 + the even part, linearly interpolated on its grid (constant beyond D_CLIP)
    pos = min(u, D_CLIP) * GRID_DENSITY
    idx = min(int(pos), params.shape[0] - 2)
    frac = pos - idx
    return 0.5 * d + (1.0 - frac) * params[idx] + frac * params[idx + 1]


@njit(cache=True, nogil=True)
def linear_weights_into(site: np.ndarray, lin: np.ndarray) -> tuple[float, float, int]:
    """Fill ``lin`` with ``exp(site - top)``, ``top = max(site)`` (0 if none); return
    ``(top, total, n_positive)`` (:func:`pymc_lbp.samplers.path.reference.linear_weights`)."""
    n = site.shape[0]
    top = -np.inf
    for i in range(n):
        if site[i] > top:
            top = site[i]
    if not math.isfinite(top):
        top = 0.0
    total = 0.0
    n_pos = 0
    for i in range(n):
        v = math.exp(site[i] - top)
        lin[i] = v
        total += v
        if v > 0.0:
            n_pos += 1
    return top, total, n_pos


@njit(cache=True, nogil=True)
def log_prob_order_log(
    log_lin: np.ndarray, lin: np.ndarray, total: float, sites: np.ndarray
) -> float:
    """Log-probability of drawing ``sites`` in order without replacement, proportional to
    ``lin`` (``total = sum(lin)``), each picked site's weight taken in log space
    (``log_lin = log(lin)``, finite where ``lin`` underflowed to 0): a site ``e^-800`` below
    the scale keeps its log-probability instead of ``-inf``. Where the remaining mass itself
    underflows, it is a log-sum-exp over the sites not yet picked (``O(n)``, rare). The
    arithmetic of :func:`pymc_lbp.samplers.path.reference.log_prob_order`."""
    R = sites.shape[0]
    picked_lin = 0.0
    for r in range(R):
        if log_lin[sites[r]] == -np.inf:
            return -np.inf
        picked_lin += lin[sites[r]]
    rest = total - picked_lin
    suffix_mode = rest < CANCEL * total
    if suffix_mode:  # the path holds almost all the mass: the rest summed directly
        rest = 0.0
        mask = np.ones(lin.shape[0], dtype=np.bool_)
        for r in range(R):
            mask[sites[r]] = False
        for i in range(lin.shape[0]):
            if mask[i]:
                rest += lin[i]
    remaining = np.empty(R)
    if suffix_mode:
        acc = rest
        for r in range(R - 1, -1, -1):
            acc += lin[sites[r]]
            remaining[r] = acc
    else:
        prefix = 0.0
        for r in range(R):
            remaining[r] = total - prefix
            prefix += lin[sites[r]]
    out = 0.0
    for r in range(R):
        if remaining[r] > 1e-300:
            out += log_lin[sites[r]] - math.log(remaining[r])
        else:  # every weight still in the race underflowed: log-sum-exp of their logs
            taken = np.zeros(lin.shape[0], dtype=np.bool_)
            for q in range(r):
                taken[sites[q]] = True
            top = -np.inf
            for i in range(lin.shape[0]):
                if not taken[i] and log_lin[i] > top:
                    top = log_lin[i]
            acc = 0.0
            for i in range(lin.shape[0]):
                if not taken[i]:
                    acc += math.exp(log_lin[i] - top)
            out += log_lin[sites[r]] - (top + math.log(acc))
    return out


@njit(cache=True, nogil=True)
def site_weights(
    x: np.ndarray, h: np.ndarray, code: int, params: np.ndarray, w: np.ndarray, lin: np.ndarray
):
    """Fill ``lin`` with ``exp(w - max w)``, ``w_i = log g(e^{Delta_i})``; return
    ``(max w, total, number of positive weights)``."""
    for i in range(x.shape[0]):
        w[i] = log_g((1.0 - 2.0 * x[i]) * h[i], code, params)
    return linear_weights_into(w, lin)


# ----------------------------------------------------------------------------- the sum tree
# Leaves tree[P + i] = lin[i] (P a power of two >= n), every inner node the sum of its two
# children, recomputed from them on every change: the root is the total without drift.
@njit(cache=True, nogil=True)
def tree_build(lin: np.ndarray, tree: np.ndarray, size: int) -> None:
    """Fill the sum tree of ``lin`` (``size`` leaves)."""
    tree[:] = 0.0
    for i in range(lin.shape[0]):
        tree[size + i] = lin[i]
    for k in range(size - 1, 0, -1):
        tree[k] = tree[2 * k] + tree[2 * k + 1]


@njit(cache=True, nogil=True)
def tree_set(tree: np.ndarray, size: int, i: int, value: float) -> None:
    """Set leaf ``i`` and the sums above it."""
    k = size + i
    tree[k] = value
    k >>= 1
    while k >= 1:
        tree[k] = tree[2 * k] + tree[2 * k + 1]
        k >>= 1


@njit(cache=True, nogil=True)
def tree_find(tree: np.ndarray, size: int, u: float) -> int:
    """The leaf where the cumulative sum passes ``u`` (``0 <= u < root``): leaf ``i`` with
    probability ``lin_i / root`` for ``u`` uniform. A zero-weight branch is never entered (the
    rounding of ``u`` minus a left sum cannot lead to a leaf of weight 0)."""
    k = 1
    while k < size:
        left = tree[2 * k]
        if u < left or not tree[2 * k + 1] > 0.0:
            k = 2 * k
        else:
            u -= left
            k = 2 * k + 1
    return k - size


@njit(cache=True, nogil=True)
def pick_sites(tree: np.ndarray, size: int, lin: np.ndarray, out: np.ndarray, rng) -> None:
    """``len(out)`` distinct sites, each pick proportional to ``lin`` among the sites not yet
    picked (picked leaves are zeroed for the next pick, then restored)."""
    for r in range(out.shape[0]):
        i = tree_find(tree, size, rng.random() * tree[1])
        out[r] = i
        tree_set(tree, size, i, 0.0)
    for r in range(out.shape[0]):
        tree_set(tree, size, out[r], lin[out[r]])


RESCALE_ABOVE = 600.0
"""A new site log-weight this far above the scale ``top`` of the linear weights rescales all of
them (``exp`` would overflow near 709)."""

RESCALE_BELOW = 1e-250
"""A total of the linear weights below this rescales all of them (the largest weight has fallen
far below ``top``; a weight ``e^-745`` below it would underflow to 0)."""


@njit(cache=True, nogil=True)
def _steps(
    x, h, logp, indptr, indices, data, n_steps, code, params, share, scale, adapt,
    log_u, log_u_bar, count, doubling, target, gamma0, t0, kappa, avg_kappa, rng,
):  # fmt: skip
    n = x.shape[0]
    size = 1
    while size < n:
        size *= 2
    w = np.empty(n)
    lin = np.empty(n)
    tree = np.empty(2 * size)
    top, _, pos = site_weights(x, h, code, params, w, lin)
    log_lin = w - top  # the linear weights' logs (finite where lin underflowed to 0)
    tree_build(lin, tree, size)
    sites = np.empty(n, dtype=np.int64)
    n_save = n + indices.shape[0]
    saved_i = np.empty(n_save, dtype=np.int64)  # fields changed by the flips
    saved_v = np.empty(n_save)
    changed_i = np.empty(n_save, dtype=np.int64)  # linear weights changed at y
    changed_v = np.empty(n_save)
    changed_l = np.empty(n_save)
    sum_accept = 0.0
    n_accepted = 0
    sum_length = 0
    sum_moved = 0
    for _ in range(n_steps):
        # 1. the path length
        length, path_step = draw_path_length(math.exp(log_u) if adapt else scale, share, n, rng)
        sum_length += length
        if pos < length:  # fewer movable sites than the path needs: no proposal
            if adapt and path_step:
                log_u, log_u_bar, count, doubling = adapt_update(
                    log_u, log_u_bar, count, 0.0, doubling, target, n, gamma0, t0, kappa,
                    avg_kappa,
                )  # fmt: skip
            continue
        # 2. the sites, in order, from the sum tree of the weights at x
        path = sites[:length]
        total_x = tree[1]
        pick_sites(tree, size, lin, path, rng)
        log_q_fwd = log_prob_order_log(log_lin, lin, total_x, path)
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
        # 4. the weights at y (only the flipped sites and their neighbours change) and the
        # reverse path
        n_changed = 0
        rescale = False
        pos_x = pos
        for m in range(length + n_saved):
            i = path[m] if m < length else saved_i[m - length]
            wi = log_g((1.0 - 2.0 * x[i]) * h[i], code, params) - top
            if wi > RESCALE_ABOVE:
                rescale = True
            v = math.exp(min(wi, RESCALE_ABOVE))
            old = lin[i]
            changed_i[n_changed] = i
            changed_v[n_changed] = old
            changed_l[n_changed] = log_lin[i]
            n_changed += 1
            pos += (1 if v > 0.0 else 0) - (1 if old > 0.0 else 0)
            lin[i] = v
            log_lin[i] = wi
            tree_set(tree, size, i, v)
        top_x = top
        if rescale or not tree[1] >= RESCALE_BELOW:
            top, _, pos = site_weights(x, h, code, params, w, lin)
            log_lin[:] = w - top
            tree_build(lin, tree, size)
        log_q_rev = log_prob_order_log(log_lin, lin, tree[1], path[::-1])
        # 5. the MH accept (a certain outcome draws no uniform)
        ratio = mh_log_ratio(logp, logp_y, log_q_fwd, log_q_rev)
        prob, accepted = mh_accept(ratio, rng.random() if math.isfinite(ratio) else 0.0)
        sum_accept += prob
        if accepted:
            n_accepted += 1
            sum_moved += length
            logp = logp_y
        else:
            for r in range(length):
                j = path[r]
                x[j] = 1 - x[j]
            for k in range(n_saved - 1, -1, -1):  # the first saved value of a field last
                h[saved_i[k]] = saved_v[k]
            if top != top_x:  # rescaled at y: rebuild at x
                top, _, pos = site_weights(x, h, code, params, w, lin)
                log_lin[:] = w - top
                tree_build(lin, tree, size)
            else:
                for k in range(n_changed - 1, -1, -1):
                    lin[changed_i[k]] = changed_v[k]
                    log_lin[changed_i[k]] = changed_l[k]
                for k in range(n_changed):
                    tree_set(tree, size, changed_i[k], lin[changed_i[k]])
                pos = pos_x
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
    params: np.ndarray | None = None,
) -> PairwiseSteps:
    """Run ``n_steps`` transitions from ``x`` (int64, updated in place) with field ``h``
    (float64, updated in place) and logp ``logp``.

    Parameters
    ----------
    couplings : tuple of ndarray
        ``(indptr, indices, data)``: ``W`` as a symmetric CSR matrix without diagonal.
    balancing : {"sqrt", "barker", "min", "max", "lsb1", "table"}
        A built-in function, or a learned one (:data:`LEARNED_CODES`) with its ``params``.
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
        BALANCING_CODES.get(balancing, LEARNED_CODES.get(balancing, -1)),
        _NO_PARAMS if params is None else np.ascontiguousarray(params, dtype=np.float64),
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
            np.zeros(2, dtype=np.int64), np.zeros(2), 0.0, indptr, indices, data, 2, 0, _NO_PARAMS,
            0.5, 1.0,
            adapt, 0.0, 0.0, 0, True, 0.5, 1.0, 10.0, 0.6, 0.75, np.random.default_rng(0),
        )  # fmt: skip


__all__ = [
    "BALANCING_CODES",
    "LEARNED_CODES",
    "PairwiseSteps",
    "ENABLED",
    "adapt_update",
    "linear_weights_into",
    "log_g",
    "log_prob_order_log",
    "pairwise_steps",
    "pick_sites",
    "site_weights",
    "tree_build",
    "tree_find",
    "tree_set",
]
