"""NeuralBlock's sweep over chain blocks as one compiled graph.

A sweep updates every colour class of chain blocks in turn (the blocks of a class share no term,
so their updates are independent). For one class of ``B`` blocks of ``L`` sites with ``K``
categories, read top to bottom (the numpy reference is
:func:`pymc_lbp.samplers.block.reference.colour_update`, which these graphs
reproduce move for move given the same uniforms):

1. the model logp at every block's reference states (``x`` with the block set to each of
   :func:`~pymc_lbp.samplers.block.motifs.chain.chain_reference_states`), one vectorised evaluation;
2. the blocks' chain potentials and canonical parameters
   (:func:`~pymc_lbp.samplers.block.motifs.chain.chain_potentials_from_reference`,
   :func:`~pymc_lbp.samplers.block.motifs.chain.canonical_chain_params`);
3. the network's mixture of products for every block
   (:meth:`~pymc_lbp.samplers.block.mdn.MixtureDensityNetwork.mixture_graph_from_preactivation`, the
   numpy forward's arithmetic; the weights are inputs, so a retrained proposal needs no
   recompilation);
4. every block's proposal by inverse CDF from its uniforms (a component, then each entry);
5. the model logp at every block's proposal (one vectorised evaluation), the proposal
   log-probabilities of the new and the old values, and the one MH rule
   (:mod:`pymc_lbp.samplers.mh_graph`) per block; a proposal equal to the block is accepted as is.

The state ``x`` and its logp are threaded through the classes; the sweep returns them with the
sums of acceptance probabilities, accepted blocks and model evaluations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.graphs import dim, repeated_rows
from pymc_lbp.samplers.block.motifs.chain import BIG, CLIP, chain_reference_states
from pymc_lbp.samplers.graph_driver import CompiledRuns, scan_kernel
from pymc_lbp.samplers.mh_graph import mh_accept, mh_log_ratio
from pymc_lbp.samplers.traces import clear_traces

WEIGHT_NAMES = ("base", "W0p", "W1", "b1", "W2", "b2")
"""The network inputs of the compiled sweep: the first layer's pre-activation at zero parameters
(``b0`` included) and the parameters' rows of ``W0``, then the other layers."""


def chain_params_graph(lp: Variable, K: int, L: int) -> Variable:
    """Canonical chain parameters ``(B, L K + (L-1) K^2)`` from the logp at the reference states
    ``lp (B, R)``: :func:`~pymc_lbp.samplers.block.motifs.chain.chain_potentials_from_reference`
    then :func:`~pymc_lbp.samplers.block.motifs.chain.canonical_chain_params`, the same
    arithmetic."""
    B = dim(lp, 0)
    f0 = lp[:, 0][:, None, None]
    single = lp[:, 1 : 1 + L * (K - 1)].reshape((B, L, K - 1))
    pair = lp[:, 1 + L * (K - 1) :].reshape((B, L - 1, K - 1, K - 1))
    zeros_a = pt.zeros((B, L, 1))
    a = pt.concatenate([zeros_a, single - f0], axis=2)
    inner = pair - single[:, :-1, :, None] - single[:, 1:, None, :] + f0[..., None]
    inner = pt.switch(pt.isnan(inner), -np.inf, inner)
    b = pt.concatenate([pt.zeros((B, L - 1, 1, K - 1)), inner], axis=2)
    b = pt.concatenate([pt.zeros((B, L - 1, K, 1)), b], axis=3)

    def finite(v):
        v = pt.switch(pt.isnan(v), -BIG, v)
        return pt.switch(pt.isinf(v), pt.sign(v) * BIG, v)

    a, b = finite(a), finite(b)
    rows = b.mean(axis=-1, keepdims=True)
    cols = b.mean(axis=-2, keepdims=True)
    mean = b.mean(axis=(-2, -1), keepdims=True)
    a = pt.inc_subtensor(a[:, :-1, :], rows[..., 0] - mean[..., 0])
    a = pt.inc_subtensor(a[:, 1:, :], cols[:, :, 0, :])
    b = b - rows - cols + mean
    a = a - a.mean(axis=-1, keepdims=True)
    flat = pt.concatenate([a.reshape((B, L * K)), b.reshape((B, (L - 1) * K * K))], axis=-1)
    return pt.clip(flat, -CLIP, CLIP)


