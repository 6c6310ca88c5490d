"""The one JAX driver of the whole-model program's discrete kernels (issue #56).

Every discrete kernel of :mod:`pymc_lbp.whole_model` has BlackJAX's shape: a pure
``step(u, state) -> (state, info)``, ``state`` and ``info`` tuples of arrays, ``u`` one step's
input (a row of uniforms, a sweep's uniforms, or what a function of the step's index gives).
Each room's ``jax_steps.py`` builds its step (its pytensor graph converted to JAX) and its
start state; :func:`scan_kernel` runs any of them for a draw's steps and sums what they report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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


__all__ = ["scan_kernel"]
