"""A discrete step's draw as a JAX function of the chain's values.

:func:`block_draw` turns a step built on the model into a
:class:`~pymc_lbp.whole_model.program.BlockDraw`: ``draw(key, values, state, tuning) -> (values,
state, stats)``, what the step's ``astep`` makes, from the
JAX versions of its algorithm (each in its algorithm's folder, built from the pytensor graphs its
compiled kernels are made of, converted by :func:`pymc_lbp.whole_model.jaxify.jax_function`),
with uniforms from ``key`` instead of the step's ``rng``:

* LocallyBalanced, GibbsWithGradients: ``steps_per_draw`` single-site steps
  (:mod:`pymc_lbp.samplers.single_site.jax_steps`) from the differences the step chose (exact,
  first order, or a pairwise block's: there the kernel runs on the exact differences the
  couplings are read from, the same transition as the numba kernel's);
* PathAuxiliaryLBP: its path steps (:mod:`pymc_lbp.samplers.path.jax_steps`), the path length
  tuned toward its target acceptance during warmup (each chain its own, carried in ``state``),
  then frozen at its averaged value; with ``steps_per_draw=None`` the number of steps per draw
  follows the scale (one sweep), as in ``pm.sample``;
* SelfBalancing: its chain's single-site steps with the current learned ``g`` and, while
  warming up, its learning steps (:mod:`pymc_lbp.samplers.self_balancing.jax_steps`: every
  particle's transition, one Adam update of the LSB objective each), the particles and the
  learned parameters carried per chain in ``state``, frozen after warmup;
* NeuralBlock, BlockGibbs: ``steps_per_draw`` random-scan steps
  (:mod:`pymc_lbp.samplers.block.jax_steps`: exact blocks and uncovered sites from their exact
  conditionals, motif blocks by the network's proposal and the MH rule), or, where ``pm.sample``
  sweeps colour classes of chain blocks, the same sweeps; elimination blocks, and chain blocks
  without colour classes, are refused by name;
* NeuralMixedBlock: ``steps_per_draw`` pair updates (:mod:`pymc_lbp.samplers.block.jax_flag_value`),
  its values NUTS's as well (:mod:`pymc_lbp.whole_model.neural_blocks`);
* then, for the others, one move per integer site
  (:mod:`pymc_lbp.samplers.integer.jax_steps`: informed jumps, full-conditional draws over small
  supports, conditionally independent sites all at once).

The jumps' offset exponent ``J`` is the one the step starts the chains with (the largest over
their starts); ``pm.sample`` may grow it during tuning, the compiled program keeps it (a jump
reaches ``+-2^J``, ``J >= 10``; the kernel is exact for any ``J``).

Steps whose transitions are not in the program yet raise :class:`NotInProgramError` naming the
step; nothing falls back to another sampler.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from pymc_lbp.whole_model.jaxify import jax_function
from pymc_lbp.whole_model.program import STAT_DTYPES, BlockDraw


class NotInProgramError(NotImplementedError):
    """A step whose transitions the compiled program cannot run."""


def program_kind(step) -> str:
    """The JAX version that runs ``step`` in the program (``"single_site"``, ``"path"``,
    ``"self_balancing"``, ``"random_scan"``, ``"chain_sweep"``, ``"flag_value"``); a
    :class:`NotInProgramError` naming the step otherwise (checked before anything is
    compiled). The kind is the step class's own ``jax_kind``, set in its room
    (``samplers/<algorithm>/step.py``) beside its ``jax_steps.py``; a subclass runs in the
    program only where it declares one (its draws may differ from its parent's)."""
    kind = vars(type(step)).get("jax_kind")
    name = type(step).__name__
    if kind is None:
        raise NotInProgramError(
            f"pymc_lbp.sample: {name} on {list(step.var_names)} cannot run in the compiled JAX "
            "program yet (in it now: LocallyBalanced, GibbsWithGradients, PathAuxiliaryLBP, "
            "SelfBalancing, with their integer jumps and full-conditional draws, NeuralBlock "
            "and BlockGibbs on blocks the random scan updates, NeuralBlock's sweeps over colour "
            "classes of chain blocks, and NeuralMixedBlock). Sample this model with "
            f"pm.sample(step=[{name}(...)]), or give pymc_lbp.sample one of those steps for "
            "these variables."
        )
    if kind == "random_scan" and _sweeps_colours(step):
        return "chain_sweep"
    if kind == "random_scan" and not step.scan_compilable:
        which = (
            "elimination blocks (drawn by bucket elimination in numpy)"
            if step.has_elimination_blocks
            else "chain blocks without colour classes its sweeps could update (pm.sample "
            "updates them by numpy random-scan steps)"
        )
        raise NotInProgramError(
            f"pymc_lbp.sample: {name} on {list(step.var_names)} has {which}, which cannot run "
            f"in the compiled JAX program yet. Sample this model with pm.sample(step=[{name}"
            "(...)]), or give pymc_lbp.sample blocks the random scan updates (for BlockGibbs "
            "blocks='clusters')."
        )
    return kind


def _sweeps_colours(step) -> bool:
    """Whether ``pm.sample`` runs the step's draws as sweeps over colour classes of chain blocks
    (:meth:`~pymc_lbp.samplers.block.step.NeuralBlock.run_steps`) and the sweep's graph
    can run them."""
    colours = getattr(step, "colours", None)
    return (
        colours is not None and step.steps_per_draw % len(step.units) == 0 and step.sweep_compilable
    )


class _BlockVector:
    """The block's int64 vector from the chain's values and back."""

    def __init__(self, step, model):
        names = [v.name for v in model.value_vars]
        self.positions = [names.index(s.name) for s in step.specs]
        self.shapes = [tuple(s.shape) for s in step.specs]
        self.sizes = [int(np.prod(sh, dtype=np.int64)) for sh in self.shapes]

    def get(self, values):
        import jax.numpy as jnp

        return jnp.concatenate([jnp.ravel(values[p]).astype(jnp.int64) for p in self.positions])

    def put(self, values, x):
        values = list(values)
        start = 0
        for p, shape, size in zip(self.positions, self.shapes, self.sizes, strict=True):
            values[p] = x[start : start + size].reshape(shape).astype(values[p].dtype)
            start += size
        return tuple(values)


def block_draw(step, model, replacements: dict, starts: list[np.ndarray]) -> BlockDraw:
    """The JAX draw of ``step`` (see the module docs).

    Parameters
    ----------
    step : DiscreteStep or NeuralMixedBlock
        One of the steps :func:`program_kind` accepts.
    model : pymc.Model
    replacements : dict
        :func:`pymc_lbp.whole_model.jaxify.model_value_replacements` of every step.
    starts : list of ndarray
        The chains' block vectors at their starts (the jumps' ``J`` is the largest they need;
        unused by the block samplers).

    Raises
    ------
    NotInProgramError
        For a step the program cannot run.
    """
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.integer.jax_steps import integer_moves_jax
    from pymc_lbp.samplers.single_site.graph import graph_balancing
    from pymc_lbp.whole_model.neural_blocks import (
        chain_sweep_block,
        flag_value_block,
        random_scan_block,
    )

    kind = program_kind(step)
    to_jax = partial(jax_function, model=model, replacements=replacements)
    if kind == "flag_value":
        return flag_value_block(step, model, to_jax)
    vector = _BlockVector(step, model)
    if kind == "chain_sweep":
        return chain_sweep_block(step, model, vector, to_jax)
    if kind == "random_scan":
        return random_scan_block(step, model, vector, to_jax)
    d = step.differences
    log_g = None if kind == "self_balancing" else graph_balancing(step.balancing, step.log_g)
    steps_run = _path_steps(step, d, log_g, to_jax) if kind == "path" else None
    if kind == "self_balancing" and step.steps_per_draw:
        steps_run = _learned_steps(step, d, to_jax)
    if kind == "single_site" and step.steps_per_draw:
        steps_run = _single_site_steps(step, d, log_g, to_jax)
    jumps_run = None
    moves = step.integer_moves
    if moves is not None:
        moves.start_chains(starts or ())
        jumps = moves.build(compile_now=False)
        jumps_run = integer_moves_jax(jumps, to_jax)
        n_moves, jump_evals = moves.n_sites, int(jumps.logp_evals_per_call)
    stat_names = tuple(k for k in STAT_DTYPES if k in step.stats_dtypes_shapes)

    def draw(key, values, state, tuning: bool):
        x0 = vector.get(values)
        k_steps, k_jumps = jax.random.split(key)
        stats = {
            "accept": jnp.float64(0.0),
            "n_accepted": jnp.int64(0),
            "mh_steps": jnp.int64(0),
            "logp_evals": jnp.int64(0),
            "grad_evals": jnp.int64(0),
        }
        x = x0
        if steps_run is not None:
            x, state, run_stats = steps_run(k_steps, x, values, state, tuning)
            stats.update(run_stats)
        if jumps_run is not None:
            run = jumps_run(k_jumps, x, vector.put(values, x))
            x = run.x
            stats["integer_accept"] = run.sum_accept / n_moves
            stats["integer_jump_size"] = (run.sum_distance / n_moves).astype(jnp.float64)
            stats["logp_evals"] = stats["logp_evals"] + jump_evals
            if steps_run is None:
                stats["accept"] = run.sum_accept / n_moves
                stats["n_accepted"] = run.n_accepted.astype(jnp.int64)
        stats["sites_changed"] = jnp.count_nonzero(x != x0).astype(jnp.int64)
        stats["exact_differences"] = jnp.bool_(d.kind == "exact")
        # a stat the draw did not make (a draw without steps: path length, loss) is a zero of
        # its dtype, as pm.sample records it
        kept = {k: stats.get(k, jnp.zeros((), STAT_DTYPES[k])) for k in stat_names}
        if kind == "self_balancing":
            kept["lsb_params"] = stats.get("lsb_params", state[2])
        return vector.put(values, x), state, kept

    if kind == "path":
        init, freeze = _path_state(step)
    elif kind == "self_balancing":
        init, freeze = _learned_state(step), lambda state: state
        return BlockDraw(step, draw, init, freeze, stat_names, partial(_describe_learned, step))
    else:
        init, freeze = tuple, lambda state: state
    return BlockDraw(step, draw, init, freeze, stat_names)


def _describe_learned(step, stats: dict) -> dict:
    """Replace the recorded parameters by the step's descriptive stats of them
    (``parametrization.describe``, as ``pm.sample`` records them each draw)."""
    params = stats.pop("lsb_params", None)
    if params is None:
        return stats
    flat = params.reshape(-1, params.shape[-1])
    described = [step.parametrization.describe(p) for p in flat]
    for name in described[0] if described else ():
        stats[name] = np.array([d[name] for d in described]).reshape(params.shape[:-1])
    return stats


def _learned_state(step):
    """``init`` of SelfBalancing's carried state: its particles (set from the chain's state at
    the first learning step), whether they are, and the learned parameters with Adam's
    moments and count, from the step's deterministic initialisation."""
    import jax.numpy as jnp

    step.reset_tuning()
    params, m, v, t = step.lsb_params, step.lsb_adam_m, step.lsb_adam_v, step.lsb_adam_t

    def init():
        return (
            jnp.zeros((step.n_particles, step.layout.n_sites), dtype=jnp.int64),
            jnp.bool_(False),
            jnp.asarray(params, jnp.float64),
            jnp.asarray(m, jnp.float64),
            jnp.asarray(v, jnp.float64),
            jnp.float64(t),
        )

    return init


def _learned_steps(step, d, to_jax):
    """The SelfBalancing part of a draw: its chain's steps with the current ``g``, then, while
    tuning, :attr:`~pymc_lbp.samplers.self_balancing.step.SelfBalancing.learning_steps` learning
    steps of its particles (each one transition of every particle and one Adam update)."""
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.jax_driver import scan_kernel
    from pymc_lbp.samplers.self_balancing.jax_steps import learned_chain_jax
    from pymc_lbp.samplers.self_balancing.learning import batch_moves

    n_steps = int(step.steps_per_draw)
    fns = learned_chain_jax(step, to_jax, n_steps)
    n_updates = int(step.learning_steps)
    n_particles = step.n_particles
    lr, clip = step.learner.learning_rate, step.learner.param_clip

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

            def learn(u, carry):
                rows, r_logp, r_deltas, params, m, v, t = carry
                res = batch_moves(
                    u,
                    rows,
                    r_logp,
                    r_deltas,
                    params,
                    log_g=log_g,
                    layout=step.layout,
                    target_rows=target_rows,
                    particle_weights=step.particle_weights,
                    xp=jnp,
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
            **_steps_stats(d, sum_accept, n_accepted, n_steps, evals),
            "lsb_loss": jnp.where(loss_count > 0, loss_sum / jnp.maximum(loss_count, 1), jnp.nan),
            "learning_steps": jnp.int64(n_updates if tuning else 0),
            "lsb_params": params,
        }
        return x, (rows, started, params, m, v, t), stats

    return run


def _steps_stats(d, sum_accept, n_accepted, n_steps, evals, per=None) -> dict:
    """The stats of a draw's ``n_steps`` steps, as :meth:`DiscreteStep.astep
    <pymc_lbp.step_methods.base.DiscreteStep.astep>` records them: their mean acceptance (over
    ``per`` steps, default ``n_steps``), the accepted ones, and the ``evals`` evaluations of the
    differences ``d`` in logp and gradient evaluations."""
    import jax.numpy as jnp

    return {
        "accept": sum_accept / (n_steps if per is None else per),
        "n_accepted": n_accepted.astype(jnp.int64),
        "mh_steps": jnp.asarray(n_steps, dtype=jnp.int64),
        "logp_evals": (evals * d.logp_evals_per_call).astype(jnp.int64),
        "grad_evals": (evals * d.grad_evals_per_call).astype(jnp.int64),
    }


def _single_site_steps(step, d, log_g, to_jax):
    """The LocallyBalanced / GibbsWithGradients part of a draw."""
    from pymc_lbp.samplers.single_site.jax_steps import single_site_steps_jax

    n_steps = int(step.steps_per_draw)
    run_steps = single_site_steps_jax(d, step.layout, log_g, n_steps, to_jax)

    def run(key, x, values, state, tuning):
        res = run_steps(key, x, values)
        stats = _steps_stats(d, res.sum_accept, res.n_accepted, n_steps, 1 + res.n_evaluated)
        return res.x, state, stats

    return run


def _path_state(step):
    """``(init, freeze)`` of the path-length adaptation's state ``(log U, log Ubar, count,
    doubling)`` as the step starts a chain and freezes it after tuning."""
    import jax.numpy as jnp

    step.reset_tuning()
    start = tuple(step.adapt_state())

    def init():
        return (
            jnp.float64(start[0]),
            jnp.float64(start[1]),
            jnp.int64(start[2]),
            jnp.bool_(start[3]),
        )

    def freeze(state):
        if not step.adaptive:
            return state
        log_u = jnp.log(step.adaptation.frozen_scale(state[1], xp=jnp))
        return (log_u, state[1], state[2], state[3])

    return init, freeze


def _path_steps(step, d, log_g, to_jax):
    """The PathAuxiliaryLBP part of a draw: its path steps, tuning the scale while warming up
    (an adaptive step), ``steps_per_draw`` of them or one sweep at the current scale."""
    import jax.numpy as jnp

    from pymc_lbp.samplers.path.jax_steps import path_steps_jax
    from pymc_lbp.step_methods.step_results import steps_for_a_sweep

    share = step.single_site_share
    run_steps = path_steps_jax(d, step.layout, log_g, share, step.adaptation, to_jax)
    fixed = step.steps_per_draw_given
    swept = step.swept_sites()

    def run(key, x, values, state, tuning):
        tunes = bool(tuning and step.adaptive)
        if step.adaptive:
            scale = jnp.exp(state[0])
        else:
            scale = jnp.float64(step.fixed_path_scale)
        n_steps = (
            jnp.int64(fixed)
            if fixed is not None
            else steps_for_a_sweep(swept, step.expected_sites(scale, xp=jnp), xp=jnp)
        )
        res = run_steps(key, x, values, state, scale, jnp.bool_(tunes), n_steps)
        state = res.adapt if tunes else state
        per = jnp.maximum(n_steps, 1)
        evals = 1 + res.n_evaluated
        return (
            res.x,
            state,
            {
                **_steps_stats(d, res.sum_accept, res.n_accepted, n_steps, evals, per),
                "mean_path_length": (res.sum_length / per).astype(jnp.float64),
                "sites_moved_per_step": (res.sum_moved / per).astype(jnp.float64),
                "path_scale": scale.astype(jnp.float64),
            },
        )

    return run