def pick_index_graph(weights: Variable, u: Variable) -> Variable:
    """:func:`pymc_lbp.samplers.block.reference.pick_index` as a graph."""
    cdf = pt.cumsum(weights, axis=-1)
    above = pt.gt(cdf, (u * cdf[..., -1])[..., None])
    idx = pt.argmax(pt.cast(above, "int8"), axis=-1)
    n = dim(weights, -1)
    last = n - 1 - pt.argmax(pt.cast(pt.gt(weights[..., ::-1], 0), "int8"), axis=-1)
    return pt.switch(pt.any(above, axis=-1), idx, last)


def draw_blocks_graph(log_w: Variable, log_tables: Variable, u: Variable) -> Variable:
    """:func:`pymc_lbp.samplers.block.reference.draw_blocks` as a graph: ``(B, D)`` int64."""
    B = dim(log_tables, 0)
    k = pick_index_graph(pt.exp(log_w - pt.max(log_w, axis=1, keepdims=True)), u[:, 0])
    tab = log_tables[pt.arange(B), k]
    return pt.cast(
        pick_index_graph(pt.exp(tab - pt.max(tab, axis=-1, keepdims=True)), u[:, 1:]), "int64"
    )


def blocks_log_prob_graph(log_w: Variable, log_tables: Variable, values: Variable) -> Variable:
    """``log q(values_b)`` per block, ``values (B, D)`` -> ``(B,)`` (as
    :func:`pymc_lbp.samplers.block.reference.blocks_log_probs` with one state per block)."""
    B, Kc, D = (dim(log_tables, i) for i in range(3))
    picked = log_tables[
        pt.arange(B)[:, None, None],
        pt.arange(Kc)[None, :, None],
        pt.arange(D)[None, None, :],
        values[:, None, :],
    ]  # (B, Kc, D)
    comp = log_w + picked.sum(axis=-1)
    top = pt.max(comp, axis=1, keepdims=True)
    top = pt.switch(pt.isinf(top) | pt.isnan(top), 0.0, top)
    return (top + pt.log(pt.sum(pt.exp(comp - top), axis=1, keepdims=True)))[:, 0]


@dataclass(frozen=True)
class ChainColour:
    """One colour class of chain blocks: the sites of each block (``B x L``); ``K`` and ``L``
    for neural updates, or the joint ``states`` (``S x L``) for exact ones."""

    sites: np.ndarray
    n_categories: int = 0
    length: int = 0
    states: np.ndarray | None = None

    @property
    def uniform_width(self) -> int:
        """Uniforms per block: a component, each entry and the MH coin (neural), or one."""
        return 1 if self.states is not None else self.length + 2


def every_block_at(x: Variable, sites: np.ndarray, states: np.ndarray) -> Variable:
    """Rows ``x`` with block ``b``'s sites set to state ``s``, for every block ``b`` (``sites``,
    ``B x L``) and every row ``s`` of ``states`` (``S x L``): shape ``(B S, n)``, block-major."""
    B, L = sites.shape
    S = states.shape[0]
    rows = np.repeat(np.arange(B * S), L).reshape(B * S, L)
    cols = np.repeat(sites, S, axis=0)
    return pt.set_subtensor(repeated_rows(x, B * S)[rows, cols], np.tile(states, (B, 1)))


