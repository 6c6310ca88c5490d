"""Pure math of the path auxiliary proposal (Sun et al. 2021; Sun, Dai, Schuurmans 2022).

A path proposal changes ``R`` distinct sites of the block in one Metropolis-Hastings step. From
state ``x`` with neighbour differences ``Delta_s(x)`` (one per slot, see
:mod:`pymc_lbp.logp.layout`), every slot gets the locally balanced log-weight
``w_s = log g(e^{Delta_s})`` (``-inf`` where ``Delta_s = -inf``: masked or zero-probability
moves are never proposed). A *site* gets the weight ``W_i = logsumexp_{s in i} w_s`` (binary sites
have one slot, so ``W_i = w_i``), and the path is

1. an ordered sample ``i_1, ..., i_R`` of distinct sites drawn without replacement, each pick
   proportional to ``exp(W)`` among the sites not yet picked (Gumbel top-k);
2. for each picked site, one of its slots (its new value) from the within-site softmax
   ``exp(w_s - W_i)`` (categorical: the current value is masked; integer: -1 or +1).

Its log-probability is ``sum_r [W_{i_r} - log sum_{k not in i_1..i_{r-1}} exp(W_k)] +
sum_r (w_{s_r} - W_{i_r})``. The reverse path from ``y`` visits the same sites in the reversed
order, each moved back to its old value, and is scored with the weights at ``y``. Accepting with
``min{1, pi(y) q_rev / (pi(x) q_fwd)}`` leaves ``pi`` invariant: ``(x, path) -> (y, reversed
path)`` is an involution of the extended space, and the MH ratio is that of the extended target.

The remaining mass before each pick is computed as (mass of the sites not on the path) + (mass of
the path sites not yet picked), a sum of positive terms, so long paths that take almost all of
the mass stay accurate (``1 - cumsum`` would cancel catastrophically).

Everything here is a function of arrays (and an rng where it draws); the step class
:class:`pymc_lbp.step_methods.path_auxiliary.PathAuxiliaryLBP` is a thin shell around them. The
slots' new values and reverse slots are the layout's one-site moves
(:meth:`pymc_lbp.logp.layout.BlockLayout.moves_of`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pymc_lbp.logp.layout import BlockLayout
from pymc_lbp.samplers.balancing import LogBalancing, balanced_log_weights
from pymc_lbp.samplers.common import register_jitable
from pymc_lbp.samplers.path import numba_pieces as kernels
from pymc_lbp.samplers.path.adaptation import check_fraction


@dataclass(frozen=True)
class PathWeights:
    """Locally balanced weights of one state, as the path proposal uses them.

    Attributes
    ----------
    site : ndarray, shape (n_sites,)
        Unnormalised site log-weights ``W_i`` (``-inf``: the site cannot move).
    lin : ndarray, shape (n_sites,)
        ``exp(W - top)``: the site weights on a linear scale (``top = max W``).
    top : float
        ``max W`` (0 when no site can move).
    total : float
        ``sum(lin)``.
    within : ndarray or None, shape (n_slots,)
        Within-site log-probabilities ``w_s - W_{site(s)}`` of every slot; ``None`` when every
        site has a single slot (all binary), where they are all 0.
    n_movable : int
        Number of sites with positive weight (the longest possible path).
    """

    site: np.ndarray
    lin: np.ndarray
    top: float
    total: float
    within: np.ndarray | None
    n_movable: int

    @classmethod
    def from_site_log_weights(
        cls, site: np.ndarray, within: np.ndarray | None = None
    ) -> PathWeights:
        """Build from site log-weights (and within-site log-probabilities, if any)."""
        site = np.asarray(site, dtype=float)
        if kernels.ENABLED and site.size:
            lin, top, total, n_movable = kernels.linear_weights(site)
            return cls(site, lin, float(top), float(total), within, int(n_movable))
        lin, top, total, n_movable = _linear_weights_numpy(site)
        return cls(site, lin, top, total, within, n_movable)


def _linear_weights_numpy(site: np.ndarray) -> tuple[np.ndarray, float, float, int]:
    """Reference of :func:`pymc_lbp.samplers.path.numba_pieces.linear_weights`."""
    top = float(site.max()) if site.size else -np.inf
    if not math.isfinite(top):
        top = 0.0
    lin = np.exp(site - top)
    return lin, top, float(lin.sum()), int(np.count_nonzero(lin))


def path_weights(deltas: np.ndarray, log_g: LogBalancing, layout: BlockLayout) -> PathWeights:
    """Site weights and within-site slot probabilities from the neighbour differences.

    Parameters
    ----------
    deltas : ndarray, shape (n_slots,)
        ``log pi(x^(s)) - log pi(x)`` for every slot (``-inf`` for masked slots).
    log_g : callable
        Balancing function in log space. Slots with ``Delta = -inf`` (masked moves,
        zero-probability neighbours) get weight 0 whatever ``g(0)`` is: such moves are never
        proposed, in either direction.
    layout : BlockLayout
        Slot layout of the block.

    Returns
    -------
    PathWeights
    """
    return site_weights(balanced_log_weights(np.asarray(deltas, dtype=float), log_g), layout)


def site_weights(log_w: np.ndarray, layout: BlockLayout) -> PathWeights:
    """Site weights ``W_i = logsumexp_{s in i} w_s`` and within-site log-probabilities from the
    slot log-weights ``w = log g(e^Delta)`` (``-inf`` for slots never proposed)."""
    if layout.n_slots == layout.n_sites:  # one slot per site (binary): sites are slots
        return PathWeights.from_site_log_weights(log_w)
    off = layout.site_offset
    top = np.maximum.reduceat(log_w, off)
    safe_top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        site = np.log(np.add.reduceat(np.exp(log_w - safe_top[layout.slot_site]), off)) + safe_top
    site = np.where(np.isfinite(top), site, -np.inf)
    with np.errstate(invalid="ignore"):
        within = log_w - site[layout.slot_site]
    within[~np.isfinite(log_w)] = -np.inf
    return PathWeights.from_site_log_weights(site, within)


def draw_sites(lin: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Ordered sample of ``size`` distinct sites, successive picks proportional to ``lin``.

    Exponential race (the Gumbel top-k trick on a linear scale): with ``E_i`` standard
    exponential, the sites with the ``size`` smallest ``E_i / lin_i``, in increasing order, are
    distributed exactly as successive draws without replacement with probabilities proportional
    to ``lin``. Zero-weight sites are never picked; the caller must make sure at least ``size``
    sites have positive weight.

    Parameters
    ----------
    lin : ndarray
        Non-negative, unnormalised site weights (e.g. :attr:`PathWeights.lin`).
    size : int
        Number of sites.
    rng : numpy.random.Generator
    """
    noise = rng.standard_exponential(lin.shape[0])
    if kernels.ENABLED:
        return kernels.race(lin, noise, size)
    return _race_numpy(lin, noise, size)


