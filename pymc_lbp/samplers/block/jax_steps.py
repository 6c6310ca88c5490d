"""NeuralBlock's and BlockGibbs' random-scan steps in the compiled whole-model program (issue #25).

The JAX version of :mod:`pymc_lbp.samplers.block.random_scan_graph`: the same step's graph
(:func:`~pymc_lbp.samplers.block.random_scan_graph.random_scan_step_graph`, the body of the
compiled scan, whose numpy reference is
:meth:`~pymc_lbp.samplers.block.step.NeuralBlock.scan_step`) converted to JAX with the
model's other variables read from the chain's values
(:func:`pymc_lbp.whole_model.jaxify.jax_function`) and run by the one JAX driver
(:func:`pymc_lbp.samplers.jax_driver.scan_kernel`). One call
runs a draw's ``steps_per_draw`` steps from a ``(steps, width)`` matrix of uniforms: each picks
a unit uniformly and updates it (an exact block or an uncovered site from its exact
conditional, a motif block by the network's proposal and the MH rule). The entries of ``z``
outside the step (other discrete variables that a motif block conditions on, fixed values) are
read from the chain's values at every draw.

Chain blocks (parameters read from the model at each update) run as ``pm.sample`` runs them:
sweeps over their colour classes (:func:`chain_sweeps_jax`, the graph of
:func:`~pymc_lbp.samplers.block.sweep_graph.chain_sweep_graph`, whose numpy reference is
:func:`~pymc_lbp.samplers.block.reference.colour_update`), a draw's sweeps in one
``scan_kernel``.

Not here (the program refuses them by name, :func:`pymc_lbp.whole_model.discrete_blocks.
program_kind`): chain blocks without colour classes, which ``pm.sample`` updates by numpy
random-scan steps, and BlockGibbs' elimination blocks, drawn by bucket elimination in numpy.
Where ``pm.sample`` would sweep colour classes that the sweep's graph cannot run but the
random scan can, the program runs random-scan steps: another kernel with the same target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pymc_lbp.samplers.block.neural_proposal import NeuralProposal
from pymc_lbp.samplers.block.random_scan_graph import random_scan_step_graph
from pymc_lbp.samplers.block.sweep_graph import chain_sweep_graph
from pymc_lbp.samplers.jax_driver import ProgramSteps, scan_kernel


class ScanRun(NamedTuple):
    """A draw's random-scan steps: the new state and what the step's stats are made of."""

    x: object
    sum_accept: object
    n_accepted: object
    n_evaluated: object
    last_unit: object


def random_scan_jax(step, model, to_jax: Callable, n_steps: int) -> Callable:
    """``run(noise, x, values) -> ScanRun`` for a NeuralBlock or BlockGibbs ``step`` whose
    units the random scan can run (``step.scan_compilable``).

    Parameters
    ----------
    step : NeuralBlock or BlockGibbs
    model : pymc.Model
        ``values`` are its value variables' values, in ``model.value_vars`` order.
    to_jax : callable
        ``(inputs, outputs) -> f(*inputs, *values)``
        (:func:`pymc_lbp.whole_model.jaxify.jax_function` bound to the model).
    n_steps : int
        Random-scan steps per call (``noise`` has this many rows and ``step.scan_width``
        columns; the loop takes its length from ``noise``).
    """
    import jax.numpy as jnp

    units, factors = step.scan_units()
    d = step.target
    net = step.proposal.net if isinstance(step.proposal, NeuralProposal) else None
    # one step's graph in a jax.lax.scan, not the compiled scan's pytensor Scan: a Scan's inner
    # graph is rewritten again at every conversion, a plain graph's rewrites are stored
    inputs, outputs = random_scan_step_graph(
        units, factors, d.rows_graph, step.layout.n_sites, len(step._outside), net
    )
    one_step = to_jax(inputs, outputs)
    logp_at = to_jax([d._x], [d._logp_graph])
    network = [jnp.asarray(a, dtype=jnp.float64) for a in step._scan_network()]
    fixed = jnp.asarray(step._outside_values, dtype=jnp.int64)  # constants; the rest per draw
    position = {v.name: i for i, v in enumerate(model.value_vars)}
    shared = [(k, position[name], pos) for k, name, pos in step._shared_outside]

    def run(noise, x, values) -> ScanRun:
        outside = fixed
        for k, i, pos in shared:  # other steps' variables a motif block conditions on
            outside = outside.at[k].set(jnp.ravel(values[i])[pos].astype(jnp.int64))
        logp = jnp.asarray(logp_at(x, *values)[0], jnp.float64)

        def step(u, state):
            x, logp, accept, accepted, evaluated, unit = one_step(
                u, *state[:2], outside, *network, *values
            )
            return (x, logp, unit), (accept, accepted, evaluated)

        (x, _, last), totals = scan_kernel(step, (x, logp, jnp.int64(0)), noise)
        return ScanRun(x, *totals, last)

    return run


class SweepRun(NamedTuple):
    """A sweep over the colour classes: the new state and what the step's stats are made of."""

    x: object
    sum_accept: object
    n_accepted: object
    n_evaluated: object


