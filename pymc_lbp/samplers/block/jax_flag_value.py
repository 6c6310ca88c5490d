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
from pymc_lbp.samplers.jax_driver import ProgramSteps, scan_kernel


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


class PairVector:
    """A NeuralMixedBlock's joined vector (flags, then values, in the step's dtype) from the
    chain's values and back."""

    def __init__(self, step, model):
        names = [v.name for v in model.value_vars]
        flag, value = (v.name for v in step.vars)
        self.positions = (names.index(flag), names.index(value))
        self.n = int(step.n_pairs)
        self.dtype = step.dtype

    def get(self, values):
        import jax.numpy as jnp

        return jnp.concatenate([jnp.ravel(values[p]).astype(self.dtype) for p in self.positions])

    def put(self, values, q):
        import jax.numpy as jnp

        values = list(values)
        for j, p in enumerate(self.positions):
            part = q[j * self.n : (j + 1) * self.n]
            if jnp.issubdtype(values[p].dtype, jnp.integer):
                part = jnp.round(part)
            values[p] = part.reshape(values[p].shape).astype(values[p].dtype)
        return tuple(values)


def program_steps(step, model, to_jax: Callable) -> ProgramSteps:
    """NeuralMixedBlock's steps of a draw in the whole-model program: ``steps_per_draw`` pair
    updates (:func:`pair_updates_jax`) on the joined vector of its flags and values
    (:class:`PairVector`), the pairs in a random order per sweep as the step orders them in
    ``pm.sample``, the uniforms from the draw's key (per update a component's, the flag's and
    the accept's uniforms and a standard normal). The step moves its continuous values too;
    NUTS samples them as well (every continuous variable is NUTS's in the program), from the
    values the pair updates left, as ``pm.sample(step=[NeuralMixedBlock([b, v]),
    pm.NUTS([v, ...])])`` does."""
    import jax
    import jax.numpy as jnp

    n_steps, n_pairs, G = int(step.steps_per_draw), int(step.n_pairs), int(step.grid_points)
    updates = pair_updates_jax(step, to_jax)

    def run(key, q, values, state, tuning):
        k_order, k_uniform, k_normal = jax.random.split(key, 3)
        uniforms = jax.random.uniform(k_uniform, (n_steps, 3), dtype=jnp.float64)
        normals = jax.random.normal(k_normal, (n_steps,), dtype=jnp.float64)
        noise = jnp.column_stack([uniforms[:, 0], uniforms[:, 1], normals, uniforms[:, 2]])
        res = updates(pair_order(k_order, n_pairs, n_steps), noise, q, values)
        stats = {
            "accept": res.sum_accept / n_steps,
            "n_accepted": res.n_accepted,
            "mh_steps": jnp.int64(n_steps),
            "flags_on": jnp.count_nonzero(res.q[:n_pairs] != 0).astype(jnp.int64),
            "logp_evals": jnp.int64(1 + n_steps * (2 * G + 1)),
        }
        return res.q, state, stats

    return ProgramSteps(run, vector=PairVector(step, model))


__all__ = ["PairRun", "PairVector", "pair_order", "pair_updates_jax", "program_steps"]
