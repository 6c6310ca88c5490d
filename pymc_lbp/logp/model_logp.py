"""The model's logp graph, built once per model state: ``model.logp(...)`` remembered.

Building a step reads the model's logp several times: its differences (the summed logp), the
analysis of which terms touch which sites (the elementwise terms, twice), the relaxation for
gradients (the other variables' terms). ``pm.Model.logp`` builds a new graph on every call
(each variable's logp derived from its distribution, the transforms' Jacobians), and our
steps called it again and again on the same model, most of the calls repeats (counted in
docs/test_suite.md). Callers never change the graph they get (they clone it with their
replacements, or compile it), so one graph serves them all.

A graph is kept per model (weakly: the cache goes with the model) and per *state* of the model:
its free and observed variables, potentials, value variables and transforms, by identity. A
variable added to the model (or a transform changed) is a new state, whose graphs are built
anew.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import pymc as pm
from pytensor.graph.basic import Variable

__all__ = ["model_logp"]

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _state(model: pm.Model) -> tuple:
    """What the model's logp graphs are built from, as a tuple of the objects themselves (held,
    so that no id can be reused while the entry lives)."""
    return (
        tuple(model.free_RVs),
        tuple(model.observed_RVs),
        tuple(model.potentials),
        tuple(model.rvs_to_values.items()),
        tuple(model.rvs_to_transforms.items()),
    )


def _same(a: tuple, b: tuple) -> bool:
    """Element by element identity of two nested tuples of graph objects."""
    return len(a) == len(b) and all(
        (_same(x, y) if isinstance(x, tuple) and isinstance(y, tuple) else x is y)
        for x, y in zip(a, b, strict=True)
    )


def model_logp(
    model: pm.Model,
    vars: Sequence[Variable] | None = None,  # noqa: A002 - PyMC's name
    *,
    sum: bool = True,  # noqa: A002 - PyMC's name
) -> Any:
    """``model.logp(vars=vars, sum=sum)`` (Jacobians included), the graph built the last time
    for the same arguments when the model has not changed since.

    Parameters
    ----------
    model
        The PyMC model.
    vars
        The variables (random variables or potentials) whose terms are wanted; None for all.
    sum
        One summed scalar (True) or a list of one term per variable.

    Returns
    -------
    Variable or list of Variable
        What ``model.logp`` returns: the scalar logp, or one term per variable (a new list each
        call; the variables in it are shared).
    """
    state = _state(model)
    args = (None if vars is None else tuple(id(v) for v in vars), bool(sum))
    with _LOCK:
        entry = _CACHE.get(model)
        if entry is None or not _same(entry[0], state):
            entry = _CACHE[model] = (state, {})
        found = entry[1].get(args)
    if found is None:
        graph = model.logp(vars=None if vars is None else list(vars), sum=sum)
        kept_vars = None if vars is None else tuple(vars)  # keep the ids in the key alive
        found = (graph, kept_vars)
        with _LOCK:
            entry[1][args] = found
    graph = found[0]
    return list(graph) if isinstance(graph, list) else graph
