"""The integer sites' moves of a draw as a JAX function (for :mod:`pymc_lbp.whole_model`).

The graphs are those of :class:`pymc_lbp.samplers.integer.graph.CompiledJumps` (one informed
jump per jumping site, one full-conditional draw per support-Gibbs site, colour classes at
once), converted to JAX by ``to_jax``; two uniforms per moved site come from a JAX key, so given
the same uniforms the moves are the numpy reference's
(:func:`pymc_lbp.samplers.integer.reference.block_jumps`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class JumpsRun(NamedTuple):
    """A draw's integer moves: the state and the compiled call's summaries."""

    x: object
    sum_accept: object
    sum_distance: object
    n_accepted: object


def integer_moves_jax(jumps, to_jax: Callable) -> Callable[..., JumpsRun]:
    """``run(key, x, values) -> JumpsRun`` from a :class:`CompiledJumps` built with
    ``compile_now=False``; ``to_jax`` as in
    :func:`pymc_lbp.samplers.single_site.jax_steps.single_site_steps_jax`."""
    import jax
    import jax.numpy as jnp

    fn = to_jax(jumps.inputs, jumps.outputs)
    n_moves = int(jumps.order.size)

    def run(key, x, values) -> JumpsRun:
        uniforms = jax.random.uniform(key, (n_moves, 2), dtype=jnp.float64)
        x, _, sum_accept, sum_distance, n_accepted = fn(x, uniforms, *values)
        return JumpsRun(x, sum_accept, sum_distance, n_accepted)

    return run
