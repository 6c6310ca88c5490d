"""The single-site kernel's run of a draw as a JAX function (for :mod:`pymc_lbp.whole_model`).

The graphs are those of the compiled kernel (:class:`pymc_lbp.samplers.single_site.loop.
CompiledSteps`: one step of :func:`~pymc_lbp.samplers.single_site.graph.single_site_kernel`)
and of the differences at the start, converted to JAX by ``to_jax``; the one JAX driver,
:func:`pymc_lbp.samplers.jax_driver.scan_kernel`, runs a fixed number of steps as the compiled
kernel's pytensor ``scan`` runs them. The uniforms come from a JAX key (two per step, as the
step's ``rng`` gives them to the compiled kernel), so given the same uniforms the moves are the
numpy reference's (:func:`pymc_lbp.samplers.single_site.reference.single_site_steps`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from pymc_lbp.samplers.jax_driver import ProgramSteps, steps_stats


class SingleSiteRun(NamedTuple):
    """A draw's single-site steps: the state and the summaries of the compiled kernel."""

    x: object
    sum_accept: object
    n_accepted: object
    n_evaluated: object


def single_site_steps_jax(
    differences, layout, log_g, n_steps: int, to_jax: Callable, extra_inputs: Sequence = ()
) -> Callable[..., SingleSiteRun]:
    """``run(key, x, values, *extra) -> SingleSiteRun``: ``n_steps`` locally balanced single-site
    steps from ``x``, JAX-traceable.

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
    extra_inputs : sequence of Variable
        Inputs ``log_g``'s graph reads besides the differences (SelfBalancing's learned
        parameters), given to ``run`` as ``*extra``.
    """
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.jax_driver import scan_kernel
    from pymc_lbp.samplers.single_site.loop import CompiledSteps

    steps = CompiledSteps(differences, layout, log_g, compile_now=False)
    # one step's graph in a jax.lax.scan, not the compiled kernel's pytensor scan: PyTensor's JAX
    # conversion of a Scan rewrites its inner graph at every conversion, while a plain graph's
    # rewrites are read from jaxify's store (the same kernel, step by step)
    step_inputs, step_outs = steps.step_graph(layout.n_sites, layout.n_slots)
    step_fn = to_jax([*step_inputs, *extra_inputs], step_outs)
    x0 = step_inputs[1]
    logp0, deltas0 = differences.graph(x0)
    start_fn = to_jax([x0, *extra_inputs], [logp0, deltas0, *steps.prepare_graph(deltas0)])

    def run(key, x, values, *extra) -> SingleSiteRun:
        def step(u, state):
            *new, accept, accepted, evaluated = step_fn(u, *state, *extra, *values)
            return tuple(new), (accept, accepted, evaluated)

        state = (x, *start_fn(x, *extra, *values))
        uniforms = jax.random.uniform(key, (n_steps, steps.n_uniforms), dtype=jnp.float64)
        state, totals = scan_kernel(step, state, uniforms)
        return SingleSiteRun(state[0], *totals)

    return run


def program_steps(step, model, to_jax: Callable) -> ProgramSteps:
    """LocallyBalanced's and GibbsWithGradients' steps of a draw in the whole-model program:
    ``steps_per_draw`` single-site steps from the differences the step chose (exact, first
    order, or a pairwise block's exact ones: the numba kernel's transition)."""
    from pymc_lbp.samplers.single_site.graph import graph_balancing

    d = step.differences
    n_steps = int(step.steps_per_draw)
    if not n_steps:  # a block whose sites all move by their own jumps
        return ProgramSteps(None)
    log_g = graph_balancing(step.balancing, step.log_g)
    run_steps = single_site_steps_jax(d, step.layout, log_g, n_steps, to_jax)

    def run(key, x, values, state, tuning):
        res = run_steps(key, x, values)
        stats = steps_stats(d, res.sum_accept, res.n_accepted, n_steps, 1 + res.n_evaluated)
        return res.x, state, stats

    return ProgramSteps(run)
