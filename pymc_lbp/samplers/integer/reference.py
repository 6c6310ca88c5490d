"""Informed multiscale jumps for integer sites: integer latents that travel.

Single-site moves change an integer by +-1, so a population size whose posterior spans hundreds
of values, or a Poisson count with mean 10^4, needs thousands of steps to cross its posterior.
Each draw therefore also gives every integer site of the block one *jump*: a locally balanced
proposal over the symmetric offsets

    D = {-2^J, ..., -4, -2, -1, +1, +2, +4, ..., +2^J},

``y = x + d`` with probability ``g(pi(x + d) / pi(x)) / Z(x)`` (``g`` the balancing function,
exact target ratios from one batched logp call), accepted with

    min{1, pi(y) g(pi(x) / pi(y)) Z(x) / (pi(x) g(pi(y) / pi(x)) Z(y))}

(the reverse offset is ``-d``, in ``D`` because ``D`` is symmetric). Values outside the support
have target probability 0 and weight 0, in both directions, and so have values that ``int64``
cannot hold: an offset whose sum would overflow is outside the support (:func:`shifted`), never
wrapped around into it.

**The scale J.** On a support of finite width ``J = ceil(log2(width))`` (:func:`scale_exponent`):
the largest jump spans the support, up to :data:`LARGEST_SCALE_EXPONENT` (62, the largest power of
two an ``int64`` offset holds). On an unbounded support (Poisson, NegativeBinomial, Geometric, ...)
no fixed ``J`` fits every posterior, so the step chooses it in two stages
(:meth:`pymc_lbp.samplers.integer.moves.IntegerMoves.draw`): it starts each chain from
:func:`start_exponent`, at least :data:`MAX_SCALE_EXPONENT` (jumps up to 1024) and enough bits for
the start's magnitude, and while tuning it grows ``J`` (:func:`grown_exponent`: doubled, at most
62) whenever an accepted jump used the largest offset ``2^J``, the sign that larger moves are
wanted. After tuning ``J`` is frozen. Within a frozen kernel ``J`` is one constant, not a function
of the state, and the support does not depend on the site's own value, so forward and reverse
neighbourhoods match and the move leaves ``pi`` invariant; tuning only chooses which of these
pi-invariant kernels the chain keeps. Composed with the single-site steps (each pi-invariant),
the draw's kernel is exact.

Cost: two batched logp evaluations of ``2 (J + 1)`` rows per integer site per draw, linear in
``J``, so a generous ``J`` is cheap. The offsets near the posterior's scale dominate the proposal
(``g`` of a ratio far in a tail is tiny), so jumps of the posterior's width are proposed without
tuning them, once ``J`` reaches that width.

**Small fixed supports.** A site whose support is fixed (depends on no variable) and holds at most
:data:`SUPPORT_GIBBS_MAX_VALUES` values is instead drawn from its exact full conditional over the
whole support (:func:`support_gibbs`, a heat-bath update as PyMC's CategoricalGibbsMetropolis
makes for categories): one batched logp evaluation of ``width + 1`` rows, no MH correction needed,
and the site's next value is independent of its current one. On a population size with support
0..1000 this turns ~0.13 effective draws per draw of the jump into ~1.

**A block's moves.** :func:`block_jumps` makes one move per integer site of a block from a call's
uniforms, site after site, with :func:`jump` and :func:`support_gibbs`: the reference the
compiled call (:class:`pymc_lbp.samplers.integer.graph.CompiledJumps`, what the steps run) and
its JAX version are tested against move for move.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pymc_lbp.samplers.balancing import LogBalancing, balanced_log_weights
from pymc_lbp.samplers.common import draw_from_cdf, mh_accept, mh_log_ratio, prepare_weights

MAX_SCALE_EXPONENT = 10
"""Smallest starting ``J`` on an unbounded support (jumps up to 1024 before tuning grows them;
:func:`start_exponent`)."""

LARGEST_SCALE_EXPONENT = 62
"""Largest ``J`` anywhere: ``2^62`` is the largest power of two below ``2^63``, so every offset is
an ``int64``; supports wider than ``2^62`` are crossed in two or more jumps."""

_INT64 = np.iinfo(np.int64)

SUPPORT_GIBBS_MAX_VALUES = 2048
"""Sites with a fixed support of at most this many values are drawn from their full conditional
(:func:`support_gibbs`) instead of jumping."""

SiteLogp = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[float, np.ndarray]]
"""``(x, sites, values) -> (logp(x), logp(x with x[sites[r]] = values[r]) for every r)``."""


class Jump(NamedTuple):
    """Outcome of one jump move."""

    x: np.ndarray
    logp: float
    accept: float
    distance: int  # |y - x| if accepted, else 0


def scale_exponent(lower: float, upper: float) -> int:
    """``J`` for a support ``[lower, upper]``.

    Parameters
    ----------
    lower, upper : float
        The support's bounds (infinite where unbounded).

    Returns
    -------
    int
        ``ceil(log2(width))`` on a finite support (the largest jump ``2^J`` spans it), at least 1
        and at most :data:`LARGEST_SCALE_EXPONENT`; :data:`MAX_SCALE_EXPONENT` on an unbounded
        one (where the step starts from :func:`start_exponent` and grows ``J`` while tuning).
    """
    width = float(upper) - float(lower)
    if not math.isfinite(width):
        return MAX_SCALE_EXPONENT
    return int(min(max(math.ceil(math.log2(max(width, 2.0))), 1), LARGEST_SCALE_EXPONENT))


def start_exponent(value: int, lower: float, upper: float) -> int:
    """``J`` a chain starts from on a support that is unbounded or may change.

    Parameters
    ----------
    value : int
        The site's value at the chain's start.
    lower, upper : float
        The site's support at the start (infinite where unbounded).

    Returns
    -------
    int
        The largest of :data:`MAX_SCALE_EXPONENT`, :func:`scale_exponent` of a finite support, and
        the bits of the start's magnitude plus one, ``ceil(log2(m + 1)) + 1`` with ``m`` the
        distance from the support's finite bound (from 0 when both are infinite): a count near
        ``m`` typically spreads over a scale up to ``m`` (a Poisson's ``sqrt(m)``, a negative
        binomial's ``m``), so a chain started in its posterior needs no growth to reach across
        it. At most :data:`LARGEST_SCALE_EXPONENT`.
    """
    exponent = MAX_SCALE_EXPONENT
    if math.isfinite(float(upper) - float(lower)):
        exponent = max(exponent, scale_exponent(lower, upper))
    origin = lower if math.isfinite(lower) else upper if math.isfinite(upper) else 0
    magnitude = abs(int(value) - int(origin))
    exponent = max(exponent, magnitude.bit_length() + 1)
    return int(min(exponent, LARGEST_SCALE_EXPONENT))


def grown_exponent(exponent: int) -> int:
    """The next ``J`` when a tuning jump used the largest offset ``2^J``: ``2 J``, at most
    :data:`LARGEST_SCALE_EXPONENT`.

    Doubling ``J`` squares the reach ``2^J`` (1024, then about 10^6, 10^12, 2^62) while the cost
    of a jump, linear in ``J``, only doubles: a chain started far from its posterior gets there
    within a few tuning draws.
    """
    return int(min(2 * int(exponent), LARGEST_SCALE_EXPONENT))


def shifted(value: int, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``value + d`` without ``int64`` overflow.

    Parameters
    ----------
    value : int
        The site's current value.
    d : int64 array
        Offsets.

    Returns
    -------
    values : int64 array
        ``value + d`` where it is an ``int64``, ``value`` elsewhere.
    representable : bool array
        Where ``value + d`` is an ``int64``; elsewhere the offset leaves every support.
    """
    d = np.asarray(d, dtype=np.int64)
    value = np.int64(value)
    up, down = np.maximum(d, 0), np.minimum(d, 0)  # each side tested without overflowing itself
    representable = (value <= _INT64.max - up) & (value >= _INT64.min - down)
    return value + np.where(representable, d, 0), representable


def offsets(exponent: int) -> np.ndarray:
    """The symmetric offsets ``-2^J .. -1, +1 .. +2^J``, increasing (``D[-k-1] = -D[k]``).

    ``J`` from 0 to :data:`LARGEST_SCALE_EXPONENT` (a larger one has no ``int64`` offset).
    """
    if not 0 <= int(exponent) <= LARGEST_SCALE_EXPONENT:
        raise ValueError(
            f"jump exponent {exponent} outside 0 .. {LARGEST_SCALE_EXPONENT} (int64 offsets)"
        )
    up = 2 ** np.arange(int(exponent) + 1, dtype=np.int64)
    return np.concatenate([-up[::-1], up])


def neighbourhood_log_weights(
    site_logp: SiteLogp,
    x: np.ndarray,
    site: int,
    d: np.ndarray,
    log_g: LogBalancing,
    support: tuple[float, float] = (-np.inf, np.inf),
) -> tuple[float, np.ndarray]:
    """``(logp(x), log g(pi(x + d_k) / pi(x)))`` over the offsets (``-inf``: probability 0).

    Offsets that leave the site's ``support``, or ``int64`` (:func:`shifted`), are not evaluated
    (the row holds ``x`` itself). The batched logp checks each row's parameters separately (a row
    with an impossible parameter, such as a HyperGeometric population below its sample size, is
    ``-inf`` alone).
    """
    values, representable = shifted(x[site], d)
    inside = representable & (values >= support[0]) & (values <= support[1])
    sites = np.full(d.shape[0], site, dtype=np.int64)
    logp_x, logp_nb = site_logp(x, sites, np.where(inside, values, x[site]).astype(np.int64))
    logp_x = float(logp_x)
    with np.errstate(invalid="ignore"):
        delta = np.asarray(logp_nb, dtype=np.float64) - logp_x
    delta[np.isnan(delta) | ~inside] = -np.inf
    return logp_x, balanced_log_weights(delta, log_g)


def jump(
    site_logp: SiteLogp,
    x: np.ndarray,
    site: int,
    exponent: int,
    log_g: LogBalancing,
    rng: np.random.Generator,
    support: tuple[float, float] = (-np.inf, np.inf),
) -> Jump:
    """One informed jump of integer site ``site`` within ``support`` (which must not depend on
    the site's own value; see the module docs)."""
    d = offsets(exponent)
    logp_x, log_w = neighbourhood_log_weights(site_logp, x, site, d, log_g, support)
    prep = prepare_weights(log_w)
    if prep is None or not math.isfinite(logp_x):
        return Jump(x, logp_x, 0.0, 0)
    _, cdf, log_z = prep
    k = draw_from_cdf(cdf, rng)
    y = x.copy()
    y[site] = x[site] + d[k]  # an offset of positive weight stays inside int64
    logp_y, log_w_y = neighbourhood_log_weights(site_logp, y, site, d, log_g, support)
    prep_y = prepare_weights(log_w_y)
    log_q_rev = -np.inf if prep_y is None else log_w_y[d.shape[0] - 1 - k] - prep_y[2]
    prob, accepted = mh_accept(
        mh_log_ratio(logp_x, logp_y, log_w[k] - log_z, log_q_rev), rng.random()
    )
    if accepted:
        return Jump(y, logp_y, prob, int(abs(d[k])))
    return Jump(x, logp_x, prob, 0)


def support_gibbs(
    site_logp: SiteLogp,
    x: np.ndarray,
    site: int,
    support: tuple[float, float],
    rng: np.random.Generator,
) -> Jump:
    """Draw integer site ``site`` from its full conditional over the finite ``support``.

    The weights are the target at every value of the support, from one batched logp call
    (rows at ``-inf`` or NaN have probability 0); the draw is exact (heat bath), so its
    acceptance is 1. With no value of positive probability the state is kept (acceptance 0).
    """
    values = np.arange(int(support[0]), int(support[1]) + 1, dtype=np.int64)
    logp_x, rows = site_logp(x, np.full(values.size, site, dtype=np.int64), values)
    log_w = np.asarray(rows, dtype=np.float64).copy()
    log_w[np.isnan(log_w)] = -np.inf
    prep = prepare_weights(log_w)
    if prep is None:
        return Jump(x, float(logp_x), 0.0, 0)
    k = draw_from_cdf(prep[1], rng)
    y = x.copy()
    y[site] = values[k]
    return Jump(y, float(log_w[k]), 1.0, int(abs(values[k] - x[site])))


def uses_support_gibbs(lower: float, upper: float) -> bool:
    """Whether a fixed support ``[lower, upper]`` is small enough for :func:`support_gibbs`."""
    width = float(upper) - float(lower)
    return math.isfinite(width) and width + 1 <= SUPPORT_GIBBS_MAX_VALUES


@dataclass
class JumpsResult:
    """State after one move per integer site of a block, and the moves' summaries."""

    x: np.ndarray
    logp: float
    sum_accept: float
    sum_distance: int
    n_accepted: int


class _GivenUniforms:
    """A generator stand-in whose ``random()`` hands out one row of a call's uniforms."""

    def __init__(self, row: np.ndarray):
        self._row = iter(np.asarray(row, dtype=np.float64).tolist())

    def random(self) -> float:
        return next(self._row)


def block_jumps(
    site_logp: SiteLogp,
    x: np.ndarray,
    uniforms: np.ndarray,
    order: np.ndarray,
    exponent: int,
    log_g: LogBalancing,
    supports: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    gibbs_supports: Mapping[int, tuple[float, float]],
) -> JumpsResult:
    """One move per site of ``order`` from ``x``, row ``r`` of ``uniforms`` (shape
    ``(len(order), 2)``) moving site ``order[r]``: a support-Gibbs site (a key of
    ``gibbs_supports``, its fixed ``(lower, upper)``) by :func:`support_gibbs`, any other by
    :func:`jump` with offsets up to ``2^exponent`` within its support at the current state
    (``supports(x) -> (lower, upper)``, every site's).

    The numpy reference of :class:`pymc_lbp.samplers.integer.graph.CompiledJumps`' call with
    the same ``order`` (its :attr:`~pymc_lbp.samplers.integer.graph.CompiledJumps.order`): the
    sites of a colour class share no term, so moving them one by one is moving them at once."""
    x = np.asarray(x, dtype=np.int64).copy()
    logp = None
    sum_accept, sum_distance, n_moved = 0.0, 0, 0
    for row, site in enumerate(np.asarray(order, dtype=np.int64).tolist()):
        given = _GivenUniforms(uniforms[row])
        if site in gibbs_supports:
            out = support_gibbs(site_logp, x, site, gibbs_supports[site], given)
        else:
            lower, upper = supports(x)
            support = (float(lower[site]), float(upper[site]))
            out = jump(site_logp, x, site, exponent, log_g, given, support)
        x, logp = out.x, out.logp
        sum_accept += out.accept
        sum_distance += out.distance
        n_moved += int(out.distance > 0)
    if logp is None:
        logp = float(site_logp(x, np.zeros(0, np.int64), np.zeros(0, np.int64))[0])
    return JumpsResult(x, float(logp), float(sum_accept), int(sum_distance), n_moved)


__all__ = [
    "LARGEST_SCALE_EXPONENT",
    "MAX_SCALE_EXPONENT",
    "SUPPORT_GIBBS_MAX_VALUES",
    "Jump",
    "JumpsResult",
    "block_jumps",
    "grown_exponent",
    "jump",
    "neighbourhood_log_weights",
    "offsets",
    "scale_exponent",
    "shifted",
    "start_exponent",
    "support_gibbs",
    "uses_support_gibbs",
]
