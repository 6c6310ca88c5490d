"""The single-site kernel's run of a draw as a JAX function (for :mod:`pymc_lbp.whole_model`).

The graphs are those of the compiled kernel (:class:`pymc_lbp.samplers.single_site.loop.
CompiledSteps`: :func:`~pymc_lbp.samplers.single_site.graph.single_site_kernel` in a ``scan``
over a fixed number of steps) and of the differences at the start, converted to JAX by
``to_jax``; the uniforms come from a JAX key (two per step, as the step's ``rng`` gives them to
the compiled kernel), so given the same uniforms the moves are the numpy reference's
(:func:`pymc_lbp.samplers.single_site.reference.single_site_steps`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class SingleSiteRun(NamedTuple):
    """A draw's single-site steps: the state and the summaries of the compiled kernel."""

    x: object
    sum_accept: object
    n_accepted: object
    n_evaluated: object


def single_site_steps_jax(
    differences, layout, log_g, n_steps: int, to_jax: Callable
) -> Callable[..., SingleSiteRun]:
    """``run(key, x, values) -> SingleSiteRun``: ``n_steps`` locally balanced single-site steps
    from ``x``, JAX-traceable.

    Parameters
    ----------
    differences : Differences
        The step's differences (their :meth:`graph`).
    layout : BlockLayout
    log_g : callable
        The balancing function as a graph builder.
    n_steps : int
        Steps per run (static).
    to_jax : callable
        ``(inputs, outputs) -> f(*inputs, *values)``: graphs to a JAX function of their inputs
        and the model's values (:func:`pymc_lbp.whole_model.jaxify.jax_function`).
    """
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.single_site.loop import compile_single_site_steps

    steps = compile_single_site_steps(differences, layout, log_g, compile_now=False)
    inputs, outs = steps.graph((layout.n_sites, layout.n_slots, n_steps))
    steps_fn = to_jax(inputs, outs)
    start_fn = to_jax([inputs[0]], list(differences.graph(inputs[0])))

    def run(key, x, values) -> SingleSiteRun:
        logp, deltas = start_fn(x, *values)
        uniforms = jax.random.uniform(key, (n_steps, 2), dtype=jnp.float64)
        x, _, _, sum_accept, n_accepted, n_evaluated = steps_fn(x, logp, deltas, uniforms, *values)
        return SingleSiteRun(x, sum_accept, n_accepted, n_evaluated)

    return run
