"""The one JAX driver of the whole-model program's discrete kernels (issue #56).

Every discrete kernel of :mod:`pymc_lbp.whole_model` has BlackJAX's shape: a pure
``step(u, state) -> (state, info)``, ``state`` and ``info`` tuples of arrays, ``u`` one step's
input (a row of uniforms, a sweep's uniforms, or what a function of the step's index gives).
Each room's ``jax_steps.py`` builds its step (its pytensor graph converted to JAX) and its
start state; :func:`scan_kernel` runs any of them for a draw's steps and sums what they report.
A step class gives the program its part of a draw as :class:`ProgramSteps` (its
``program_steps(model, to_jax)``, from its room's ``jax_steps.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple


def _same(value):
    return value


class ProgramSteps(NamedTuple):
    """A step's steps of a draw in the whole-model program (:mod:`pymc_lbp.whole_model`), with the
    state it carries from draw to draw (its adaptation's: each chain its own)."""

    run: Callable | None  # (key, x, values, state, tuning) -> (x, state, stats); None: no steps
    init: Callable = tuple  # () -> state at a chain's start
    freeze: Callable = _same  # state -> state at the end of warmup
    finish: Callable = _same  # stats -> stats on the recorded numpy arrays
    vector: Any = None  # get(values) -> x, put(values, x): None for the block's int64 vector


def steps_stats(differences, sum_accept, n_accepted, n_steps, evals, per=None) -> dict:
    """The stats of a draw's ``n_steps`` steps, as :meth:`DiscreteStep.astep
    <pymc_lbp.step_methods.base.DiscreteStep.astep>` records them: their mean acceptance (over
    ``per`` steps, default ``n_steps``), the accepted ones, and the ``evals`` evaluations of
    ``differences`` in logp and gradient evaluations."""
    import jax.numpy as jnp

    return {
        "accept": sum_accept / (n_steps if per is None else per),
        "n_accepted": n_accepted.astype(jnp.int64),
        "mh_steps": jnp.asarray(n_steps, dtype=jnp.int64),
        "logp_evals": (evals * differences.logp_evals_per_call).astype(jnp.int64),
        "grad_evals": (evals * differences.grad_evals_per_call).astype(jnp.int64),
    }


def scan_kernel(step: Callable, state, inputs, n_steps: Any = None) -> tuple[Any, Any]:
    """``(state, info)`` after ``step(u, state) -> (state, info)`` once per input, ``info`` the
    sum over the steps of every field the steps report (float fields as float64, integer and
    boolean ones as int64, summed in step order from zero).

    Parameters
    ----------
    step : callable
        The kernel.
    state : pytree of arrays
        The state before the first step.
    inputs : pytree of arrays, or callable
        The steps' inputs stacked on the first axis (one step per row, in ``jax.lax.scan``), or
        ``i -> input`` of step ``i`` (a key folded with ``i``, say), with ``n_steps`` (which
        may be traced: a number of steps that follows a tuned quantity; ``jax.lax.fori_loop``).
    n_steps : int or traced int, optional
        The number of steps, with a callable ``inputs``.
    """
    import jax
    import jax.numpy as jnp

    tree_map = jax.tree_util.tree_map
    first = inputs(jnp.int64(0)) if callable(inputs) else tree_map(lambda a: a[0], inputs)
    shapes = jax.eval_shape(lambda u, s: step(u, s)[1], first, state)

    def zero(s):
        floating = jnp.issubdtype(s.dtype, jnp.floating)
        return jnp.zeros(s.shape, jnp.float64 if floating else jnp.int64)

    def body(carry, u):
        state, totals = carry
        state, info = step(u, state)
        return state, tree_map(lambda t, v: t + v.astype(t.dtype), totals, info)

    start = (state, tree_map(zero, shapes))
    if callable(inputs):
        if n_steps is None:
            raise ValueError("scan_kernel: inputs given as a function of the step need n_steps")
        return jax.lax.fori_loop(0, n_steps, lambda i, carry: body(carry, inputs(i)), start)
    return jax.lax.scan(lambda carry, u: (body(carry, u), None), start, inputs)[0]


__all__ = ["ProgramSteps", "scan_kernel", "steps_stats"]
