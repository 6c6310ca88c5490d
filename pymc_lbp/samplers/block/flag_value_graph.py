"""NeuralMixedBlock's pair update as a pytensor graph (the compiled program's version).

The numpy reference, which this graph reproduces move for move given the same uniforms, is
:meth:`pymc_lbp.samplers.block.step_mixed.NeuralMixedBlock.pair_update`. One update of
pair ``k`` from the state ``q`` (the flags, then the values) of log density ``logp``, read top to
bottom, with ``u = (u_component, u_flag, z, u_accept)`` (``z`` a standard normal draw):

1. the model logp at the pair's ``2 G`` reference states (the other entries of ``q`` kept), in
   the step's batched graph, made canonical
   (:func:`~pymc_lbp.samplers.block.motifs.flag_value.canonical_flag_value_params`);
2. the network's mixture at those parameters
   (:meth:`~pymc_lbp.samplers.block.mdn.MixtureDensityNetwork.full_mixture_graph_from_preactivation`):
   a component by inverse CDF from ``u[0]``, its flag from ``u[1]``, ``t' = mean + sd z``,
   ``v' = loc_k + scale_k t'``;
3. ``log q`` of the proposal and of the current pair under the same mixture, the model logp at
   the proposal, and the one MH rule (:mod:`pymc_lbp.samplers.mh_graph`) with ``u[3]``.

:func:`pair_update_graph` returns the graph's inputs and outputs; the program converts it to
JAX (:mod:`pymc_lbp.samplers.block.jax_flag_value`).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from pytensor.graph.replace import clone_replace

from pymc_lbp.samplers.block.motifs.flag_value import CLIP
from pymc_lbp.samplers.block.sweep_graph import WEIGHT_NAMES, pick_index_graph
from pymc_lbp.samplers.mh_graph import finite, mh_accept, mh_log_ratio

NETWORK_NAMES = WEIGHT_NAMES
"""The network inputs of the graph: the compiled sweep's (float64, as
:meth:`~pymc_lbp.samplers.block.neural_proposal.NeuralProposal.graph_inputs` gives them)."""


def canonical_params_graph(logp_grid: Variable) -> Variable:
    """:func:`~pymc_lbp.samplers.block.motifs.flag_value.canonical_flag_value_params` of one
    pair's ``(2G,)`` grid log densities as a graph."""
    lp = pt.cast(logp_grid, "float64")
    ok = finite(lp)
    top = pt.max(pt.switch(ok, lp, -np.inf))
    top = pt.switch(finite(top), top, 0.0)
    return pt.clip(pt.switch(ok, lp - top, -CLIP), -CLIP, 0.0)


def flag_value_log_q_graph(log_w, log_tables, means, sds, flag, t) -> Variable:
    """``log q(flag, t)`` under one pair's mixture (``log_w (K,)``, ``log_tables (K, 1, 2)``,
    ``means, sds (K, 1)``; scalars ``flag``, ``t``): the graph of
    :func:`~pymc_lbp.samplers.block.motifs.flag_value.flag_value_log_q`."""
    z = (t - means[:, 0]) / sds[:, 0]
    comp = log_w + log_tables[:, 0, flag] - 0.5 * z**2 - pt.log(sds[:, 0]) - 0.5 * np.log(2 * np.pi)
    top = pt.max(comp)
    top = pt.switch(finite(top), top, 0.0)
    return top + pt.log(pt.sum(pt.exp(comp - top)))


def pair_update_graph(step) -> tuple[list[Variable], list[Variable]]:
    """One pair update of a :class:`~pymc_lbp.samplers.block.step_mixed.NeuralMixedBlock`.

    Returns
    -------
    inputs : list
        ``q`` (the step's joined vector), ``logp`` (float64 scalar), ``k`` (int64 scalar),
        ``u`` (4 float64: component, flag, standard normal, accept), then the network arrays
        (:data:`NETWORK_NAMES`). The model's other variables are the step's shared variables.
    outputs : list
        The new state, its logp, the acceptance probability and whether it was accepted.
    """
    n, G = step.n_pairs, step.grid_points
    net = step.proposal.net
    q = step._joined.type("q")
    logp = pt.scalar("logp", dtype="float64")
    k = pt.scalar("k", dtype="int64")
    u = pt.vector("u", dtype="float64")
    network = [
        pt.tensor(name, dtype="float64", shape=(None,) * np.ndim(a))
        for name, a in zip(NETWORK_NAMES, step.proposal.graph_inputs(), strict=True)
    ]
    base, w0p, w1, b1, w2, b2 = network
    references = pt.constant(step._references.astype(q.dtype))[k]  # (2G, 2)
    loc = pt.constant(step.loc)[k]
    scale = pt.constant(step.scale)[k]

    rows = pt.repeat(q[None, :], 2 * G, axis=0)
    rows = pt.set_subtensor(rows[:, k], references[:, 0])
    rows = pt.set_subtensor(rows[:, n + k], references[:, 1])
    grid = clone_replace(step._batch_graph, replace={step._rows: rows})
    a0 = base + pt.dot(canonical_params_graph(grid), w0p)
    layers = {"W1": w1, "b1": b1, "W2": w2, "b2": b2}
    log_w, log_tables, means, sds = (
        a[0] for a in net.full_mixture_graph_from_preactivation(a0[None, :], layers)
    )

    comp = pick_index_graph(pt.exp(log_w - pt.max(log_w)), u[0])
    table = log_tables[comp, 0]
    flag_y = pick_index_graph(pt.exp(table - pt.max(table)), u[1])
    t_y = means[comp, 0] + sds[comp, 0] * u[2]
    flag_x = pt.cast(pt.round(q[k]), "int64")
    t_x = (pt.cast(q[n + k], "float64") - loc) / scale
    log_q_x = flag_value_log_q_graph(log_w, log_tables, means, sds, flag_x, t_x)
    log_q_y = flag_value_log_q_graph(log_w, log_tables, means, sds, flag_y, t_y)

    y = pt.set_subtensor(q[k], pt.cast(flag_y, q.dtype))
    y = pt.set_subtensor(y[n + k], pt.cast(loc + scale * t_y, q.dtype))
    logp_y = pt.cast(clone_replace(step._logp_graph, replace={step._joined: y}), "float64")
    prob, accepted = mh_accept(mh_log_ratio(logp, logp_y, log_q_y, log_q_x), u[3])
    outputs = [pt.switch(accepted, y, q), pt.switch(accepted, logp_y, logp), prob, accepted]
    return [q, logp, k, u, *network], outputs


__all__ = ["NETWORK_NAMES", "canonical_params_graph", "flag_value_log_q_graph", "pair_update_graph"]