def exact_colour_graph(x: Variable, logp: Variable, u: Variable, colour: ChainColour, logp_rows):
    """Exact block Gibbs for every block of a class: the logp at all joint states of every
    block (one vectorised evaluation), one inverse-CDF draw per block
    (:func:`~pymc_lbp.samplers.block.reference.colour_update`'s exact branch as a graph)."""
    sites, states = colour.sites, colour.states
    B = sites.shape[0]
    S = states.shape[0]
    lp = logp_rows(every_block_at(x, sites, states)).reshape((B, S))
    lp = pt.switch(pt.isnan(lp), -np.inf, lp)
    new = pick_index_graph(pt.exp(lp - pt.max(lp, axis=1, keepdims=True)), u[:, 0])
    current = pt.argmax(pt.all(pt.eq(states[None], x[sites][:, None, :]), axis=-1), axis=1)
    idx = pt.arange(B)
    x_new = pt.set_subtensor(x[sites], pt.as_tensor_variable(states)[new])
    logp_new = logp + pt.sum(lp[idx, new] - lp[idx, current])
    return (
        x_new,
        logp_new,
        pt.constant(float(B), dtype="float64"),
        pt.constant(B, dtype="int64"),
        pt.constant(B * S, dtype="int64"),
    )


def colour_update_graph(
    x: Variable,
    logp: Variable,
    u: Variable,
    colour: ChainColour,
    logp_rows,
    weights: dict,
    net,
):
    """One colour class's update (module docs, steps 1-5). ``logp_rows(Y)`` is the model logp at
    the rows of ``Y`` (a graph). Returns ``(x, logp, sum of acceptances, accepted, evaluations)``.
    """
    if colour.states is not None:
        return exact_colour_graph(x, logp, u, colour, logp_rows)
    K, L, sites = colour.n_categories, colour.length, colour.sites
    B = sites.shape[0]
    ref = chain_reference_states(K, L)
    R = ref.shape[0]
    # 1. the logp at every block's reference states
    lp_ref = logp_rows(every_block_at(x, sites, ref)).reshape((B, R))
    # 2-3. parameters, network (the first layer from base and W0p: no conditioning entries)
    a0 = weights["base"] + pt.dot(chain_params_graph(lp_ref, K, L), weights["W0p"])
    log_w, log_tables = net.mixture_graph_from_preactivation(a0, weights)
    # 4. proposals
    new = draw_blocks_graph(log_w, log_tables, u[:, :-1])
    old = x[sites]
    moved = pt.any(pt.neq(new, old), axis=1)
    # 5. the target at the proposals, q of new and old, MH
    Y_new = pt.set_subtensor(repeated_rows(x, B)[np.arange(B)[:, None], sites], new)
    lp_new = logp_rows(Y_new)
    log_q_new = blocks_log_prob_graph(log_w, log_tables, new)
    log_q_old = blocks_log_prob_graph(log_w, log_tables, old)
    prob, won = mh_accept(mh_log_ratio(logp, lp_new, log_q_new, log_q_old), u[:, -1])
    prob = pt.switch(moved, prob, 1.0)
    won = pt.or_(won, ~moved)
    changed = won & moved
    x_new = pt.set_subtensor(x[sites], pt.switch(changed[:, None], new, old))
    logp_new = logp + pt.sum(pt.switch(changed, lp_new - logp, 0.0))
    evals = B * R + pt.sum(pt.cast(moved, "int64"))
    return x_new, logp_new, pt.sum(prob), pt.sum(pt.cast(won, "int64")), evals


def sweep_step(us, state, weights: dict, colours: list[ChainColour], logp_rows, net):
    """One sweep over the colour classes (module docs) as a kernel step: ``us`` one uniform
    matrix per class (``(blocks, ChainColour.uniform_width)``), ``state`` ``(x, logp)``;
    returns the new state and the sweep's sum of acceptance probabilities, accepted blocks and
    model evaluations."""
    x, logp = state
    accept, won, evals = 0.0, 0, 0
    for col, u in zip(colours, us, strict=True):
        x, logp, acc, w, e = colour_update_graph(x, logp, u, col, logp_rows, weights, net)
        accept, won, evals = accept + acc, won + w, evals + e
    return (x, logp), (pt.cast(accept, "float64"), pt.cast(won, "int64"), pt.cast(evals, "int64"))


