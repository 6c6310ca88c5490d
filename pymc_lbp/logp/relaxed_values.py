"""The vocabulary of the relaxed logp (:mod:`pymc_lbp.logp.relax`): :data:`LOG_FLOOR`,
:class:`NotRelaxableError`, the groups of pytensor ops the relaxation treats alike, and how a
relaxed graph variable is represented (``_Rep``, ``_Table``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from pytensor.scalar import basic as ps
from pytensor.tensor.shape import Shape, Shape_i
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    IncSubtensor,
)

LOG_FLOOR = -1e30
"""Floor for ``log 0`` where it meets a relaxed weight; ``exp(LOG_FLOOR) == 0`` in float64."""


class NotRelaxableError(ValueError):
    """The model's logp uses a discrete value in a way that has no differentiable extension here."""


_COMPARISONS = (ps.EQ, ps.NEQ, ps.LT, ps.GT, ps.LE, ps.GE)
_NON_DIFFERENTIABLE = (
    ps.Floor,
    ps.Ceil,
    ps.Trunc,
    ps.RoundHalfToEven,
    ps.RoundHalfAwayFromZero,
    ps.Sign,
    ps.Mod,
    ps.IntDiv,
    ps.BinaryBitOp,
    ps.Invert,
)
_GUARDS = (ps.IsNan, ps.IsInf)  # constant on finite values: piecewise, never reported
_SHAPE_OPS = (Shape, Shape_i)  # read only the (fixed) shape of their input
_INC_SUBTENSOR = (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)


@dataclass
class _Table:
    """Lazy one-hot contraction: value = sum over the K axes of ``W * G``.

    ``G`` has shape ``S + Kdims + rest`` and does not depend on the block; ``W`` (product of
    one-hot weights) broadcasts to ``S + Kdims``.
    """

    G: Variable
    W: Variable
    n_batch: int
    n_k: int
    key: tuple

    def materialize(self) -> Variable:
        n_rest = self.G.ndim - self.n_batch - self.n_k
        w = self.W
        if n_rest:
            w = pt.shape_padright(w, n_rest)
        g = self.G
        if g.dtype.startswith("float"):
            g = pt.maximum(g, LOG_FLOOR)
        axes = tuple(range(self.n_batch, self.n_batch + self.n_k))
        return pt.sum(w * g, axis=axes)


@dataclass
class _Rep:
    """Relaxed representation of a graph variable that depends on the block."""

    value: Variable | None = None  # float tensor equal to the original on discrete points
    onehot: Variable | None = None  # (..., K) one-hot, for values that are category indices
    table: _Table | None = None  # lazy contraction (value is materialised on demand)
    indicator: bool = False  # value is a relaxed 0/1 indicator (from eq, lt, ...)
    piecewise: bool = False  # indicator kept piecewise constant (comparison of an integer)
    join: tuple | None = None  # lazy join: (axis, parts), parts are _Rep or independent vars

    def get_value(self) -> Variable:
        if self.value is None:
            if self.join is not None:
                axis, parts = self.join
                values = [p.get_value() if isinstance(p, _Rep) else p for p in parts]
                self.value = pt.join(axis, *values)
            else:
                assert self.table is not None
                self.value = self.table.materialize()
        return self.value


__all__ = ["LOG_FLOOR", "NotRelaxableError"]
