"""The numpy single-site transition: the reference of the compiled kernel, and the only copy.

One locally balanced Metropolis-Hastings step (Zanella 2020) from a state whose proposal weights
are prepared: draw a slot (a site and its new value) from the balanced weights with the uniform
``u_slot``, evaluate the target there, and accept with the uniform ``u_accept`` by the package's
MH rule (``mh_log_ratio`` and ``mh_accept`` of :mod:`pymc_lbp.samplers.common`). Given the same
two uniforms it makes the move of the graph kernel
(:func:`pymc_lbp.samplers.single_site.graph.single_site_kernel`), which the twin tests check move
for move. Its users: the twin tests of ``LocallyBalanced`` and ``GibbsWithGradients`` (fixed
balancing, weights from ``LocallyBalanced.proposal_weights``), ``SelfBalancing.mh_step`` (the
learned balancing) and the differences probe of :mod:`pymc_lbp.step_methods.differences_choice`;
each says how a state's weights are prepared. Sampling runs the compiled kernel from the first
draw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_lbp.samplers.common import draw_slot, mh_accept, mh_log_ratio
from pymc_lbp.samplers.graph_driver import StepsResult

__all__ = [
    "Prepared",
    "SingleSiteMove",
    "draw_slot",
    "single_site_step",
    "single_site_steps",
]

Prepared = tuple[np.ndarray, np.ndarray, float]
"""``(log_w, cdf, log_z)`` of a state's proposal (``prepare_weights`` of ``samplers.common``)."""


class SingleSiteMove(NamedTuple):
    """The proposed state, its target and weights, and the MH outcome."""

    x: np.ndarray
    logp: float
    deltas: np.ndarray
    prepared: Prepared | None
    accept_prob: float
    accepted: bool


def single_site_step(
    x: np.ndarray,
    logp: float,
    prepared: Prepared,
    layout,
    evaluate: Callable[[np.ndarray], tuple[float, np.ndarray, Prepared | None]],
    u_slot: float,
    u_accept: float,
) -> SingleSiteMove:
    """One single-site MH proposal from ``x`` and its accept decision.

    Parameters
    ----------
    x, logp : np.ndarray, float
        The current state (the block's int64 vector) and its log probability.
    prepared : tuple
        The current state's proposal ``(log_w, cdf, log_z)``; the caller handles the state from
        which nothing can be proposed.
    layout : BlockLayout
        The block's slots (:class:`pymc_lbp.logp.layout.BlockLayout`).
    evaluate : callable
        ``evaluate(y) -> (logp_y, deltas_y, prepared_y)``: the target and the reverse proposal's
        weights at the proposed state (``prepared_y`` None when nothing can be proposed there).
    u_slot, u_accept : float
        The two uniforms of the step, as the compiled kernel takes them.

    Returns
    -------
    SingleSiteMove
        The proposed state with what was computed there, ``min(1, MH ratio)`` and whether it was
        accepted (the caller keeps ``x`` when it was not).
    """
    log_w, cdf, log_z = prepared
    slot = draw_slot(cdf, u_slot)
    site = layout.slot_site[slot]
    old = int(x[site])
    y = x.copy()
    y[site] = layout.new_value(x, slot)
    logp_y, deltas_y, prepared_y = evaluate(y)
    log_q_rev = -np.inf
    if prepared_y is not None:
        log_q_rev = prepared_y[0][layout.reverse_slot(slot, old)] - prepared_y[2]
    log_ratio = mh_log_ratio(logp, logp_y, log_w[slot] - log_z, log_q_rev)
    prob, accepted = mh_accept(log_ratio, u_accept)
    return SingleSiteMove(y, logp_y, deltas_y, prepared_y, prob, accepted)


def single_site_steps(
    x: np.ndarray,
    logp: float,
    deltas: np.ndarray,
    prepare: Callable[[np.ndarray], Prepared | None],
    layout,
    evaluate: Callable[[np.ndarray], tuple[float, np.ndarray, Prepared | None]],
    uniforms: np.ndarray,
) -> StepsResult:
    """One :func:`single_site_step` per row of ``uniforms`` (slot, accept): the moves and
    summaries of the compiled kernel (:class:`pymc_lbp.samplers.single_site.loop.CompiledSteps`)
    from the same uniforms; ``prepare(deltas)`` gives the start's proposal. A state from which
    nothing can be proposed stays, unevaluated, as in the kernel."""
    prepared = prepare(deltas)
    sum_accept, n_accepted, n_evaluated = 0.0, 0, 0
    for u_slot, u_accept in np.asarray(uniforms, dtype=np.float64).tolist():
        if prepared is None:
            continue
        move = single_site_step(x, logp, prepared, layout, evaluate, u_slot, u_accept)
        n_evaluated += 1
        sum_accept += move.accept_prob
        if move.accepted:
            x, logp, deltas, prepared = move.x, move.logp, move.deltas, move.prepared
            n_accepted += 1
    return StepsResult(x, float(logp), deltas, sum_accept, n_accepted, n_evaluated)
