"""A colour class of integer sites moved at once, as pytensor graphs.

Sites that share no term of the logp (Poisson counts given their rate, the abundances of an
N-mixture) move independently given the rest, so :func:`integer_jumps_at_once` and
:func:`support_gibbs_at_once` make the decisions of
:func:`~pymc_lbp.samplers.integer.site_moves.integer_jump` and
:func:`~pymc_lbp.samplers.integer.site_moves.support_gibbs` run site after site with the same
uniforms, from one or two batched evaluations for the whole class (:func:`draw_slots`: the
inverse-CDF draw row by row). Graph builders, pure; used by
:class:`pymc_lbp.samplers.integer.graph.CompiledJumps`.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from pymc_lbp.logp.graphs import pick_per_row
from pymc_lbp.samplers.integer.site_moves import (
    BoundsGraph,
    ClassRowsGraph,
    JumpInfo,
    SiteLogpGraph,
    shifted,
)
from pymc_lbp.samplers.mh_graph import finite, mh_accept, mh_log_ratio
from pymc_lbp.samplers.single_site.graph import GraphBalancing

__all__ = ["draw_slots", "integer_jumps_at_once", "support_gibbs_at_once"]


def draw_slots(cdf: Variable, u: Variable) -> Variable:
    """:func:`~pymc_lbp.samplers.single_site.graph.draw_slot` row by row: ``cdf`` (m, n), ``u``
    (m,)."""
    n = cdf.shape[1]
    idx = pt.sum(pt.le(cdf, (u * cdf[:, -1])[:, None]), axis=1)  # searchsorted, side="right"
    last = pt.argmax(cdf, axis=1)
    return pt.clip(pt.minimum(idx, last), 0, n - 1)


def _class_rows(x, logp_x, sites, values, site_logp, class_rows):
    """Logp at ``x`` with ``sites[i]`` set to ``values[i, k]``, shape (m, n): ``logp_x`` plus
    the changes from the class's elements (``class_rows``), or the batched whole-model
    evaluation of every row."""
    if class_rows is not None:
        return logp_x + pt.cast(class_rows(x, sites, values), "float64")
    idx = pt.constant(np.asarray(sites, dtype=np.int64))
    _, rows = site_logp(x, pt.repeat(idx, values.shape[1]), values.ravel())
    return pt.cast(rows.reshape((len(sites), values.shape[1])), "float64")


def _row_log_weights(rows, inside, logp_ref, log_g):
    """Balanced log-weights of rows of logps against ``logp_ref`` (one per row, (m, 1)):
    ``(log_w, cdf, log_z)``, ``-inf`` outside the support or where the logp is NaN."""
    delta = pt.cast(rows, "float64") - logp_ref
    delta = pt.switch(inside & ~pt.isnan(delta), delta, -np.inf)
    log_w = pt.switch(pt.eq(delta, -np.inf), -np.inf, log_g(delta))
    top = pt.max(log_w, axis=1, keepdims=True)
    cdf = pt.cumsum(pt.exp(log_w - top), axis=1)
    return log_w, cdf, top[:, 0] + pt.log(cdf[:, -1])


def integer_jumps_at_once(
    u: Variable,
    x: Variable,
    logp_x: Variable,
    sites: np.ndarray,
    *,
    d: Variable,
    site_logp: SiteLogpGraph,
    bounds: BoundsGraph | None,
    log_g: GraphBalancing,
    class_rows: ClassRowsGraph | None = None,
) -> tuple[Variable, Variable, JumpInfo, Variable]:
    """One informed jump of every site in ``sites`` at once (graph builder, pure).

    For sites that share no term of the logp (a colour class of the model's interaction
    graph): given the rest, their jumps are independent, so this makes the decisions that
    :func:`integer_jump` run site after site makes with the same uniforms (``u`` of shape
    (m, 2)), from two batched logp evaluations of ``m |D|`` rows (every row ``x`` with one site
    changed) instead of ``2 m``, or, with ``class_rows``, two evaluations of the logp's elements
    at ``|D|`` states each. The logp of the result adds the accepted sites' changes.

    Returns
    -------
    (x, logp, JumpInfo summed over the sites, number of sites that moved)
    """
    n_d = d.shape[0]
    idx = pt.constant(np.asarray(sites, dtype=np.int64))
    if bounds is None:
        lower, upper = pt.constant(-np.inf), pt.constant(np.inf)
    else:
        lo, hi = bounds(x)
        lower, upper = lo[idx][:, None], hi[idx][:, None]
    here = x[idx][:, None]

    def neighbourhood(centre, logp_ref):
        values, representable = shifted(centre, d[None, :])
        inside = representable & pt.ge(values, lower) & pt.le(values, upper)
        rows = _class_rows(x, logp_x, sites, pt.switch(inside, values, here), site_logp, class_rows)
        return values, rows, _row_log_weights(rows, inside, logp_ref, log_g)

    values, rows, (log_w, cdf, log_z) = neighbourhood(here, logp_x)
    k = draw_slots(cdf, u[:, 0])
    new = pick_per_row(values, k)
    logp_y = pt.cast(pick_per_row(rows, k), "float64")
    _, _, (log_w_y, _, log_z_y) = neighbourhood(new[:, None], logp_y[:, None])
    log_q_rev = pick_per_row(log_w_y, n_d - 1 - k) - log_z_y
    prob, accepted = mh_accept(
        mh_log_ratio(logp_x, logp_y, pick_per_row(log_w, k) - log_z, log_q_rev), u[:, 1]
    )
    has_move = finite(log_z) & finite(logp_x)
    prob = pt.switch(has_move, prob, 0.0)
    accepted = accepted & has_move
    x_new = pt.set_subtensor(x[idx], pt.switch(accepted, new, x[idx]))
    logp_new = logp_x + pt.sum(pt.switch(accepted, logp_y - logp_x, 0.0))
    distance = pt.switch(accepted, pt.abs(d[k]), 0)
    moved = pt.sum(pt.cast(pt.gt(distance, 0), "int64"))
    return x_new, logp_new, JumpInfo(pt.sum(prob), pt.sum(distance)), moved


def support_gibbs_at_once(
    u: Variable,
    x: Variable,
    logp_x: Variable,
    sites: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    n_values: int,
    site_logp: SiteLogpGraph,
    class_rows: ClassRowsGraph | None = None,
) -> tuple[Variable, Variable, JumpInfo, Variable]:
    """:func:`support_gibbs` for every site of a colour class at once (sites sharing no term:
    their full conditionals given the rest are independent), from one batched logp
    evaluation of ``m n_values`` rows (with ``class_rows``: ``n_values`` evaluations of the
    logp's elements); same decisions as site after site with the same ``u``."""
    idx = pt.constant(np.asarray(sites, dtype=np.int64))
    hi = pt.constant(np.asarray(upper, dtype=np.int64))[:, None]
    values = pt.constant(np.asarray(lower, dtype=np.int64))[:, None] + pt.arange(n_values)[None, :]
    inside = pt.le(values, hi)
    here = x[idx][:, None]
    rows = _class_rows(x, logp_x, sites, pt.switch(inside, values, here), site_logp, class_rows)
    log_w = pt.switch(inside & ~pt.isnan(rows), rows, -np.inf)
    top = pt.max(log_w, axis=1, keepdims=True)
    cdf = pt.cumsum(pt.exp(log_w - top), axis=1)
    has_move = finite(top[:, 0]) & finite(logp_x)  # feasible states only: no NaN sums
    k = draw_slots(cdf, u[:, 0])
    new = pt.switch(has_move, pick_per_row(values, k), x[idx])
    logp_y = pick_per_row(log_w, k)
    x_new = pt.set_subtensor(x[idx], new)
    logp_new = logp_x + pt.sum(pt.switch(has_move, logp_y - logp_x, 0.0))
    distance = pt.abs(new - x[idx])
    moved = pt.sum(pt.cast(pt.gt(distance, 0), "int64"))
    info = JumpInfo(pt.sum(pt.switch(has_move, 1.0, 0.0)), pt.sum(distance))
    return x_new, logp_new, info, moved
