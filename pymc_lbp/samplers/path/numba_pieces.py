"""Compiled (numba) kernels of the path proposal's per-step array work.

A path step does three ``O(number of sites)`` things besides the compiled differences call: turn
the site log-weights of a state into linear weights and their total, select the ``R`` sites of
the exponential race, and score an ordered path. In numpy these are a dozen small calls each
(each paying the interpreter's overhead, which dominated a step on blocks of ~1000 sites:
docs/path_auxiliary.md); here each is one compiled loop. numba is a dependency of pytensor, so
it is always installed.

The numpy versions in :mod:`pymc_lbp.samplers.path.reference` are the reference: the tests check
that the kernels return the same sites for the same random numbers and the same log-probabilities
(to rounding), and ``PYMC_LBP_NUMBA=0`` switches the kernels off. Randomness stays outside: the
caller draws the exponential variates with the step's ``rng`` and passes them in.
"""

from __future__ import annotations

import math
import os

import numpy as np

CANCEL = 1e-6
"""Below this fraction of the total, the mass off a path is summed directly (see
:func:`pymc_lbp.samplers.path.reference.log_prob_path`)."""

ENABLED = os.environ.get("PYMC_LBP_NUMBA", "1") != "0"

try:  # pragma: no branch - numba ships with pytensor
    from numba import njit
except ImportError:  # pragma: no cover
    ENABLED = False

    def njit(*args, **kwargs):
        def wrap(fn):
            return fn

        return wrap(args[0]) if args and callable(args[0]) else wrap


@njit(cache=True, nogil=True)
def linear_weights(site: np.ndarray) -> tuple[np.ndarray, float, float, int]:
    """``(exp(site - top), top, total, n_positive)`` with ``top = max(site)`` (0 if none)."""
    lin = np.empty(site.shape[0])
    top, total, n_pos = linear_weights_into(site, lin)
    return lin, top, total, n_pos


@njit(cache=True, nogil=True)
def linear_weights_into(site: np.ndarray, lin: np.ndarray) -> tuple[float, float, int]:
    """:func:`linear_weights` written into ``lin``; returns ``(top, total, n_positive)``."""
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
def _later(key_a: float, i_a: int, key_b: float, i_b: int) -> bool:
    """Whether ``(key_a, i_a)`` comes after ``(key_b, i_b)``: the larger key, or on a tie the
    larger index (the heap's order in :func:`race`)."""
    return key_a > key_b or (key_a == key_b and i_a > i_b)


@njit(cache=True, nogil=True)
def race(lin: np.ndarray, noise: np.ndarray, size: int) -> np.ndarray:
    """Indices of the ``size`` smallest ``noise / lin`` (zero weights never), in increasing order.

    A bounded max-heap over the keys: ``O(n log size)``; ties are broken by the lower index, as
    a stable sort would.
    """
    n = lin.shape[0]
    heap_k = np.empty(size)
    heap_i = np.empty(size, dtype=np.int64)
    count = 0
    for i in range(n):
        if lin[i] <= 0.0:
            continue
        key = noise[i] / lin[i]
        if count < size:  # a new leaf, sifted up
            j = count
            count += 1
            while j > 0:
                parent = (j - 1) // 2
                if not _later(key, i, heap_k[parent], heap_i[parent]):
                    break
                heap_k[j], heap_i[j] = heap_k[parent], heap_i[parent]
                j = parent
        elif key < heap_k[0]:  # replaces the root (largest key), sifted down
            j = 0
            while 2 * j + 1 < size:
                big = 2 * j + 1
                if big + 1 < size and _later(
                    heap_k[big + 1], heap_i[big + 1], heap_k[big], heap_i[big]
                ):
                    big += 1
                if not _later(heap_k[big], heap_i[big], key, i):
                    break
                heap_k[j], heap_i[j] = heap_k[big], heap_i[big]
                j = big
        else:
            continue
        heap_k[j] = key
        heap_i[j] = i
    order = np.argsort(heap_k[:count], kind="mergesort")
    return heap_i[:count][order]


@njit(cache=True, nogil=True)
def log_prob_order(lin: np.ndarray, total: float, sites: np.ndarray) -> float:
    """Log-probability of drawing ``sites`` in order without replacement, weights ``lin``."""
    R = sites.shape[0]
    picked = np.empty(R)
    s = 0.0
    for r in range(R):
        p = lin[sites[r]]
        if not p > 0.0:
            return -np.inf
        picked[r] = p
        s += p
    rest = total - s
    out = 0.0
    if rest >= CANCEL * total:
        prefix = 0.0
        for r in range(R):
            out += math.log(picked[r] / (total - prefix))
            prefix += picked[r]
        return out
    # the path holds almost all the mass: the rest summed directly, suffix sums of the path
    mask = np.ones(lin.shape[0], dtype=np.bool_)
    for r in range(R):
        mask[sites[r]] = False
    rest = 0.0
    for i in range(lin.shape[0]):
        if mask[i]:
            rest += lin[i]
    suffix = 0.0
    for r in range(R - 1, -1, -1):
        suffix += picked[r]
        out += math.log(picked[r] / (rest + suffix))
    return out


@njit(cache=True, nogil=True)
def log_prob_order_log(
    log_lin: np.ndarray, lin: np.ndarray, total: float, sites: np.ndarray
) -> float:
    """:func:`log_prob_order` with each picked site's weight taken in log space
    (``log_lin = log(lin)``, finite where ``lin`` underflowed to 0): a site ``e^-800`` below
    the scale keeps its log-probability instead of ``-inf``. Where the remaining mass itself
    underflows, it is a log-sum-exp over the sites not yet picked (``O(n)``, rare)."""
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


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel once."""
    if not ENABLED:
        return
    lin, _, total, _ = linear_weights(np.array([0.0, -1.0, -np.inf]))
    sites = race(lin, np.array([1.0, 0.5, 2.0]), 2)
    log_prob_order(lin, total, sites)