def _race_numpy(lin: np.ndarray, noise: np.ndarray, size: int) -> np.ndarray:
    """Reference of :func:`pymc_lbp.samplers.path.numba_pieces.race`."""
    if lin.min() > 0.0:
        keys = noise / lin
    else:
        with np.errstate(divide="ignore"):
            keys = noise / lin
    if size == 1:
        return np.array([int(np.argmin(keys))])
    if size >= keys.shape[0]:
        return np.argsort(keys, kind="stable")[:size]
    top = np.argpartition(keys, size - 1)[:size]
    return top[np.argsort(keys[top], kind="stable")]


def draw_slots(
    sites: np.ndarray, within: np.ndarray | None, layout: BlockLayout, rng: np.random.Generator
) -> np.ndarray:
    """For each picked site, one of its slots from the within-site softmax (Gumbel-max)."""
    if within is None:
        return layout.site_offset[sites]
    starts = layout.site_offset[sites]
    stops = np.append(layout.site_offset, layout.n_slots)[sites + 1]
    counts = stops - starts
    # slot indices of all picked sites, concatenated site by site
    seg_start = np.concatenate(([0], np.cumsum(counts)[:-1]))
    idx = np.repeat(starts - seg_start, counts) + np.arange(int(counts.sum()))
    keys = within[idx] - np.log(rng.standard_exponential(idx.shape[0]))
    best = np.maximum.reduceat(keys, seg_start)
    # first slot of each segment that attains the segment maximum
    hit = keys == np.repeat(best, counts)
    first = np.minimum.reduceat(np.where(hit, np.arange(idx.shape[0]), idx.shape[0]), seg_start)
    return idx[first]


_CANCEL = kernels.CANCEL  # below this fraction of the total, the mass off the path is summed