def chain_sweeps_jax(step, to_jax: Callable) -> Callable:
    """``run(uniforms, x, values) -> SweepRun`` for a NeuralBlock ``step`` with colour classes
    the sweep graph runs (``step.sweep_compilable``): sweeps over every class in order, in one
    ``scan_kernel``; ``uniforms`` one ``(sweeps, blocks, width)`` array per class (sweep ``i``'s
    rows are what :func:`~pymc_lbp.samplers.block.reference.colour_update` draws
    for that class, in its order). ``n_evaluated`` counts the logp at the start too.

    Parameters
    ----------
    step : NeuralBlock
    to_jax : callable
        As :func:`random_scan_jax` takes it.
    """
    import jax.numpy as jnp

    d = step.target
    net = step.proposal.net if isinstance(step.proposal, NeuralProposal) else None
    colours = step.chain_colours()
    inputs, outputs = chain_sweep_graph(colours, step.layout.n_sites, d.rows_graph, net)
    sweep = to_jax(inputs, outputs)
    logp_at = to_jax([d._x], [d._logp_graph])
    weights = [jnp.asarray(a, dtype=jnp.float64) for a in step.sweep_weights()]

    def run(uniforms, x, values) -> SweepRun:
        def step(us, state):
            x, logp, accept, accepted, evaluated = sweep(*state, *us, *weights, *values)
            return (x, logp), (accept, accepted, evaluated)

        logp = jnp.asarray(logp_at(x, *values)[0], jnp.float64)
        (x, _), (acc, won, evals) = scan_kernel(step, (x, logp), tuple(uniforms))
        return SweepRun(x, acc, won, evals + 1)

    return run


def sweeps_colours(step) -> bool:
    """Whether ``pm.sample`` runs the step's draws as sweeps over colour classes of chain blocks
    (:meth:`~pymc_lbp.samplers.block.step.NeuralBlock.run_steps`) and the sweep's graph can
    run them."""
    colours = getattr(step, "colours", None)
    return (
        colours is not None and step.steps_per_draw % len(step.units) == 0 and step.sweep_compilable
    )


def program_steps(step, model, to_jax: Callable) -> ProgramSteps:
    """NeuralBlock's and BlockGibbs' steps of a draw in the whole-model program:
    ``steps_per_draw`` random-scan steps (:func:`random_scan_jax`), or, where ``pm.sample``
    sweeps colour classes of chain blocks, the same sweeps (:func:`chain_sweeps_jax`); uniforms
    from the draw's key."""
    import jax
    import jax.numpy as jnp

    n_steps = int(step.steps_per_draw)

    def stats(res, evals, block) -> dict:
        return {
            "accept": res.sum_accept / n_steps,
            "n_accepted": jnp.asarray(res.n_accepted).astype(jnp.int64),
            "mh_steps": jnp.int64(n_steps),
            "logp_evals": jnp.asarray(evals).astype(jnp.int64),
            "block": jnp.asarray(block).astype(jnp.int64),
        }

    if sweeps_colours(step):
        n_sweeps = n_steps // len(step.units)
        shapes = [(n_sweeps, c.sites.shape[0], c.uniform_width) for c in step.chain_colours()]
        sweeps = chain_sweeps_jax(step, to_jax)
        last = int(step.colours[-1][-1])

        def run(key, x, values, state, tuning):
            keys = jax.random.split(key, len(shapes))
            uniforms = [
                jax.random.uniform(k, shape, dtype=jnp.float64)
                for k, shape in zip(keys, shapes, strict=True)
            ]
            res = sweeps(uniforms, x, values)
            return res.x, state, stats(res, res.n_evaluated, last)

        return ProgramSteps(run)

    width = int(step.scan_width)
    scan = random_scan_jax(step, model, to_jax, n_steps)

    def run(key, x, values, state, tuning):
        res = scan(jax.random.uniform(key, (n_steps, width), dtype=jnp.float64), x, values)
        return res.x, state, stats(res, 1 + res.n_evaluated, res.last_unit)

    return ProgramSteps(run)


__all__ = [
    "ScanRun",
    "SweepRun",
    "chain_sweeps_jax",
    "program_steps",
    "random_scan_jax",
    "sweeps_colours",
]
