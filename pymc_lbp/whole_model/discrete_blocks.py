"""A discrete step's draw as a JAX function of the chain's values.

:func:`block_draw` turns a step built on the model into ``draw(key, values) -> (values,
stats)``: the step's own transitions (the pytensor graphs its compiled kernels are made of,
converted by :func:`pymc_lbp.whole_model.jaxify.jax_function`), with uniforms from ``key``
instead of the step's ``rng``. A draw is what the step's ``astep`` makes:

* ``steps_per_draw`` single-site locally balanced steps
  (:func:`pymc_lbp.samplers.single_site.graph.single_site_kernel` in the scan of
  :mod:`pymc_lbp.samplers.single_site.loop`) from the differences the step chose (exact, first
  order, or a pairwise block's: there the kernel runs on the exact differences the couplings are
  read from, the same transition as the numba kernel's);
* then one move per integer site (:class:`pymc_lbp.samplers.integer.graph.CompiledJumps`:
  informed jumps, full-conditional draws over small supports, conditionally independent
  sites all at once).

The jumps' offset exponent ``J`` is the one the step would start the chains with (the largest
over their starts); ``pm.sample`` may grow it during tuning, the compiled program keeps it (a
jump reaches ``+-2^J``, ``J >= 10``; the kernel is exact for any ``J``).

Steps whose transitions are not in the program yet raise :class:`NotInProgramError` naming the
step; nothing falls back to another sampler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pymc_lbp.whole_model.jaxify import jax_function

STAT_DTYPES = {
    "accept": np.float64,
    "n_accepted": np.int64,
    "mh_steps": np.int64,
    "jump_distance": np.int64,
    "logp_evals": np.int64,
    "grad_evals": np.int64,
    "integer_accept": np.float64,
    "integer_jump": np.float64,
    "exact_differences": bool,
}
"""The discrete stats the program records (the steps' own names and dtypes,
:mod:`pymc_lbp.step_methods.stats`)."""


class NotInProgramError(NotImplementedError):
    """A step whose transitions the compiled program cannot run."""


@dataclass
class BlockDraw:
    """One discrete step in the program.

    Attributes
    ----------
    step : DiscreteStep
    positions : list of int
        Indices of the block's variables in ``model.value_vars``.
    draw : callable
        ``(key, values) -> (values, stats)``, JAX-traceable.
    stat_names : tuple of str
    """

    step: object
    positions: list[int]
    draw: Callable
    stat_names: tuple[str, ...]


def _check_supported(step) -> None:
    from pymc_lbp.step_methods.gibbs_with_gradients import GibbsWithGradients
    from pymc_lbp.step_methods.locally_balanced import LocallyBalanced

    name = type(step).__name__
    if type(step) not in (LocallyBalanced, GibbsWithGradients):
        raise NotInProgramError(
            f"pymc_lbp.sample: {name} on {list(step.var_names)} cannot run in the compiled JAX "
            "program yet (in it now: LocallyBalanced and GibbsWithGradients, with their integer "
            f"jumps and full-conditional draws). Sample this model with pm.sample(step=[{name}(...)"
            "]), or give pymc_lbp.sample a LocallyBalanced / GibbsWithGradients step for these "
            "variables."
        )


def block_draw(step, model, replacements: dict, starts: list[np.ndarray]) -> BlockDraw:
    """The JAX draw of ``step`` (see the module docs).

    Parameters
    ----------
    step : LocallyBalanced or GibbsWithGradients
    model : pymc.Model
    replacements : dict
        :func:`pymc_lbp.whole_model.jaxify.model_value_replacements` of every step.
    starts : list of ndarray
        The chains' block vectors at their starts (the jumps' ``J`` is the largest they need).

    Raises
    ------
    NotInProgramError
        For a step the program cannot run.
    """
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.single_site.graph import graph_balancing
    from pymc_lbp.samplers.single_site.loop import compile_single_site_steps

    _check_supported(step)
    names = [v.name for v in model.value_vars]
    positions = [names.index(s.name) for s in step.specs]
    shapes = [tuple(s.shape) for s in step.specs]
    sizes = [int(np.prod(sh, dtype=np.int64)) for sh in shapes]
    lay = step.layout
    n_steps = int(step.steps_per_draw)
    d = step.differences
    exact = d.kind == "exact"

    steps_fn = None
    if n_steps:
        log_g = graph_balancing(step.balancing, step.log_g)
        steps = compile_single_site_steps(d, lay, log_g, compile_now=False)
        inputs, outs = steps.graph((lay.n_sites, lay.n_slots, n_steps))
        steps_fn = jax_function(inputs, outs, model, replacements)
        x_in = inputs[0]
        logp_x, deltas_x = d.graph(x_in)
        start_fn = jax_function([x_in], [logp_x, deltas_x], model, replacements)

    jumps_fn, n_moves, jump_evals = None, 0, 0
    if step._integer_sites.size:
        if step._jump_exponent_grows and starts:
            step._set_jump_exponent(max(step._jump_exponent_at(x) for x in starts))
        jumps = step.build_jumps(compile_now=False)
        jumps_fn = jax_function(jumps.inputs, jumps.outputs, model, replacements)
        n_moves, jump_evals = int(jumps.order.size), int(jumps.logp_evals_per_call)

    def to_x(values):
        return jnp.concatenate([jnp.ravel(values[p]).astype(jnp.int64) for p in positions])

    def from_x(values, x):
        values = list(values)
        start = 0
        for p, shape, size in zip(positions, shapes, sizes, strict=True):
            values[p] = x[start : start + size].reshape(shape).astype(values[p].dtype)
            start += size
        return tuple(values)

    def draw(key, values):
        x0 = to_x(values)
        x = x0
        k_steps, k_jumps = jax.random.split(key)
        stats = {}
        accept = jnp.float64(0.0)
        n_accepted = jnp.int64(0)
        evals = jnp.int64(0)
        grads = jnp.int64(0)
        if steps_fn is not None:
            logp, deltas = start_fn(x, *values)
            uniforms = jax.random.uniform(k_steps, (n_steps, 2), dtype=jnp.float64)
            x, _, _, sum_accept, n_acc, n_eval = steps_fn(x, logp, deltas, uniforms, *values)
            accept = sum_accept / n_steps
            n_accepted = n_acc.astype(jnp.int64)
            evals = (1 + n_eval) * d.logp_evals_per_call
            grads = (1 + n_eval) * d.grad_evals_per_call
        if jumps_fn is not None:
            uniforms = jax.random.uniform(k_jumps, (n_moves, 2), dtype=jnp.float64)
            moved = from_x(values, x)
            x, _, j_acc, j_dist, j_n = jumps_fn(x, uniforms, *moved)
            stats["integer_accept"] = j_acc / n_moves
            stats["integer_jump"] = (j_dist / n_moves).astype(jnp.float64)
            evals = evals + jump_evals
            if steps_fn is None:
                accept, n_accepted = j_acc / n_moves, j_n.astype(jnp.int64)
        stats.update(
            accept=jnp.asarray(accept, jnp.float64),
            n_accepted=jnp.asarray(n_accepted, jnp.int64),
            mh_steps=jnp.int64(n_steps),
            jump_distance=jnp.count_nonzero(x != x0).astype(jnp.int64),
            logp_evals=jnp.asarray(evals, jnp.int64),
            grad_evals=jnp.asarray(grads, jnp.int64),
            exact_differences=jnp.bool_(exact),
        )
        return from_x(values, x), {k: stats[k] for k in stat_names}

    stat_names = tuple(k for k in STAT_DTYPES if k in step.stats_dtypes_shapes)
    return BlockDraw(step, positions, draw, stat_names)
