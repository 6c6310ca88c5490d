"""One integer site's moves as pytensor graphs: the informed jump and the full-conditional draw.

:func:`integer_jump` is the graph of :func:`pymc_lbp.samplers.integer.reference.jump` (offsets
``D = {-2^J, ..., -1, +1, ..., +2^J}`` weighted by ``g(pi(y) / pi(x))``, the MH correction with
the reverse offset), :func:`support_gibbs` that of
:func:`pymc_lbp.samplers.integer.reference.support_gibbs`, and :func:`shifted` adds an offset
without ``int64`` overflow. Graph builders, pure; the types of the model callbacks they take
(:data:`SiteLogpGraph`, :data:`BoundsGraph`, :data:`ClassRowsGraph`) and :class:`JumpInfo` are
here too. Used by :mod:`pymc_lbp.samplers.integer.graph` (:class:`CompiledJumps`, which unrolls
or scans them over a block's sites) and :mod:`pymc_lbp.samplers.integer.class_moves`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from pymc_lbp.samplers.mh_graph import finite, mh_accept, mh_log_ratio
from pymc_lbp.samplers.single_site.graph import GraphBalancing, balanced_weights, draw_slot

__all__ = [
    "BoundsGraph",
    "ClassRowsGraph",
    "JumpInfo",
    "SiteLogpGraph",
    "integer_jump",
    "shifted",
    "support_gibbs",
]

SiteLogpGraph = Callable[[Variable, Variable, Variable], tuple[Variable, Variable]]
"""``(x, sites, values) -> (logp(x), logp at x with x[sites[r]] = values[r] for every r)``."""

BoundsGraph = Callable[[Variable], tuple[Variable, Variable]]
"""``x -> (lower, upper)`` supports of every site of the block (float, may be infinite)."""

ClassRowsGraph = Callable[[Variable, np.ndarray, Variable], Variable]
"""``(x, sites, values (m, n)) -> change of the logp from x when sites[i] alone is set to
values[i, k]``, shape (m, n), for sites that share no term
(:meth:`pymc_lbp.logp.site_pieces.SitePieces.class_rows`)."""


class JumpInfo(NamedTuple):
    """What one jump reports."""

    accept: Variable  # MH acceptance probability (0 when no offset could be proposed)
    distance: Variable  # |y - x| if accepted, else 0


_INT64 = np.iinfo(np.int64)


def shifted(value: Variable, d: Variable) -> tuple[Variable, Variable]:
    """``(value + d, representable)`` without ``int64`` overflow, as a graph (broadcasting):
    :func:`pymc_lbp.samplers.integer.reference.shifted`."""
    up, down = pt.maximum(d, 0), pt.minimum(d, 0)  # each side tested without overflowing itself
    representable = pt.le(value, _INT64.max - up) & pt.ge(value, _INT64.min - down)
    return value + pt.switch(representable, d, 0), representable


def _log_weights(x, logp_x, site, d, site_logp, lower, upper, log_g):
    """``(values, logp(x), balanced log-weights)`` of the offsets ``d`` from ``x`` (``logp_x``
    None: evaluated with the rows)."""
    values, representable = shifted(x[site], d)
    inside = representable & pt.ge(values, lower) & pt.le(values, upper)
    logp, rows = site_logp(x, pt.alloc(site, d.shape[0]), pt.switch(inside, values, x[site]))
    logp_x = pt.cast(logp, "float64") if logp_x is None else logp_x
    delta = pt.cast(rows, "float64") - logp_x
    delta = pt.switch(inside & ~pt.isnan(delta), delta, -np.inf)
    return values, logp_x, balanced_weights(delta, log_g)


def integer_jump(
    u: Variable,
    x: Variable,
    logp_x: Variable,
    site: Variable,
    *,
    d: Variable,
    site_logp: SiteLogpGraph,
    bounds: BoundsGraph | None,
    log_g: GraphBalancing,
) -> tuple[Variable, Variable, JumpInfo]:
    """One informed jump of integer site ``site`` (graph builder, pure).

    Parameters
    ----------
    u : vector of 2 uniforms
        ``u[0]`` picks the offset, ``u[1]`` is the MH coin.
    x, logp_x : block vector and its logp
    site : int64 scalar
    d : int64 vector
        The symmetric offsets, increasing (:func:`pymc_lbp.samplers.integer.reference.offsets`).
    site_logp : callable
        The batched logp at one-site changes, as graphs.
    bounds : callable or None
        Supports at a state (None: unbounded).
    log_g : callable
        Balancing function in log space, as a graph builder.

    Returns
    -------
    (x, logp, JumpInfo)
    """
    if bounds is None:
        lower, upper = pt.constant(-np.inf), pt.constant(np.inf)
    else:
        lo, hi = bounds(x)
        lower, upper = lo[site], hi[site]
    values, _, (log_w, cdf, log_z) = _log_weights(
        x, logp_x, site, d, site_logp, lower, upper, log_g
    )
    has_move = finite(log_z) & finite(logp_x)
    k = draw_slot(cdf, u[0])
    y = pt.set_subtensor(x[site], values[k])
    _, logp_y, (log_w_y, _, log_z_y) = _log_weights(
        y, None, site, d, site_logp, lower, upper, log_g
    )
    log_q_rev = log_w_y[d.shape[0] - 1 - k] - log_z_y
    prob, accepted = mh_accept(mh_log_ratio(logp_x, logp_y, log_w[k] - log_z, log_q_rev), u[1])
    prob = pt.switch(has_move, prob, 0.0)
    accepted = accepted & has_move
    x_new = pt.switch(accepted, y, x)
    logp_new = pt.switch(accepted, logp_y, logp_x)
    distance = pt.switch(accepted, pt.abs(d[k]), 0)
    return x_new, logp_new, JumpInfo(prob, distance)


def support_gibbs(
    u: Variable,
    x: Variable,
    logp_x: Variable,
    site: Variable,
    lower: Variable,
    upper: Variable,
    *,
    n_values: int,
    site_logp: SiteLogpGraph,
) -> tuple[Variable, Variable, JumpInfo]:
    """Draw integer site ``site`` from its full conditional over ``lower .. upper`` (graph
    builder, pure).

    ``n_values`` is the number of rows evaluated (at least ``upper - lower + 1``; rows beyond
    ``upper`` weigh 0, so sites of different support sizes share one graph). ``u[0]`` picks the
    value; with no value of positive probability the state is kept.
    """
    values = lower + pt.arange(n_values, dtype="int64")
    inside = pt.le(values, upper)
    _, rows = site_logp(x, pt.alloc(site, n_values), pt.switch(inside, values, x[site]))
    rows = pt.cast(rows, "float64")
    log_w = pt.switch(inside & ~pt.isnan(rows), rows, -np.inf)
    top = pt.max(log_w)
    cdf = pt.cumsum(pt.exp(log_w - top))
    has_move = finite(top)
    k = draw_slot(cdf, u[0])
    x_new = pt.switch(has_move, pt.set_subtensor(x[site], values[k]), x)
    logp_new = pt.switch(has_move, log_w[k], logp_x)
    distance = pt.switch(has_move, pt.abs(values[k] - x[site]), 0)
    return x_new, logp_new, JumpInfo(pt.switch(has_move, 1.0, 0.0), distance)
