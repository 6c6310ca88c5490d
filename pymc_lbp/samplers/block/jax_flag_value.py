"""NeuralMixedBlock's pair updates in the compiled whole-model program (issue #25).

The JAX version of :mod:`pymc_lbp.samplers.block.flag_value_graph` (whose numpy reference is
:meth:`pymc_lbp.samplers.block.step_mixed.NeuralMixedBlock.pair_update`): the pair-update
graph converted to JAX with the model's other variables read from the chain's values
(:func:`pymc_lbp.whole_model.jaxify.jax_function`), run over a draw's pairs by the one JAX
driver (:func:`pymc_lbp.samplers.jax_driver.scan_kernel`). The order of the pairs and the
uniforms come from the caller (:func:`pair_order`: the numpy step's order, a random permutation
per sweep).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pymc_lbp.samplers.block.flag_value_graph import pair_update_graph
from pymc_lbp.samplers.jax_driver import scan_kernel


class PairRun(NamedTuple):
    """A draw's pair updates: the new state and what the step's stats are made of."""

    q: object
    sum_accept: object
    n_accepted: object


def pair_order(key, n_pairs: int, n_steps: int):
    """The pairs a draw updates, in order: a random permutation of the pairs per sweep, as many
    sweeps as ``n_steps`` needs, cut to ``n_steps`` (the numpy step's order)."""
    import jax
    import jax.numpy as jnp

    rounds = -(-n_steps // n_pairs)
    keys = jax.random.split(key, rounds)
    return jnp.concatenate([jax.random.permutation(k, n_pairs) for k in keys])[:n_steps]


def pair_updates_jax(step, to_jax: Callable) -> Callable:
    """``run(order, noise, q, values) -> PairRun`` for a NeuralMixedBlock ``step``: pair
    ``order[i]`` updated with the uniforms ``noise[i]`` (component, flag, a standard normal,
    accept), from the step's joined vector ``q`` (flags then values); ``values`` the model's
    value variables' values in ``model.value_vars`` order.

    Parameters
    ----------
    step : NeuralMixedBlock
    to_jax : callable
        As :func:`pymc_lbp.samplers.block.jax_steps.random_scan_jax` takes it.
    """
    import jax.numpy as jnp

    inputs, outputs = pair_update_graph(step)
    update = to_jax(inputs, outputs)
    logp_at = to_jax([step._joined], [step._logp_graph])
    network = [jnp.asarray(a, dtype=jnp.float64) for a in step.proposal.graph_inputs()]

    def run(order, noise, q, values) -> PairRun:
        def step(step_input, state):
            q, logp, prob, accepted = update(*state, *step_input, *network, *values)
            return (q, logp), (prob, accepted)

        logp = jnp.asarray(logp_at(q, *values)[0], jnp.float64)
        (q, _), totals = scan_kernel(step, (q, logp), (order.astype(jnp.int64), noise))
        return PairRun(q, *totals)

    return run


__all__ = ["PairRun", "pair_order", "pair_updates_jax"]
