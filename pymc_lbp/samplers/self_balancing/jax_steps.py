"""SelfBalancing's chain and its learning of ``g`` as JAX functions (for
:mod:`pymc_lbp.whole_model`).

The chain's steps are the single-site kernel's graphs with ``log g`` a function of the learned
parameters, which enter as an input
(:func:`pymc_lbp.samplers.single_site.jax_steps.single_site_steps_jax` with the parameters as an
extra input). A learning step is the numpy reference's own
:func:`pymc_lbp.samplers.self_balancing.learning.batch_moves` on ``jax.numpy`` (one locally
balanced transition of every particle, their records for the objective; the particles' targets
evaluated by ``jax.vmap`` of the differences' graph), then one guarded Adam step on the LSB
objective: the graph of :func:`~pymc_lbp.samplers.self_balancing.learning.adam_update_graph`,
the one the step's compiled learner runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytensor
import pytensor.tensor as pt


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


__all__ = ["LearnedChain", "learned_chain_jax"]
