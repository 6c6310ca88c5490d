"""A discrete step's draw as a JAX function of the chain's values.

:func:`block_draw` turns a step built on the model into a
:class:`~pymc_lbp.whole_model.program.BlockDraw`: ``draw(key, values, state, tuning) -> (values,
state, stats)``, what the step's ``astep`` makes, from the JAX version of its algorithm, which
the step class gives as ``step.program_steps(model, to_jax)``
(:class:`~pymc_lbp.samplers.jax_driver.ProgramSteps`, from its room's ``jax_steps.py``, built
from the pytensor graphs its compiled kernels are made of, converted by
:func:`pymc_lbp.whole_model.jaxify.jax_function`), with uniforms from ``key`` instead of the
step's ``rng``, then one move per integer site (:mod:`pymc_lbp.samplers.integer.jax_steps`).
What each step class runs in the program, and what is refused, is in docs/whole_model.md.

The jumps' offset exponent ``J`` is the one the step starts the chains with (the largest over
their starts); ``pm.sample`` may grow it during tuning, the compiled program keeps it (a jump
reaches ``+-2^J``, ``J >= 10``; the kernel is exact for any ``J``).

:func:`pair_blocks` makes, for ``Bernoulli`` flags that the model multiplies by a continuous
value and no step of the user's takes (:mod:`pymc_lbp.samplers.laplace_pairs`), the blocks of
joint pair updates, which move those flags instead of a default step.

Steps whose transitions are not in the program yet raise :class:`NotInProgramError` naming the
step; nothing falls back to another sampler.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import NamedTuple

import numpy as np
import pytensor

from pymc_lbp.whole_model.jaxify import jax_function
from pymc_lbp.whole_model.program import STAT_DTYPES, BlockDraw

_log = logging.getLogger("pymc_lbp")


class NotInProgramError(NotImplementedError):
    """A step whose transitions the compiled program cannot run."""


def program_kind(step) -> str:
    """The JAX version that runs ``step`` in the program (``"single_site"``, ``"path"``,
    ``"self_balancing"``, ``"random_scan"``, ``"chain_sweep"``, ``"flag_value"``); a
    :class:`NotInProgramError` naming the step otherwise (checked before anything is
    compiled). The kind is the step class's own ``jax_kind``, set in its room
    (``samplers/<algorithm>/step.py``) beside its ``jax_steps.py``; a subclass runs in the
    program only where it declares one (its draws may differ from its parent's)."""
    from pymc_lbp.samplers.block.jax_steps import sweeps_colours

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
    if kind == "random_scan" and sweeps_colours(step):
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

    program_kind(step)
    to_jax = partial(jax_function, model=model, replacements=replacements)
    part = step.program_steps(model, to_jax)
    vector = part.vector if part.vector is not None else _BlockVector(step, model)
    d = getattr(step, "differences", None)
    jumps_run = None
    moves = getattr(step, "integer_moves", None)
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
        x, ran = x0, {}
        if part.run is not None:
            x, state, ran = part.run(k_steps, x, values, state, tuning)
            stats.update(ran)
        if jumps_run is not None:
            run = jumps_run(k_jumps, x, vector.put(values, x))
            x = run.x
            stats["integer_accept"] = run.sum_accept / n_moves
            stats["integer_jump_size"] = (run.sum_distance / n_moves).astype(jnp.float64)
            stats["logp_evals"] = stats["logp_evals"] + jump_evals
            if "accept" not in ran:  # no steps of its own: the jumps' acceptance
                stats["accept"] = run.sum_accept / n_moves
                stats["n_accepted"] = run.n_accepted.astype(jnp.int64)
        stats["sites_changed"] = jnp.count_nonzero(x != x0).astype(jnp.int64)
        stats["exact_differences"] = jnp.bool_(d is not None and d.kind == "exact")
        # a stat the draw did not make (a draw without steps: path length, loss) is a zero of
        # its dtype, as pm.sample records it; the step's own extras (its learned parameters)
        # go to its finish
        kept = {k: stats.get(k, jnp.zeros((), STAT_DTYPES[k])) for k in stat_names}
        kept.update({k: v for k, v in ran.items() if k not in STAT_DTYPES})
        return vector.put(values, x), state, kept

    return BlockDraw(step, draw, part.init, part.freeze, stat_names, part.finish)


class LaplacePairs(NamedTuple):
    """The block of pair updates of the flag and value variables named (its
    :attr:`~pymc_lbp.whole_model.program.BlockDraw.step`)."""

    flag: str
    value: str


def pair_blocks(model, pairs: list[tuple[str, str]]) -> list[BlockDraw]:
    """The pair-update blocks (:mod:`pymc_lbp.samplers.laplace_pairs`) of ``pairs``, (flag,
    value) value-variable names (:func:`~pymc_lbp.samplers.laplace_pairs.finding.find_pairs`),
    each logged (INFO)."""
    from pymc_lbp.logp.model_logp import model_logp
    from pymc_lbp.samplers.laplace_pairs.jax_steps import STAT_NAMES, pair_draw

    names = [v.name for v in model.value_vars]
    blocks = []
    for flag, value in pairs:
        _log.info(
            "pymc_lbp.sample: %s and %s updated in pairs (the model multiplies them entry by "
            "entry; docs/whole_model.md)",
            flag,
            value,
        )
        positions = (names.index(flag), names.index(value))
        logp = model_logp(model)
        gradient = pytensor.grad(logp, model.value_vars[positions[1]])
        draw = pair_draw(positions, jax_function([], [logp, gradient], model, {}))
        blocks.append(BlockDraw(LaplacePairs(flag, value), draw, tuple, lambda s: s, STAT_NAMES))
    return blocks
