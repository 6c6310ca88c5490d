"""Our pytensor graphs as JAX functions of the whole model's values.

A step's graphs read the model's other variables through the step's shared variables
(:func:`pymc.make_shared_replacements`); in the compiled program every value lives in the chain's
state instead, so each such shared variable is replaced by the model's value variable of the same
name and the graph becomes a function of its own inputs followed by every value variable of the
model, in ``model.value_vars`` order. The conversion itself is PyMC's
(:func:`pymc.sampling.jax.get_jaxified_graph`: JAX rewrites, data held as constants).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytensor.graph.replace import clone_replace


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
    return get_jaxified_graph(inputs=[*inputs, *model.value_vars], outputs=outs)
