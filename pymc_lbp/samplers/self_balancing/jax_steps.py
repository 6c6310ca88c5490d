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

import numpy as np
import pytensor
import pytensor.tensor as pt

from pymc_lbp.samplers.jax_driver import ProgramSteps, steps_stats


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


def program_steps(step, model, to_jax: Callable) -> ProgramSteps:
    """SelfBalancing's steps of a draw in the whole-model program: its chain's steps with the
    current ``g``, then, while warming up,
    :attr:`~pymc_lbp.samplers.self_balancing.step.SelfBalancing.learning_steps` learning steps
    of its particles (each one transition of every particle, :func:`batch_moves` on
    ``jax.numpy``, and one Adam update). Each chain carries its own particles, whether they are
    set (from the chain's state at the first learning step), the learned parameters and Adam's
    moments and count, from the step's deterministic initialisation; frozen after warmup."""
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.jax_driver import scan_kernel
    from pymc_lbp.samplers.self_balancing.learning import batch_moves

    d = step.differences
    n_steps = int(step.steps_per_draw)
    n_particles = step.n_particles
    step.reset_tuning()
    start = (step.lsb_params, step.lsb_adam_m, step.lsb_adam_v, step.lsb_adam_t)

    def init():
        params, m, v, t = start
        rows = jnp.zeros((n_particles, step.layout.n_sites), dtype=jnp.int64)
        arrays = (jnp.asarray(a, jnp.float64) for a in (params, m, v))
        return (rows, jnp.bool_(False), *arrays, jnp.float64(t))

    def no_steps(key, x, values, state, tuning):  # a block whose sites all move by their jumps
        return x, state, {"lsb_params": state[2]}

    def finish(stats: dict) -> dict:
        """The recorded parameters replaced by the step's descriptive stats of them
        (``parametrization.describe``, as ``pm.sample`` records them each draw)."""
        params = stats.pop("lsb_params", None)
        if params is None:
            return stats
        flat = params.reshape(-1, params.shape[-1])
        described = [step.parametrization.describe(p) for p in flat]
        for name in described[0] if described else ():
            stats[name] = np.array([row[name] for row in described]).reshape(params.shape[:-1])
        return stats

    if not n_steps:
        return ProgramSteps(no_steps, init, finish=finish)
    fns = learned_chain_jax(step, to_jax, n_steps)
    n_updates = int(step.learning_steps)
    lr, clip = step.learner.learning_rate, step.learner.param_clip
    weights = step.particle_weights

    def run(key, x, values, state, tuning):
        rows, started, params, m, v, t = state
        k_chain, k_learn = jax.random.split(key)
        x, sum_accept, n_accepted, n_evaluated = fns.run(k_chain, x, values, params)
        evals = 1 + n_evaluated
        loss_sum, loss_count = jnp.float64(0.0), jnp.int64(0)
        if tuning and n_updates:
            rows = jnp.where(started, rows, jnp.broadcast_to(x, rows.shape))

            def target_rows(y):
                return jax.vmap(lambda r: tuple(fns.start(r, *values)))(y)

            def log_g(dm, p):
                return fns.log_g(dm, p, *values)[0]

            r_logp, r_deltas = target_rows(rows)
            moves_kw = {"log_g": log_g, "layout": step.layout, "target_rows": target_rows}

            def learn(u, carry):
                rows, r_logp, r_deltas, params, m, v, t = carry
                res = batch_moves(
                    u, rows, r_logp, r_deltas, params, **moves_kw, particle_weights=weights, xp=jnp
                )
                out = fns.adam(params, m, v, t, lr, clip, *res.batch, *values)
                loss, new, skipped = out[0], tuple(out[3:7]), out[7]
                learned = jnp.any(res.movable)
                params, m, v, t = (
                    jnp.where(learned, a, b) for a, b in zip(new, (params, m, v, t), strict=True)
                )
                counted = learned & ~skipped & jnp.isfinite(loss)
                carry = (res.x, res.logp, res.deltas, params, m, v, t)
                return carry, (jnp.where(counted, loss, 0.0), counted)

            def uniforms(i):
                key = jax.random.fold_in(k_learn, i)
                return jax.random.uniform(key, (n_particles, 2), dtype=jnp.float64)

            carry, (loss_sum, loss_count) = scan_kernel(
                learn, (rows, r_logp, r_deltas, params, m, v, t), uniforms, n_updates
            )
            rows, _, _, params, m, v, t = carry
            started = jnp.bool_(True)
            evals = evals + (n_updates + 1) * n_particles
        stats = {
            **steps_stats(d, sum_accept, n_accepted, n_steps, evals),
            "lsb_loss": jnp.where(loss_count > 0, loss_sum / jnp.maximum(loss_count, 1), jnp.nan),
            "learning_steps": jnp.int64(n_updates if tuning else 0),
            "lsb_params": params,
        }
        return x, (rows, started, params, m, v, t), stats

    return ProgramSteps(run, init, finish=finish)


__all__ = ["LearnedChain", "learned_chain_jax", "program_steps"]