def _log_prob_sites(weights: PathWeights, sites: np.ndarray) -> float:
    if kernels.ENABLED:
        log_lin = weights.site - weights.top
        return float(kernels.log_prob_order_log(log_lin, weights.lin, weights.total, sites))
    return _log_prob_sites_numpy(weights, sites)


def _log_prob_sites_numpy(weights: PathWeights, sites: np.ndarray) -> float:
    """Reference of :func:`pymc_lbp.samplers.path.numba_pieces.log_prob_order_log`: the picked
    sites' weights in log space (a site far below the others keeps its probability where its linear
    weight underflows), the remaining mass on the linear scale, or a log-sum-exp where it
    underflows."""
    log_picked = weights.site[sites] - weights.top
    if not np.all(np.isfinite(log_picked)):
        return -np.inf
    picked = weights.lin[sites]
    total = weights.total
    # remaining mass before pick r = (mass off the path) + (path mass of picks r..R)
    rest = total - float(picked.sum())
    if rest >= _CANCEL * total:
        # total - (mass of picks before r): its rounding error is ~eps * total <= ~1e-10 of it
        remaining = total - np.cumsum(picked) + picked
    else:
        # the path holds almost all the mass: sum the rest directly, suffix sums of the path
        mask = np.ones(weights.lin.shape[0], dtype=bool)
        mask[sites] = False
        rest = float(weights.lin[mask].sum())
        remaining = rest + np.cumsum(picked[::-1])[::-1]
    with np.errstate(divide="ignore"):
        log_remaining = np.log(remaining)
    for r in np.flatnonzero(~(remaining > 1e-300)):  # every weight left underflowed
        left = np.ones(weights.site.shape[0], dtype=bool)
        left[sites[:r]] = False
        log_remaining[r] = np.logaddexp.reduce(weights.site[left] - weights.top)
    return float(np.sum(log_picked - log_remaining))


def log_prob_path(weights: PathWeights, sites: np.ndarray, slots: np.ndarray) -> float:
    """Log-probability of the path ``(sites, slots)`` under ``weights``: order and values.

    Costs O(R) given the weights (O(n) only when the path holds almost all the mass).
    """
    lp = _log_prob_sites(weights, sites)
    if weights.within is not None and np.isfinite(lp):
        lp += float(np.sum(weights.within[slots]))
    return lp


@register_jitable
def stochastic_round(u: float, rng: np.random.Generator) -> int:
    """Unbiased rounding: ``ceil(u)`` with probability ``frac(u)``, else ``floor(u)``.

    ``E[stochastic_round(u)] = u``. (Public reference code has this reversed, which biases the
    path length towards the wrong integer.)
    """
    lo = int(np.floor(u))
    return lo + int(rng.random() < u - lo)


def check_single_site_share(share: float) -> float:
    """Validate the share of single-site steps: a number strictly between 0 and 1."""
    return check_fraction(
        "single_site_share",
        share,
        ": 0 would allow a chain that never changes one site alone (a fixed even R on a binary "
        "block is reducible, and a near-deterministic target can trap the chain); 1 would never "
        "take a path step",
    )


@register_jitable
def draw_path_length(
    scale: float, single_site_share: float, max_length: int, rng: np.random.Generator
) -> tuple[int, bool]:
    """The path length ``R`` of one step of the path-length mixture, and its component.

    With probability ``single_site_share`` the step is a *single-site* step (``R = 1``);
    otherwise it is a *path* step with ``R`` the unbiased stochastic rounding of ``scale``
    (``E[R | path step] = scale``), kept within ``[1, max_length]``. The mixture weights do not
    depend on the state, so with ``scale`` fixed the kernel is the fixed mixture
    ``share T_1 + (1 - share) [(1 - f) T_floor(U) + f T_ceil(U)]`` (``f = frac(scale)``) of
    pi-invariant kernels, and ``T_1`` (single-site locally balanced moves) makes it irreducible
    wherever single-site moves connect the support, whatever the scale. Plain Python that the
    numba kernels compile too (:mod:`pymc_lbp.samplers.pairwise.kernel`).

    Returns
    -------
    R : int
    path_step : bool
        False for a single-site step (the adaptation ignores those).
    """
    if rng.random() < single_site_share:
        return 1, False
    return min(max(stochastic_round(scale, rng), 1), max_length), True


__all__ = [
    "PathWeights",
    "check_single_site_share",
    "draw_path_length",
    "draw_sites",
    "draw_slots",
    "log_prob_path",
    "path_weights",
    "site_weights",
    "stochastic_round",
]