def _inputs(colours: list[ChainColour], n_sites: int, lead: tuple = ()):
    """``x``, ``logp``, one uniform array per class (shape ``lead + (blocks,
    ChainColour.uniform_width)``) and the network arrays of :data:`WEIGHT_NAMES` (a dict)."""
    x = pt.tensor("x", dtype="int64", shape=(n_sites,))
    logp = pt.scalar("logp", dtype="float64")
    us = [
        pt.tensor(f"u{c}", dtype="float64", shape=(*lead, col.sites.shape[0], col.uniform_width))
        for c, col in enumerate(colours)
    ]
    weights = {name: pt.tensor(name, dtype="float64", shape=(None,) * nd)
               for name, nd in zip(WEIGHT_NAMES, (1, 2, 2, 1, 2, 1), strict=True)}  # fmt: skip
    return x, logp, us, weights


def chain_sweep_graph(colours: list[ChainColour], n_sites: int, logp_rows, net):
    """One sweep over the colour classes (:func:`sweep_step`) as a graph, the step the JAX
    program runs (:mod:`pymc_lbp.samplers.block.jax_steps`).

    Returns
    -------
    inputs : list
        ``x`` (int64, ``n_sites``), ``logp`` (float64), one uniform matrix per class (``(blocks,
        ChainColour.uniform_width)``), then the network arrays of :data:`WEIGHT_NAMES`.
    outputs : list
        ``x``, its logp, the sum of acceptance probabilities, the accepted blocks and the model
        evaluations.
    """
    x, logp, us, weights = _inputs(colours, n_sites)
    state, info = sweep_step(us, (x, logp), weights, colours, logp_rows, net)
    return [x, logp, *us, *weights.values()], [*state, *info]


class CompiledChainSweep:
    """A draw's sweeps over colour classes of chain blocks in one compiled call
    (:func:`sweep_step` run by the one driver,
    :func:`pymc_lbp.samplers.graph_driver.scan_kernel`).

    Called as ``(x, logp, uniforms, weights)``: ``uniforms`` one array per class, shape
    ``(sweeps, blocks, ChainColour.uniform_width)`` (sweep ``i``'s rows what
    :func:`~pymc_lbp.samplers.block.reference.colour_update` takes), ``weights`` the arrays of
    :data:`WEIGHT_NAMES` (unused by exact classes). Returns ``(x, logp, sum of acceptances,
    accepted, evaluations)``. With the JAX backend (which traces shapes as values) the function
    is compiled on first use for the number of sweeps, once per number.
    """

    def __init__(
        self, colours: list[ChainColour], n_sites: int, logp_rows, net, compile_kwargs=None
    ):
        self.colours = colours
        self._parts = (n_sites, logp_rows, net, dict(compile_kwargs or {}))
        self.runs = CompiledRuns(self._compile, compile_kwargs)

    def _compile(self, n_sweeps: int | None):
        n_sites, logp_rows, net, compile_kwargs = self._parts
        colours = self.colours
        x, logp, us, weights = _inputs(colours, n_sites, (n_sweeps,))
        names = list(weights)

        def step(u, state, *arrays):
            u = u if isinstance(u, tuple) else (u,)
            w = dict(zip(names, arrays, strict=True))
            return sweep_step(u, state, w, colours, logp_rows, net)

        state, info = scan_kernel(step, (x, logp), us, params=list(weights.values()))
        outs = [*state, *info]
        clear_traces(outs)
        fn = pm_compile(
            [x, logp, *us, *weights.values()], outs, on_unused_input="ignore", **compile_kwargs
        )
        fn.trust_input = True
        return fn

    def __call__(self, x, logp, uniforms: list, weights: list):
        out = self.runs(len(uniforms[0]))(
            np.ascontiguousarray(x, dtype=np.int64),
            np.asarray(logp, dtype=np.float64),
            *(np.ascontiguousarray(u, dtype=np.float64) for u in uniforms),
            *(np.ascontiguousarray(w, dtype=np.float64) for w in weights),
        )
        x_out, logp_out, acc, won, evals = out
        return np.array(x_out), float(logp_out), float(acc), int(won), int(evals)
