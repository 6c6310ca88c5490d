"""Which flags and values of a model are updated in pairs.

A pair is a ``Bernoulli`` variable ``g`` and a continuous variable ``b`` of the same shape that
the model multiplies entry by entry, ``g * b`` in its graph (a spike-and-slab regression
written ``X @ (g * b)``, a component's weight switched on and off). There a flag that is off
leaves its value with its prior alone and a flag that is on gives it the data's scale, so the
value's conditional scale switches with the flag, and the update pays: no single NUTS mass
matrix suits both scales, and a flag move that keeps the value turns a flag on only when NUTS
leaves the value where the data want it. The rule is the model's structure, not a measurement
at the chain's start (where the start's other values, a noise scale jittered to 3, say, would
decide). The prior form, ``b ~ Normal(0, 0.05 + 1.95 g)``, keeps the value in the likelihood in
both states, with scales the user set; it is not paired: its discrete step moves it well
(``benchmarks.vs_alternatives``), and pair updates there made its sampling three to four times
slower for nothing.
"""

from __future__ import annotations

import pymc as pm
from pytensor.graph.traversal import applys_between
from pytensor.scalar import Cast, Mul
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import BernoulliRV


def _factors(v) -> set:
    """The factors of ``v`` through elementwise products and casts (``v`` itself otherwise)."""
    if v.owner is not None and isinstance(v.owner.op, Elemwise):
        op = v.owner.op.scalar_op
        if isinstance(op, Cast):
            return _factors(v.owner.inputs[0])
        if isinstance(op, Mul):
            return set().union(*(_factors(i) for i in v.owner.inputs))
    return {v}


def _multiplied(model) -> set[frozenset]:
    """The pairs of random variables the model's graph multiplies elementwise."""
    rvs = set(model.basic_RVs)
    outputs = [*model.basic_RVs, *model.potentials, *model.deterministics]
    out = set()
    for node in applys_between(model.free_RVs, outputs):
        if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Mul):
            inputs = _factors(node.outputs[0]) & rvs
            out.update(frozenset((a, b)) for a in inputs for b in inputs if a is not b)
    return out


def find_pairs(model, flags: list[str], shapes: dict[str, tuple]) -> list[tuple[str, str]]:
    """``[(flag, value), ...]`` value-variable names of the model's pairs (module docs), for the
    flag variables named in ``flags``; ``shapes`` the value variables' shapes. Each flag and
    each value is in one pair at most (the first in ``model.free_RVs``' order)."""
    products = _multiplied(model)
    values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}
    continuous = [rv for rv in model.free_RVs if values[rv].dtype not in pm.discrete_types]
    pairs, taken = [], set()
    for g in model.free_RVs:
        if not isinstance(g.owner.op, BernoulliRV) or values[g].name not in flags:
            continue
        for b in continuous:
            same = shapes[values[b].name] == shapes[values[g].name]
            if same and b not in taken and frozenset((g, b)) in products:
                pairs.append((values[g].name, values[b].name))
                taken.add(b)
                break
    return pairs


__all__ = ["find_pairs"]
