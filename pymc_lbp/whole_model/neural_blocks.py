"""The block samplers' draws in the program: NeuralBlock / BlockGibbs and NeuralMixedBlock.

Each is a :class:`~pymc_lbp.whole_model.program.BlockDraw` made by
:func:`~pymc_lbp.whole_model.discrete_blocks.block_draw`, uniforms from the draw's key:

* NeuralBlock, BlockGibbs (:func:`random_scan_block`): ``steps_per_draw`` random-scan steps
  (:mod:`pymc_lbp.samplers.block.jax_steps`);
* NeuralBlock with colour classes of chain blocks (:func:`chain_sweep_block`): sweeps over the
  classes, as ``pm.sample`` runs them;
* NeuralMixedBlock (:func:`flag_value_block`): ``steps_per_draw`` pair updates
  (:mod:`pymc_lbp.samplers.block.jax_flag_value`), the pairs in a random order per sweep as the
  step orders them in ``pm.sample``. The step moves its continuous values too; NUTS samples them
  as well (every continuous variable is NUTS's in the program), from the values the pair updates
  left, as ``pm.sample(step=[NeuralMixedBlock([b, v]), pm.NUTS([v, ...])])`` does.
"""

from __future__ import annotations

from pymc_lbp.whole_model.program import STAT_DTYPES, BlockDraw


def _block_stats(res, x0, n_steps: int, evals, block, stat_names: tuple) -> dict:
    """A NeuralBlock / BlockGibbs draw's stats (the step's names) from its run ``res`` (``x``,
    ``sum_accept``, ``n_accepted``), ``evals`` model evaluations, ``block`` the last unit."""
    import jax.numpy as jnp

    stats = {
        "accept": res.sum_accept / n_steps,
        "n_accepted": jnp.asarray(res.n_accepted).astype(jnp.int64),
        "mh_steps": jnp.int64(n_steps),
        "sites_changed": jnp.count_nonzero(res.x != x0).astype(jnp.int64),
        "logp_evals": jnp.asarray(evals).astype(jnp.int64),
        "grad_evals": jnp.int64(0),
        "block": jnp.asarray(block).astype(jnp.int64),
    }
    return {k: stats.get(k, jnp.zeros((), STAT_DTYPES[k])) for k in stat_names}


def random_scan_block(step, model, vector, to_jax) -> BlockDraw:
    """NeuralBlock / BlockGibbs: ``steps_per_draw`` random-scan steps per draw
    (:mod:`pymc_lbp.samplers.block.jax_steps`), uniforms from the draw's key."""
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.block.jax_steps import random_scan_jax

    n_steps = int(step.steps_per_draw)
    width = int(step.scan_width)
    run = random_scan_jax(step, model, to_jax, n_steps)
    stat_names = tuple(k for k in STAT_DTYPES if k in step.stats_dtypes_shapes)

    def draw(key, values, state, tuning: bool):
        x0 = vector.get(values)
        noise = jax.random.uniform(key, (n_steps, width), dtype=jnp.float64)
        res = run(noise, x0, values)
        stats = _block_stats(res, x0, n_steps, 1 + res.n_evaluated, res.last_unit, stat_names)
        return vector.put(values, res.x), state, stats

    return BlockDraw(step, draw, tuple, lambda state: state, stat_names)


def chain_sweep_block(step, model, vector, to_jax) -> BlockDraw:
    """NeuralBlock with colour classes: ``steps_per_draw / units`` sweeps over the classes per
    draw (:func:`pymc_lbp.samplers.block.jax_steps.chain_sweeps_jax`), as ``pm.sample`` runs
    them, uniforms from the draw's key."""
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.block.jax_steps import chain_sweeps_jax

    n_steps = int(step.steps_per_draw)
    n_sweeps = n_steps // len(step.units)
    shapes = [(n_sweeps, c.sites.shape[0], c.uniform_width) for c in step.chain_colours()]
    run = chain_sweeps_jax(step, to_jax)
    last = int(step.colours[-1][-1])
    stat_names = tuple(k for k in STAT_DTYPES if k in step.stats_dtypes_shapes)

    def draw(key, values, state, tuning: bool):
        x0 = vector.get(values)
        keys = jax.random.split(key, len(shapes))
        uniforms = [
            jax.random.uniform(k, shape, dtype=jnp.float64)
            for k, shape in zip(keys, shapes, strict=True)
        ]
        res = run(uniforms, x0, values)
        stats = _block_stats(res, x0, n_steps, res.n_evaluated, last, stat_names)
        return vector.put(values, res.x), state, stats

    return BlockDraw(step, draw, tuple, lambda state: state, stat_names)


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


def flag_value_block(step, model, to_jax) -> BlockDraw:
    """NeuralMixedBlock: ``steps_per_draw`` pair updates per draw
    (:mod:`pymc_lbp.samplers.block.jax_flag_value`), the order and uniforms from the draw's
    key: per update a component's, the flag's and the accept's uniforms and a standard
    normal."""
    import jax
    import jax.numpy as jnp

    from pymc_lbp.samplers.block.jax_flag_value import pair_order, pair_updates_jax

    vector = PairVector(step, model)
    n_steps, n_pairs, G = int(step.steps_per_draw), int(step.n_pairs), int(step.grid_points)
    run = pair_updates_jax(step, to_jax)
    stat_names = tuple(k for k in STAT_DTYPES if k in step.stats_dtypes_shapes)

    def draw(key, values, state, tuning: bool):
        q0 = vector.get(values)
        k_order, k_uniform, k_normal = jax.random.split(key, 3)
        uniforms = jax.random.uniform(k_uniform, (n_steps, 3), dtype=jnp.float64)
        normals = jax.random.normal(k_normal, (n_steps,), dtype=jnp.float64)
        noise = jnp.column_stack([uniforms[:, 0], uniforms[:, 1], normals, uniforms[:, 2]])
        res = run(pair_order(k_order, n_pairs, n_steps), noise, q0, values)
        stats = {
            "accept": res.sum_accept / n_steps,
            "n_accepted": res.n_accepted,
            "mh_steps": jnp.int64(n_steps),
            "sites_changed": jnp.count_nonzero(res.q != q0).astype(jnp.int64),
            "flags_on": jnp.count_nonzero(res.q[:n_pairs] != 0).astype(jnp.int64),
            "logp_evals": jnp.int64(1 + n_steps * (2 * G + 1)),
            "grad_evals": jnp.int64(0),
        }
        return vector.put(values, res.q), state, {k: stats[k] for k in stat_names}

    return BlockDraw(step, draw, tuple, lambda state: state, stat_names)


__all__ = ["PairVector", "chain_sweep_block", "flag_value_block", "random_scan_block"]
