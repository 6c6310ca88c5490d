"""SelfBalancing's chain and its learning of ``g`` as JAX functions (for
:mod:`pymc_lbp.whole_model`).

The chain's steps are the single-site kernel's graphs with ``log g`` a function of the learned
parameters, which enter as an input
(:func:`pymc_lbp.samplers.single_site.jax_steps.single_site_steps_jax` with the parameters as an
extra input). A learning step is :func:`batch_moves_jax`, the JAX twin of the numpy
:func:`pymc_lbp.samplers.self_balancing.learning.batch_moves` (one locally balanced transition
of every particle, their records for the objective; the particles' targets evaluated by
``jax.vmap`` of the differences' graph), then one guarded Adam step on the LSB objective: the
graph of :func:`~pymc_lbp.samplers.self_balancing.learning.adam_update_graph`, the one the step's
compiled learner runs. Given the same uniforms the particles move as the numpy reference moves
them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytensor
import pytensor.tensor as pt

from pymc_lbp.samplers.common import draw_slot_rows, mh_accept_probs, mh_log_ratios


class BatchMovesJax(NamedTuple):
    """:class:`~pymc_lbp.samplers.self_balancing.learning.BatchMoves` as JAX arrays (``batch``
    the seven records of :class:`~pymc_lbp.samplers.self_balancing.learning.TransitionBatch`, in
    its order)."""

    x: object
    logp: object
    deltas: object
    batch: tuple
    accept: object
    accepted: object
    movable: object


def batch_moves_jax(
    u, x, logp, deltas, params, *, log_g: Callable, layout, target_rows: Callable, weights: str
) -> BatchMovesJax:
    """One locally balanced single-site MH transition of every row (JAX; see the numpy
    reference :func:`pymc_lbp.samplers.self_balancing.learning.batch_moves`, rule for rule: the
    draw, the move and the MH rule are the reference's own functions, on ``jax.numpy``).

    ``log_g(deltas, params)`` is the parametrization's ``log g`` elementwise; ``target_rows(y)``
    gives the rows' ``(logp, deltas)``; ``weights`` is ``"uniform"`` or ``"target"``.
    """
    import jax.numpy as jnp

    rows = jnp.arange(x.shape[0])
    slot, log_q_fwd, movable = draw_slot_rows(log_g(deltas, params), u[:, 0], xp=jnp)
    site = jnp.asarray(layout.slot_site)[slot]
    old = x[rows, site]
    new, back = layout.moves_of(slot, old, xp=jnp)
    y = x.at[rows, site].set(jnp.where(movable, new, old))
    reverse = jnp.where(movable, back, slot)
    logp_y, deltas_y = target_rows(y)
    log_w_y = log_g(deltas_y, params)
    top_y = jnp.max(log_w_y, axis=1)
    safe_top = jnp.where(jnp.isfinite(top_y), top_y, 0.0)
    log_z_y = safe_top + jnp.log(jnp.sum(jnp.exp(log_w_y - safe_top[:, None]), axis=1))
    log_q_rev = log_w_y[rows, reverse] - log_z_y
    ratio = mh_log_ratios(logp, logp_y, log_q_fwd, log_q_rev, xp=jnp)
    accept = mh_accept_probs(jnp.where(movable, ratio, -jnp.inf), xp=jnp)
    accepted = u[:, 1] < accept
    feasible = movable & jnp.isfinite(logp_y) & jnp.isfinite(log_q_rev)
    deltas_x = jnp.where(movable[:, None], deltas, 0.0)
    if weights == "target":
        top_lp = jnp.max(jnp.where(movable, logp, -jnp.inf))
        top_lp = jnp.where(jnp.any(movable), top_lp, 0.0)
        base = jnp.where(movable, jnp.exp(jnp.where(movable, logp - top_lp, 0.0)), 0.0)
    else:
        base = movable.astype(jnp.float64)
    total = base.sum()
    batch = (
        deltas_x,
        jnp.where(feasible[:, None], deltas_y, deltas_x),
        slot.astype(jnp.int64),
        jnp.where(feasible, reverse, slot).astype(jnp.int64),
        jnp.where(feasible, logp_y - jnp.where(feasible, logp, 0.0), 0.0),
        feasible.astype(jnp.float64),
        jnp.where(total > 0, base / jnp.where(total > 0, total, 1.0), base),
    )
    return BatchMovesJax(
        jnp.where(accepted[:, None], y, x),
        jnp.where(accepted, logp_y, logp),
        jnp.where(accepted[:, None], deltas_y, deltas),
        batch,
        accept,
        accepted,
        movable,
    )


class LearnedChain(NamedTuple):
    """The JAX functions of a SelfBalancing step in the program (each also takes the model's
    values last, as every function of :func:`pymc_lbp.whole_model.jaxify.jax_function`)."""

    run: Callable  # (key, x, values, params) -> SingleSiteRun: the chain's steps of a draw
    start: Callable  # (x, *values) -> (logp, deltas)
    log_g: Callable  # (deltas matrix, params, *values) -> [log g]
    adam: Callable  # (params, m, v, t, lr, clip, *batch, *values) -> adam_update_graph's outputs


def learned_chain_jax(step, to_jax: Callable, n_steps: int) -> LearnedChain:
    """The JAX functions of ``step`` (a SelfBalancing) for ``n_steps`` chain steps per draw."""
    from pymc_lbp.samplers.self_balancing.learning import update_graph_io
    from pymc_lbp.samplers.single_site.jax_steps import single_site_steps_jax

    param = step.parametrization
    lay = step.layout
    n = param.n_params
    params = pt.vector("lsb_params", dtype="float64", shape=(n,))
    run = single_site_steps_jax(
        step.differences,
        lay,
        lambda d: param.log_g_pt(d, params),
        n_steps,
        to_jax,
        extra_inputs=[params],
    )
    x = pt.vector("x", dtype="int64", shape=(lay.n_sites,))
    start_fn = to_jax([x], list(step.differences.graph(x)))
    d = pt.matrix("d", dtype="float64")
    log_g = to_jax([d, params], [param.log_g_pt(d, params)])
    with pytensor.config.change_flags(floatX="float64"):  # as the step's learner builds it
        adam = to_jax(*update_graph_io(param, step.learner.max_grad_norm))
    return LearnedChain(run, start_fn, log_g, adam)


__all__ = ["BatchMovesJax", "LearnedChain", "batch_moves_jax", "learned_chain_jax"]
