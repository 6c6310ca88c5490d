"""The path auxiliary kernel's run of a draw as a JAX function, with its path-length
adaptation (for :mod:`pymc_lbp.whole_model`).

One step is the graph of :func:`pymc_lbp.samplers.path.graph.tuned_path_step` (the kernel and,
while tuning, the adaptation's update after each path step), converted to JAX by ``to_jax``;
the one JAX driver (:func:`pymc_lbp.samplers.jax_driver.scan_kernel`) runs the draw's steps,
their number following the tuned scale (the one-sweep rule ``ceil(n / E[R])``, ``E[R] = s +
(1 - s) U``). A step's noise row is that of the compiled kernel (three uniforms, then standard
exponentials: :meth:`pymc_lbp.samplers.path.graph.CompiledPathSteps.draw_noise`), drawn from
the step's key folded with its index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytensor.tensor as pt

from pymc_lbp.samplers.jax_driver import ProgramSteps, steps_stats


class PathRun(NamedTuple):
    """A draw's path steps: the state, the summaries and the adaptation's state after them."""

    x: object
    sum_accept: object
    n_accepted: object
    n_evaluated: object
    sum_length: object
    sum_moved: object
    adapt: tuple


def path_steps_jax(
    differences, layout, log_g, share: float, adaptation, to_jax: Callable
) -> Callable[..., PathRun]:
    """``run(key, x, values, adapt, scale, tuning, n_steps) -> PathRun``, JAX-traceable.

    ``adapt`` is ``(log U, log Ubar, count, doubling)``; while ``tuning`` each step's scale is
    ``exp(log U)`` and path steps update ``adapt``, otherwise ``scale`` is used. ``n_steps`` may
    be traced. Other parameters as in
    :func:`pymc_lbp.samplers.single_site.jax_steps.single_site_steps_jax`.
    """
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.jax_driver import scan_kernel
    from pymc_lbp.samplers.path.adaptation import tuning_inputs
    from pymc_lbp.samplers.path.graph import PathMoves, PathState, prepare, tuned_path_step
    from pymc_lbp.samplers.path.ops import register_backend
    from pymc_lbp.samplers.path.reference import noise_width

    register_backend("jax")
    moves = PathMoves(layout)
    width = noise_width(layout)
    x = pt.tensor("x", dtype="int64", shape=(layout.n_sites,))
    logp = pt.scalar("logp", dtype="float64")
    deltas = pt.tensor("deltas", dtype="float64", shape=(layout.n_slots,))
    site_w = pt.tensor("site_w", dtype="float64", shape=(layout.n_sites,))
    within = pt.tensor("within", dtype="float64", shape=(layout.n_slots,))
    noise = pt.tensor("noise", dtype="float64", shape=(width,))
    scale, tuning, adapt = tuning_inputs()
    state = PathState(x, logp, deltas, site_w, None if moves.all_binary else within)
    n_state = len(state.carried())
    new, info, adapt_new = tuned_path_step(
        noise,
        state,
        adapt,
        scale,
        tuning,
        share=share,
        target=differences.graph,
        log_g=log_g,
        moves=moves,
        adaptation=adaptation,
    )
    step_fn = to_jax(
        [noise, *state.carried(), scale, tuning, *adapt],
        [*new.carried(), info.accept, info.accepted, info.evaluated, info.length, *adapt_new],
    )
    logp_x, deltas_x = differences.graph(x)
    weights = PathState(x, logp_x, deltas_x, *prepare(deltas_x, log_g, moves)).carried()[1:]
    start_fn = to_jax([x], list(weights))

    def run(key, x, values, adapt, scale, tuning, n_steps) -> PathRun:
        def noise(i):
            k_u, k_e = jax.random.split(jax.random.fold_in(key, i))
            uniforms = jax.random.uniform(k_u, (3,), dtype=jnp.float64)
            exponentials = jax.random.exponential(k_e, (width - 3,), dtype=jnp.float64)
            return jnp.concatenate([uniforms, exponentials])

        def step(row, carry):
            state, adapt = carry
            out = step_fn(row, *state, scale, tuning, *adapt, *values)
            accept, accepted, evaluated, length = out[n_state : n_state + 4]
            moved = length * accepted.astype(length.dtype)
            info = (accept, accepted, evaluated, length, moved)
            return (tuple(out[:n_state]), tuple(out[n_state + 4 :])), info

        start = ((x, *start_fn(x, *values)), tuple(jnp.asarray(a) for a in adapt))
        (state, adapt), sums = scan_kernel(step, start, noise, n_steps)
        return PathRun(state[0], *sums, adapt)

    return run


def program_steps(step, model, to_jax: Callable) -> ProgramSteps:
    """PathAuxiliaryLBP's steps of a draw in the whole-model program: its path steps, tuning the
    scale while warming up (an adaptive step; each chain its own adaptation, carried in the
    state ``(log U, log Ubar, count, doubling)``, then frozen at its averaged value),
    ``steps_per_draw`` of them or one sweep at the current scale, as in ``pm.sample``."""
    import jax.numpy as jnp

    from pymc_lbp.samplers.single_site.graph import graph_balancing

    d = step.differences
    log_g = graph_balancing(step.balancing, step.log_g)
    share = step.single_site_share
    run_steps = path_steps_jax(d, step.layout, log_g, share, step.adaptation, to_jax)
    fixed = step.steps_per_draw_given
    step.reset_tuning()
    start = tuple(step.adapt_state())

    def run(key, x, values, state, tuning):
        tunes = bool(tuning and step.adaptive)
        scale = jnp.exp(state[0]) if step.adaptive else jnp.float64(step.fixed_path_scale)
        n_steps = jnp.int64(fixed) if fixed is not None else step.sweep_steps(scale, xp=jnp)
        res = run_steps(key, x, values, state, scale, jnp.bool_(tunes), n_steps)
        state = res.adapt if tunes else state
        per = jnp.maximum(n_steps, 1)
        stats = {
            **steps_stats(d, res.sum_accept, res.n_accepted, n_steps, 1 + res.n_evaluated, per),
            "mean_path_length": (res.sum_length / per).astype(jnp.float64),
            "sites_moved_per_step": (res.sum_moved / per).astype(jnp.float64),
            "path_scale": scale.astype(jnp.float64),
        }
        return res.x, state, stats

    def init():
        dtypes = (jnp.float64, jnp.float64, jnp.int64, jnp.bool_)
        return tuple(dtype(v) for dtype, v in zip(dtypes, start, strict=True))

    def freeze(state):
        if not step.adaptive:
            return state
        log_u = jnp.log(step.adaptation.frozen_scale(state[1], xp=jnp))
        return (log_u, *state[1:])

    return ProgramSteps(run, init, freeze)


__all__ = ["PathRun", "path_steps_jax", "program_steps"]
