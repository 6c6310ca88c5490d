"""The path auxiliary kernel's run of a draw as a JAX function, with its path-length
adaptation (for :mod:`pymc_lbp.whole_model`).

One step is the graph of :func:`pymc_lbp.samplers.path.graph.tuned_path_step` (the kernel and,
while tuning, the adaptation's update after each path step), converted to JAX by ``to_jax``;
the draw's steps run in a ``jax.lax.fori_loop`` whose length may follow the tuned scale (the
one-sweep rule ``ceil(n / E[R])``, ``E[R] = s + (1 - s) U``), which a fixed-length ``scan``
cannot. A step's noise row is that of the compiled kernel (three uniforms, then standard
exponentials: :meth:`pymc_lbp.samplers.path.graph.CompiledPathSteps.draw_noise`), drawn from
the step's key folded with its index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytensor.tensor as pt


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

    from pymc_lbp.samplers.path.adaptation import tuning_inputs
    from pymc_lbp.samplers.path.graph import PathMoves, PathState, prepare, tuned_path_step
    from pymc_lbp.samplers.path.ops import register_backend

    register_backend("jax")
    moves = PathMoves(layout)
    width = moves.noise_width
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
        state = (x, *start_fn(x, *values))
        zero_f, zero_i = jnp.float64(0.0), jnp.int64(0)

        def body(i, carry):
            state, adapt, sums = carry
            k_u, k_e = jax.random.split(jax.random.fold_in(key, i))
            row = jnp.concatenate(
                [
                    jax.random.uniform(k_u, (3,), dtype=jnp.float64),
                    jax.random.exponential(k_e, (width - 3,), dtype=jnp.float64),
                ]
            )
            out = step_fn(row, *state, scale, tuning, *adapt, *values)
            new_state, (accept, accepted, evaluated, length), new_adapt = (
                tuple(out[:n_state]),
                out[n_state : n_state + 4],
                tuple(out[n_state + 4 :]),
            )
            acc = accepted.astype(jnp.int64)
            sums = (
                sums[0] + accept,
                sums[1] + acc,
                sums[2] + evaluated.astype(jnp.int64),
                sums[3] + length,
                sums[4] + length * acc,
            )
            return new_state, new_adapt, sums

        adapt = tuple(jnp.asarray(a) for a in adapt)
        sums = (zero_f, zero_i, zero_i, zero_i, zero_i)
        state, adapt, sums = jax.lax.fori_loop(0, n_steps, body, (state, adapt, sums))
        return PathRun(state[0], *sums, adapt)

    return run


def frozen_scale(adaptation, log_u_bar):
    """:meth:`~pymc_lbp.samplers.path.adaptation.PathLengthAdaptation.frozen_scale` in JAX."""
    import jax.numpy as jnp

    return jnp.clip(jnp.exp(log_u_bar), 1.0, float(adaptation.max_length))


def sweep_steps(n_sites: int, share: float, scale, n_max: int):
    """The one-sweep rule ``ceil(n_sites / max(E[R], 1))`` with ``E[R] = s + (1 - s) min(U,
    n_max)`` (:meth:`pymc_lbp.samplers.path.step.PathAuxiliaryLBP.sweep_steps`), in
    JAX."""
    import jax.numpy as jnp

    if n_sites <= 0:
        return jnp.int64(0)
    expected = share + (1.0 - share) * jnp.minimum(scale, float(n_max))
    return jnp.maximum(1, jnp.ceil(n_sites / jnp.maximum(expected, 1.0))).astype(jnp.int64)


__all__ = ["PathRun", "frozen_scale", "path_steps_jax", "sweep_steps"]
