"""Which flags and values of a model are updated in pairs, and whether it pays.

A pair is a ``Bernoulli`` variable ``g`` and a continuous variable ``b`` with the same shape
that the model joins entry by entry: ``g`` among the parameters of ``b``'s distribution (the
prior form, ``b ~ Normal(0, 0.05 + 1.95 g)``), or ``g * b`` in the model's graph (the product
form, ``X @ (g * b)``). The update is exact for any pairing; it pays where the value's
conditional scale differs between the flag's states, since then no single NUTS mass matrix
suits both and a flag move that keeps the value turns a flag on only when NUTS leaves the
value where the other state needs it. :func:`use_pairs` measures that at the chain's start.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pymc as pm
from pytensor.graph.traversal import ancestors, applys_between
from pytensor.scalar import Cast, Mul
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import BernoulliRV

from pymc_lbp.samplers.laplace_pairs.reference import conditional

SCALE_RATIO = 4.0
"""Pairs are updated where the value's conditional standard deviations in the flag's two
states differ by at least this factor (the median over the pairs at the chain's start). A
diagonal mass matrix can serve scales a few times apart; the product-form spike-and-slab's
differ 15-25x, the prior form's (``Normal(0, 0.05 + 1.95 g)``) about 1.5x, where the flag
moves and NUTS alone mix well."""


def _bare(v):
    """``v`` without casts."""
    while v.owner is not None and isinstance(v.owner.op, Elemwise):
        if not isinstance(v.owner.op.scalar_op, Cast):
            break
        v = v.owner.inputs[0]
    return v


def _multiplied(model) -> set[frozenset]:
    """The pairs of random variables an elementwise product in the model's graph takes."""
    rvs = set(model.basic_RVs)
    outputs = [*model.basic_RVs, *model.potentials, *model.deterministics]
    out = set()
    for node in applys_between(model.free_RVs, outputs):
        if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Mul):
            inputs = {_bare(i) for i in node.inputs} & rvs
            if len(inputs) >= 2:
                out.update(frozenset((a, b)) for a in inputs for b in inputs if a is not b)
    return out


def find_pairs(model, flags: list[str], shapes: dict[str, tuple]) -> list[tuple[str, str]]:
    """``[(flag, value), ...]`` value-variable names of the model's pairs (module docs), for the
    flag variables named in ``flags``; ``shapes`` the value variables' shapes. Each flag and
    each value is in one pair at most (the product form first, then the order of
    ``model.free_RVs``)."""
    products = _multiplied(model)
    values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}
    continuous = [rv for rv in model.free_RVs if values[rv].dtype not in pm.discrete_types]
    pairs, taken = [], set()
    for g in model.free_RVs:
        if not isinstance(g.owner.op, BernoulliRV) or values[g].name not in flags:
            continue
        same = [b for b in continuous if shapes[values[b].name] == shapes[values[g].name]]
        product = [b for b in same if frozenset((g, b)) in products]
        prior = [b for b in same if g in set(ancestors(b.owner.inputs))]
        for b in (*product, *prior):
            if b not in taken:
                pairs.append((values[g].name, values[b].name))
                taken.add(b)
                break
    return pairs


def scale_ratios(logp_and_gradient: Callable, flags: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per pair, the larger over the smaller of the Laplace standard deviations of the value's
    conditional in the flag's two states, at ``(flags, values)``; NaN where one cannot be
    formed."""
    out = []
    for j in range(flags.size):
        a = conditional(logp_and_gradient, flags, values, j, 0)
        b = conditional(logp_and_gradient, flags, values, j, 1)
        out.append(max(a.sd, b.sd) / min(a.sd, b.sd) if a.ok and b.ok else np.nan)
    return np.asarray(out)


def use_pairs(ratios: np.ndarray) -> bool:
    """Whether the pairs are updated: the median of :func:`scale_ratios` (pairs whose
    approximation cannot be formed count as 1) is at least :data:`SCALE_RATIO`."""
    return bool(np.median(np.where(np.isnan(ratios), 1.0, ratios)) >= SCALE_RATIO)


__all__ = ["SCALE_RATIO", "find_pairs", "scale_ratios", "use_pairs"]
