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

Everything here is a function of arrays (and an rng where it draws), in plain numpy: the oracle
of the compiled kernel :mod:`pymc_lbp.samplers.path.graph` that
:class:`pymc_lbp.samplers.path.step.PathAuxiliaryLBP` runs. :func:`path_step` makes,
from one row of noise, the move the kernel makes from the same row (the tests compare them move
for move, and check the reference against kernels enumerated independently). The slots' new
values and reverse slots are the layout's one-site moves
(:meth:`pymc_lbp.logp.layout.BlockLayout.moves_of`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pymc_lbp.logp.layout import BlockLayout
from pymc_lbp.samplers.balancing import LogBalancing, balanced_log_weights
from pymc_lbp.samplers.common import mh_accept, mh_log_ratio, register_jitable
from pymc_lbp.samplers.graph_driver import StepsResult
from pymc_lbp.samplers.path.adaptation import AdaptState, PathLengthAdaptation, check_fraction

CANCEL = 1e-6
"""Below this fraction of the total, the mass off a path is summed directly (see
:func:`log_prob_order`)."""


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
        lin, top, total, n_movable = linear_weights(site)
        return cls(site, lin, top, total, within, n_movable)


def linear_weights(site: np.ndarray) -> tuple[np.ndarray, float, float, int]:
    """``(exp(site - top), top, total, n_positive)`` with ``top = max(site)`` (0 if none)."""
    top = float(site.max()) if site.size else -np.inf
    if not math.isfinite(top):
        top = 0.0
    lin = np.exp(site - top)
    return lin, top, float(lin.sum()), int(np.count_nonzero(lin))


def path_weights(deltas: np.ndarray, log_g: LogBalancing, layout: BlockLayout) -> PathWeights:
    """:func:`site_weights` of the slot log-weights ``log g(e^Delta)`` of the neighbour
    differences ``deltas`` (``-inf`` for masked slots and zero-probability neighbours, whatever
    ``g(0)`` is: such moves are never proposed, in either direction)."""
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


def race(lin: np.ndarray, noise: np.ndarray, size: int) -> np.ndarray:
    """Ordered sample of ``size`` distinct sites, successive picks proportional to ``lin``, from
    one standard exponential per site (``noise``).

    Exponential race (the Gumbel top-k trick on a linear scale): with ``E_i`` standard
    exponential, the sites with the ``size`` smallest ``E_i / lin_i``, in increasing order, are
    distributed exactly as successive draws without replacement with probabilities proportional
    to ``lin``. Zero-weight sites are never picked; the caller must make sure at least ``size``
    sites have positive weight. Ties (probability 0) go to the lower index.
    """
    with np.errstate(divide="ignore"):
        keys = noise / lin
    if size >= keys.shape[0]:
        return np.argsort(keys, kind="stable")[:size]
    top = np.argpartition(keys, size - 1)[:size]
    return top[np.lexsort((top, keys[top]))]


def draw_slots(
    sites: np.ndarray, within: np.ndarray | None, layout: BlockLayout, noise: np.ndarray
) -> np.ndarray:
    """For each picked site, one of its slots from the within-site softmax by Gumbel-max: the
    slot of largest ``within - log E`` (the first on a tie), ``noise`` holding one standard
    exponential ``E`` per slot of the block."""
    if within is None:
        return layout.site_offset[sites]
    keys = within - np.log(noise)
    stops = np.append(layout.site_offset, layout.n_slots)
    return np.array(
        [layout.site_offset[i] + int(np.argmax(keys[layout.site_offset[i] : stops[i + 1]]))
         for i in sites],
        dtype=np.int64,
    )  # fmt: skip


def log_prob_order(weights: PathWeights, sites: np.ndarray) -> float:
    """Log-probability of drawing ``sites`` in this order without replacement, proportional to
    ``exp(weights.site)``.

    The picked sites' weights are taken in log space (a site far below the others keeps its
    probability where its linear weight underflows); the remaining mass before each pick is
    (mass off the path) + (path mass of the picks not yet made), a sum of positive terms (when the
    path holds almost all the mass, the rest is summed directly instead of as ``total - path``),
    or a log-sum-exp where it underflows.
    """
    log_picked = weights.site[sites] - weights.top
    if not np.all(np.isfinite(log_picked)):
        return -np.inf
    picked = weights.lin[sites]
    total = weights.total
    rest = total - float(picked.sum())
    if rest >= CANCEL * total:
        # total - (mass of picks before r): its rounding error is ~eps * total <= ~1e-10 of it
        remaining = total - np.cumsum(picked) + picked
    else:
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
    """Log-probability of the path ``(sites, slots)`` under ``weights``: order and values."""
    lp = log_prob_order(weights, sites)
    if weights.within is not None and np.isfinite(lp):
        lp += float(np.sum(weights.within[slots]))
    return lp


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
def path_length(
    u_share: float, u_round: float, scale: float, single_site_share: float, max_length: int
) -> tuple[int, bool]:
    """The path length ``R`` of one step of the path-length mixture, and its component, from
    two uniforms.

    With probability ``single_site_share`` (``u_share`` below it) the step is a *single-site*
    step (``R = 1``); otherwise it is a *path* step with ``R`` the unbiased stochastic rounding of
    ``scale`` (``ceil`` when ``u_round < frac(scale)``: ``E[R | path step] = scale``; public
    reference code has the two branches the other way round, which biases ``R`` towards the
    wrong integer), kept within ``[1, max_length]``. The mixture weights do not depend on the
    state, so with ``scale`` fixed the kernel is the fixed mixture ``share T_1 + (1 - share)
    [(1 - f) T_floor(U) + f T_ceil(U)]`` (``f = frac(scale)``) of pi-invariant kernels, and
    ``T_1`` (single-site locally balanced moves) makes it irreducible wherever single-site moves
    connect the support, whatever the scale.

    Returns
    -------
    R : int
    path_step : bool
        False for a single-site step (the adaptation ignores those).
    """
    if u_share < single_site_share:
        return 1, False
    lo = int(np.floor(scale))
    return min(max(lo + int(u_round < scale - lo), 1), max_length), True


@register_jitable
def draw_path_length(
    scale: float, single_site_share: float, max_length: int, rng: np.random.Generator
) -> tuple[int, bool]:
    """:func:`path_length` with its uniforms drawn from ``rng`` (the second only for a path
    step). Plain Python that the numba kernel compiles too
    (:mod:`pymc_lbp.samplers.pairwise.kernel`)."""
    u_share = rng.random()
    if u_share < single_site_share:
        return 1, False
    return path_length(u_share, rng.random(), scale, single_site_share, max_length)


Target = Callable[[np.ndarray], tuple[float, np.ndarray]]
"""``y -> (logp(y), differences at y)``: the block's target (a step's ``differences``)."""


class PathStep(NamedTuple):
    """One transition of :func:`path_step`."""

    x: np.ndarray
    logp: float
    deltas: np.ndarray
    accept: float  # MH acceptance probability (0 when no path could be drawn)
    accepted: bool
    evaluated: bool  # the target was evaluated at a proposal
    length: int  # R
    path_step: bool  # a path step (False: a single-site step)


def noise_width(layout: BlockLayout) -> int:
    """Noise values one step consumes: ``[u_share, u_round, u_mh, E_1..E_n, (E'_1..E'_slots)]``,
    the slot exponentials only for blocks that are not all binary."""
    return 3 + layout.n_sites + (0 if layout.all_binary else layout.n_slots)


def path_step(
    x: np.ndarray,
    logp: float,
    deltas: np.ndarray,
    noise: np.ndarray,
    scale: float,
    *,
    share: float,
    log_g: LogBalancing,
    layout: BlockLayout,
    target: Target,
) -> PathStep:
    """One path auxiliary MH transition from one noise row (see :func:`noise_width`): the numpy
    oracle of :func:`pymc_lbp.samplers.path.graph.path_kernel`, which makes the same move from
    the same row.

    1. ``R`` from ``u_share`` and ``u_round`` (:func:`path_length`);
    2. the sites by the exponential race of the site weights (:func:`race`, the ``E_i``);
    3. each picked site's slot by Gumbel-max within the site (:func:`draw_slots`, the ``E'_s``);
    4. the target at ``y``; the reverse path (same sites, reversed order, each back to its old
       value) scored with the weights at ``y``;
    5. the one MH accept (:func:`pymc_lbp.samplers.common.mh_accept`, ``u_mh``).
    """
    n = layout.n_sites
    length, is_path = path_length(noise[0], noise[1], scale, share, n)
    wx = path_weights(deltas, log_g, layout)
    if wx.n_movable < length:  # fewer movable sites than the path needs: no proposal
        return PathStep(x, logp, deltas, 0.0, False, False, length, is_path)
    sites = race(wx.lin, noise[3 : 3 + n], length)
    slots = draw_slots(sites, wx.within, layout, noise[3 + n : 3 + n + layout.n_slots])
    new, back = layout.moves_of(slots, x[sites])
    y = x.copy()
    y[sites] = new
    logp_y, deltas_y = target(y)
    log_q_fwd = log_prob_path(wx, sites, slots)
    if np.isfinite(logp_y):
        wy = path_weights(deltas_y, log_g, layout)
        log_q_rev = log_prob_path(wy, sites[::-1], back[::-1])
    else:
        log_q_rev = -np.inf
    prob, accepted = mh_accept(mh_log_ratio(logp, logp_y, log_q_fwd, log_q_rev), noise[2])
    if accepted:
        return PathStep(y, logp_y, deltas_y, prob, True, True, length, is_path)
    return PathStep(x, logp, deltas, prob, False, True, length, is_path)


@dataclass
class PathSteps(StepsResult):
    """State after a run of path steps (:func:`path_steps`, or the compiled run of
    :class:`pymc_lbp.samplers.path.graph.CompiledPathSteps`) and its summaries: those of every
    kernel, plus the path lengths, and the adaptation's state after tuning steps."""

    sum_length: int
    sum_moved: int  # sum of R over accepted steps
    adapt_state: AdaptState | None = None


def path_steps(
    x: np.ndarray,
    logp: float,
    deltas: np.ndarray,
    noise: np.ndarray,
    scale: float,
    *,
    share: float,
    log_g: LogBalancing,
    layout: BlockLayout,
    target: Target,
    adaptation: PathLengthAdaptation | None = None,
    adapt_state: AdaptState | None = None,
) -> PathSteps:
    """:func:`path_step` once per row of ``noise``: the numpy oracle of
    :class:`pymc_lbp.samplers.path.graph.CompiledPathSteps`. With ``adapt_state``
    (``(log U, log Ubar, count, doubling)``) the steps tune: each step's scale is ``exp(log U)``
    and each path step (not the single-site ones) updates the state by ``adaptation.update``
    with its acceptance probability; ``scale`` is then unused."""
    sum_accept = 0.0
    n_accepted = n_evaluated = sum_length = sum_moved = 0
    state = adapt_state
    for row in noise:
        u = math.exp(state[0]) if state is not None else scale
        res = path_step(
            x, logp, deltas, row, u, share=share, log_g=log_g, layout=layout, target=target
        )
        x, logp, deltas = res.x, res.logp, res.deltas
        sum_accept += res.accept
        n_accepted += int(res.accepted)
        n_evaluated += int(res.evaluated)
        sum_length += res.length
        sum_moved += res.length if res.accepted else 0
        if state is not None and res.path_step:
            state = adaptation.update(state[0], state[1], state[2], res.accept, state[3])
    return PathSteps(
        x, logp, deltas, sum_accept, n_accepted, n_evaluated, sum_length, sum_moved, state
    )


__all__ = [
    "CANCEL",
    "PathStep",
    "PathSteps",
    "PathWeights",
    "check_single_site_share",
    "draw_path_length",
    "draw_slots",
    "linear_weights",
    "log_prob_order",
    "log_prob_path",
    "noise_width",
    "path_length",
    "path_step",
    "path_steps",
    "path_weights",
    "race",
    "site_weights",
]
