"""Our pytensor graphs as JAX functions of the whole model's values.

A step's graphs read the model's other variables through the step's shared variables
(:func:`pymc.make_shared_replacements`); in the compiled program every value lives in the chain's
state instead, so each such shared variable is replaced by the model's value variable of the same
name and the graph becomes a function of its own inputs followed by every value variable of the
model, in ``model.value_vars`` order. The conversion itself is PyMC's
(:func:`pymc.sampling.jax.get_jaxified_graph`: JAX rewrites, data held as constants).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from pytensor.graph.replace import clone_replace

from pymc_lbp.compiling import _Uncacheable, graph_key

CACHE_SIZE = 64
"""Converted graphs kept per process: a graph equal to one converted before (as
:func:`pymc_lbp.compiling.pm_compile` compares them) reuses its JAX function, so sampling a
model again skips PyTensor's JAX rewrites (seconds per graph)."""

_CACHE: OrderedDict = OrderedDict()


def model_value_replacements(model, steps: Sequence) -> dict:
    """``{shared variable: value variable}`` for the shared copies the steps hold of the model's
    values."""
    by_name = {v.name: v for v in model.value_vars}
    out = {}
    for step in steps:
        for name, shared in getattr(step, "shared", {}).items():
            if name in by_name:
                out[shared] = by_name[name]
    return out


def jax_function(
    inputs: Sequence, outputs: Sequence, model, replacements: dict
) -> Callable[..., list]:
    """``f(*inputs, *values) -> list of outputs`` as a JAX function, ``values`` the model's value
    variables in ``model.value_vars`` order."""
    from pymc.sampling.jax import get_jaxified_graph

    outs = clone_replace(list(outputs), replace=replacements)
    all_inputs = [*inputs, *model.value_vars]
    keep: list = []
    try:
        key = graph_key(all_inputs, outs, {"backend": "jax"}, keep)
    except (_Uncacheable, TypeError):
        return get_jaxified_graph(inputs=all_inputs, outputs=outs)
    entry = _CACHE.get(key)
    if entry is not None:
        _CACHE.move_to_end(key)
        return entry[0]
    fn = get_jaxified_graph(inputs=all_inputs, outputs=outs)
    _CACHE[key] = (fn, keep)  # keep: what the key compares by identity stays alive
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return fn
