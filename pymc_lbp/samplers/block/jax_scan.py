"""NeuralBlock's and BlockGibbs' random-scan steps in the compiled whole-model program (issue #25).

The JAX version of :mod:`pymc_lbp.samplers.block.random_scan_graph`: the same graph
(:func:`~pymc_lbp.samplers.block.random_scan_graph.random_scan_graph`, whose numpy reference is
:meth:`~pymc_lbp.step_methods.neural_block.NeuralBlock.scan_step`) converted to JAX with the
model's other variables read from the chain's values
(:func:`pymc_lbp.whole_model.jaxify.jax_function`). One call runs a draw's ``steps_per_draw``
steps from a ``(steps, width)`` matrix of uniforms: each picks a unit uniformly and updates it
(an exact block or an uncovered site from its exact conditional, a motif block by the network's
proposal and the MH rule). The entries of ``z`` outside the step (other discrete variables that
a motif block conditions on, fixed values) are read from the chain's values at every draw.

Not here (the program refuses them by name, :func:`pymc_lbp.whole_model.discrete_blocks.
program_kind`): chain blocks, whose parameters are read from the model at each update and which
``pm.sample`` runs as colour-class sweeps, and BlockGibbs' elimination blocks, drawn by bucket
elimination in numpy. The program runs random-scan steps where ``pm.sample`` may sweep colour
classes: another kernel with the same target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pymc_lbp.samplers.block.neural_proposal import NeuralProposal
from pymc_lbp.samplers.block.random_scan_graph import random_scan_graph


class ScanRun(NamedTuple):
    """A draw's random-scan steps: the new state and what the step's stats are made of."""

    x: object
    sum_accept: object
    n_accepted: object
    n_evaluated: object
    last_unit: object


def random_scan_jax(step, model, to_jax: Callable, n_steps: int) -> Callable:
    """``run(noise, x, values) -> ScanRun`` for a NeuralBlock or BlockGibbs ``step`` whose
    units the random scan can run (``step.scan_compilable``).

    Parameters
    ----------
    step : NeuralBlock or BlockGibbs
    model : pymc.Model
        ``values`` are its value variables' values, in ``model.value_vars`` order.
    to_jax : callable
        ``(inputs, outputs) -> f(*inputs, *values)``
        (:func:`pymc_lbp.whole_model.jaxify.jax_function` bound to the model).
    n_steps : int
        Random-scan steps per call (``noise`` has this many rows and ``step.scan_width``
        columns).
    """
    import jax.numpy as jnp

    units, factors = step.scan_units()
    d = step.differences
    net = step.proposal.net if isinstance(step.proposal, NeuralProposal) else None
    inputs, outputs = random_scan_graph(
        units, factors, d.rows_graph, step.layout.n_sites, len(step._outside), net, n_steps
    )
    scan = to_jax(inputs, outputs)
    logp_at = to_jax([d._x], [d._logp_graph])
    network = [jnp.asarray(a, dtype=jnp.float64) for a in step._scan_network()]
    fixed = jnp.asarray(step._outside_values, dtype=jnp.int64)  # constants; the rest per draw
    position = {v.name: i for i, v in enumerate(model.value_vars)}
    shared = [(k, position[name], pos) for k, name, pos in step._shared_outside]

    def run(noise, x, values) -> ScanRun:
        outside = fixed
        for k, i, pos in shared:  # other steps' variables a motif block conditions on
            outside = outside.at[k].set(jnp.ravel(values[i])[pos].astype(jnp.int64))
        logp = logp_at(x, *values)[0]
        res = scan(x, logp, outside, noise, *network, *values)
        x_new, _, sum_accept, n_accepted, n_evaluated, last = res
        return ScanRun(x_new, sum_accept, n_accepted, n_evaluated, last)

    return run


__all__ = ["ScanRun", "random_scan_jax"]
