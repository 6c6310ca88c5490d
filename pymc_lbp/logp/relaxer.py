"""The rules of the relaxation: ``_Relaxer`` rewrites a logp graph node by node into its
differentiable (multilinear) extension (see :mod:`pymc_lbp.logp.relax` for the rules in words).

Sections of ``_Relaxer``: the entry point (``relax``, ``value``) and dispatch; elementwise ops
(comparisons, ``switch``, logical ops, lazy one-hot tables); indexing by discrete values;
structural ops (reshape, dimshuffle, join); ``set_subtensor``/``inc_subtensor``; everything else.
The indexing, structural and ``set_subtensor``/``inc_subtensor`` rules are the mixin
:class:`pymc_lbp.logp.relaxer_indexing._IndexingRules`.
"""

from __future__ import annotations

import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from pytensor.graph.traversal import ancestors
from pytensor.raise_op import CheckAndRaise
from pytensor.scalar import basic as ps
from pytensor.tensor.basic import Alloc, Join, MakeVector, ScalarFromTensor, TensorFromScalar
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape, SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedSubtensor,
    AdvancedSubtensor1,
    Subtensor,
)

from pymc_lbp.logp.relaxed_values import (
    _COMPARISONS,
    _GUARDS,
    _INC_SUBTENSOR,
    _NON_DIFFERENTIABLE,
    _SHAPE_OPS,
    LOG_FLOOR,
    NotRelaxableError,
    _Rep,
    _Table,
)
from pymc_lbp.logp.relaxer_indexing import _IndexingRules


class _Relaxer(_IndexingRules):
    def __init__(self, leaves: dict[Variable, _Rep], n_categories: dict[Variable, int]):
        self.memo: dict[Variable, _Rep | None] = dict(leaves)
        self.block_vars = set(leaves)
        self.n_categories = n_categories
        self.piecewise: list[str] = []
        self._w_cache: dict[tuple, Variable] = {}

    # -- entry point -------------------------------------------------------------------------
    def relax(self, var: Variable) -> _Rep | None:
        """Relaxed representation of ``var``; ``None`` if it does not depend on the block.

        "Depends" means on the block's *values*: shapes of block-dependent tensors are fixed
        (the block's shapes do not change while sampling), so ``Shape``/``Shape_i`` and the shape
        operand of ``fill`` (``ones_like``, ``zeros_like``) are value-independent, and integer
        graphs built on them (``roll``'s shift modulo a length, ``x.size``, ``arange(n)``,
        ``alloc`` sizes) are constants of the relaxation. Their graphs still read the block's
        value variables; :func:`relaxed_logp` replaces those by constants of the same shape.
        """
        if var in self.memo:
            return self.memo[var]
        node = var.owner
        if node is None:
            self.memo[var] = None
            return None
        op = node.op
        if isinstance(op, CheckAndRaise | SpecifyShape):
            rep = self.relax(node.inputs[0])
            if isinstance(op, SpecifyShape) and any(self.relax(i) for i in node.inputs[1:]):
                raise self._fail(node, "a discrete value determines a shape")
            self.memo[var] = rep
            return rep
        if isinstance(op, Elemwise) and isinstance(op.scalar_op, ps.Second):
            # fill(x, v): v broadcast to x's shape; x's values are not read
            rep = self.relax(node.inputs[1])
            if rep is not None:
                rep = _Rep(value=pt.second(node.inputs[0], rep.get_value()))
            self.memo[var] = rep
            return rep
        reps = [] if isinstance(op, _SHAPE_OPS) else [self.relax(inp) for inp in node.inputs]
        if all(r is None for r in reps):
            for out in node.outputs:
                self.memo[out] = None
            return None
        outs = self._relax_node(node, reps)
        for out, rep in zip(node.outputs, outs, strict=True):
            self.memo[out] = rep
        return self.memo[var]

    def value(self, var: Variable) -> Variable:
        """Float relaxed value of ``var`` (the original if independent)."""
        rep = self.relax(var)
        return var if rep is None else rep.get_value()

    # -- dispatch ----------------------------------------------------------------------------
    def _relax_node(self, node, reps: list[_Rep | None]) -> list[_Rep]:
        op = node.op
        if isinstance(op, Elemwise):
            return [self._elemwise(node, reps)]
        if isinstance(op, AdvancedSubtensor1 | AdvancedSubtensor | Subtensor):
            return [self._indexing(node, reps)]
        if isinstance(op, DimShuffle | Reshape | Join | MakeVector):
            return [self._structural(node, reps)]
        if isinstance(op, _INC_SUBTENSOR):
            return [self._inc_subtensor(node, reps)]
        return self._generic(node, reps)

    def _fail(self, node, why: str) -> NotRelaxableError:
        names = sorted({f"`{v.name}`" for v in ancestors(node.inputs) if v in self.block_vars})
        on = f" of block variable(s) {', '.join(names)}" if names else ""
        return NotRelaxableError(
            f"Cannot build a differentiable extension of the model's logp: {why} "
            f"(operation {node.op}{on}, output `{node.outputs[0]}`). Use exact neighbour "
            "differences (differences='exact') for this model."
        )

    # -- elementwise -------------------------------------------------------------------------
    def _elemwise(self, node, reps) -> _Rep:
        scalar_op = node.op.scalar_op
        dep = [i for i, r in enumerate(reps) if r is not None]

        if isinstance(scalar_op, ps.Cast):
            rep = reps[0]
            if node.outputs[0].dtype.startswith(("int", "uint", "bool")):
                return rep  # integer casts keep the relaxed value and its one-hot
            return _Rep(value=pt.cast(rep.get_value(), node.outputs[0].dtype), onehot=rep.onehot)

        # A lazy join with scalar operands: apply the function to each joined part.
        if (
            len(dep) == 1
            and reps[dep[0]].join is not None
            and reps[dep[0]].value is None
            and all(inp.ndim == 0 for k, inp in enumerate(node.inputs) if k != dep[0])
        ):
            return self._elemwise_on_join(node, dep[0], reps[dep[0]])

        # One lazy table with independent operands: apply the function to the table itself.
        tables = [reps[i].table for i in dep]
        if all(t is not None for t in tables) and len({t.key for t in tables}) == 1:
            return self._elemwise_on_tables(node, reps, tables[0])

        if isinstance(scalar_op, _COMPARISONS):
            return self._comparison(node, reps)
        if isinstance(scalar_op, ps.Switch):
            return self._switch(node, reps)
        if isinstance(scalar_op, ps.AND | ps.OR | ps.Invert | ps.XOR) and all(
            reps[i].indicator or self._is_binary(reps[i]) for i in dep
        ):
            return self._logical(node, reps)
        if isinstance(scalar_op, _GUARDS):
            # isnan/isinf (e.g. logsumexp's guard of its max): constant on finite values
            out = node.op(self.value(node.inputs[0]))
            return _Rep(value=pt.cast(out, "float64"), indicator=True, piecewise=True)
        if isinstance(scalar_op, _NON_DIFFERENTIABLE):
            onehots = {id(reps[i].onehot): reps[i].onehot for i in dep}
            if len(onehots) == 1 and None not in [reps[i].onehot for i in dep]:
                # a function of one bounded value (z // 2, z % 3, floor of a category):
                # tabulated over its categories, f(z) = sum_k O_k f(k), exactly multilinear
                (O,) = onehots.values()
                return self._elemwise_on_tables(node, reps, self._onehot_table(O), tabulate=True)
            raise self._fail(node, "a non-differentiable function of a discrete value")
        inputs = [self.value(inp) for inp in node.inputs]
        out = node.op(*inputs)
        if out.dtype == "bool":
            out = pt.cast(out, "float64")
        if not out.dtype.startswith("float"):
            raise self._fail(node, f"the relaxed value would have integer dtype {out.dtype}")
        if isinstance(scalar_op, ps.Mul) and all(reps[i].indicator for i in dep):
            # a product of indicators (and independent factors) is an indicator
            independent_bool = all(
                r is not None or inp.dtype == "bool"
                for inp, r in zip(node.inputs, reps, strict=True)
            )
            if independent_bool:
                piecewise = any(reps[i].piecewise for i in dep)
                return _Rep(value=out, indicator=True, piecewise=piecewise)
        return _Rep(value=out)

    def _elemwise_on_join(self, node, k: int, rep: _Rep) -> _Rep:
        """``f(join(a, b), c) = join(f(a, c), f(b, c))`` for scalar ``c``: keeps parts lazy."""
        axis, parts = rep.join
        new_parts = []
        for part in parts:
            if isinstance(part, _Rep) and part.table is not None and part.value is None:
                new_reps = [part if j == k else None for j in range(len(node.inputs))]
                new_parts.append(self._elemwise_on_tables(node, new_reps, part.table))
                continue
            args = list(node.inputs)
            args[k] = part.get_value() if isinstance(part, _Rep) else part
            out = node.op(*args)
            new_parts.append(_Rep(value=out) if isinstance(part, _Rep) else out)
        return _Rep(join=(axis, new_parts))

    def _onehot_table(self, O: Variable) -> _Table:
        """The value of a one-hot variable as a lazy table ``sum_k O_k k``."""
        n_b = O.ndim - 1
        cats = pt.shape_padleft(pt.arange(O.shape[-1]), n_b)
        return _Table(cats, O, n_b, 1, ("onehot", id(O)))

    def _elemwise_on_tables(self, node, reps, table: _Table, tabulate: bool = False) -> _Rep:
        out_ndim = node.outputs[0].ndim
        n_rest = out_ndim - table.n_batch
        args = []
        for inp, rep in zip(node.inputs, reps, strict=True):
            if rep is not None:
                args.append(table.G if tabulate else rep.table.G)
                continue
            # align an independent operand with G: pad to the output rank, insert the K axes
            x = pt.as_tensor_variable(inp)
            if x.ndim <= n_rest:
                args.append(x)
            else:
                x = pt.shape_padleft(x, out_ndim - x.ndim)
                order = (
                    list(range(table.n_batch))
                    + ["x"] * table.n_k
                    + list(range(table.n_batch, out_ndim))
                )
                args.append(x.dimshuffle(order))
        G = node.op(*args)
        return _Rep(table=_Table(G, table.W, table.n_batch, table.n_k, table.key))

    def _is_binary(self, rep: _Rep) -> bool:
        return rep.onehot is not None and rep.onehot.type.shape[-1] == 2

    def _comparison(self, node, reps) -> _Rep:
        a, b = node.inputs
        ra, rb = reps
        op = node.op
        if ra is not None and ra.onehot is None or rb is not None and rb.onehot is None:
            # unbounded integer compared: keep piecewise constant (e.g. support checks)
            self.piecewise.append(str(node.outputs[0]))
            out = op(self.value(a), self.value(b))
            return _Rep(value=pt.cast(out, "float64"), indicator=True, piecewise=True)
        if ra is not None and rb is not None:
            Oa, Ob = ra.onehot, rb.onehot
            ka, kb = pt.arange(Oa.shape[-1]), pt.arange(Ob.shape[-1])
            table = pt.cast(op(ka[:, None], kb[None, :]), "float64")
            val = pt.sum(Oa[..., :, None] * Ob[..., None, :] * table, axis=(-2, -1))
        else:
            # one bounded value against a block-independent operand: tabulated over the
            # categories and kept lazy, so switch/where chains on the same value
            # (where(z == 2, a, where(z < 1, b, c))) stay one multilinear table
            O = (ra if ra is not None else rb).onehot
            rep = self._elemwise_on_tables(node, reps, self._onehot_table(O), tabulate=True)
            rep.indicator = True
            return rep
        return _Rep(value=val, indicator=True)

    def _switch(self, node, reps) -> _Rep:
        cond, a, b = node.inputs
        rc = reps[0]
        va, vb = self.value(a), self.value(b)
        if rc is None:
            out = pt.switch(cond, va, vb)
        else:
            if not (rc.indicator or self._is_binary(rc)):
                raise self._fail(node, "a switch on a non-binary discrete value")
            c = rc.get_value()
            if rc.piecewise:
                out = pt.switch(pt.gt(c, 0.5), va, vb)
            else:
                # -inf branches (log 0) floored: 0 * -inf would be NaN
                va, vb = (_floor_log(v) for v in (va, vb))
                out = c * va + (1.0 - c) * vb
        if not out.dtype.startswith("float"):
            out = pt.cast(out, "float64")
        return _Rep(value=out)

    def _logical(self, node, reps) -> _Rep:
        vals = [self.value(inp) for inp in node.inputs]
        vals = [
            v if r is not None else pt.cast(v, "float64") for v, r in zip(vals, reps, strict=True)
        ]
        op = node.op.scalar_op
        if isinstance(op, ps.Invert):
            out = 1.0 - vals[0]
        elif isinstance(op, ps.AND):
            out = vals[0] * vals[1]
        elif isinstance(op, ps.OR):
            out = vals[0] + vals[1] - vals[0] * vals[1]
        else:
            out = vals[0] + vals[1] - 2.0 * vals[0] * vals[1]
        # a piecewise operand (comparison of an unbounded integer) makes the result piecewise:
        # it is then used as a hard condition (see _switch)
        piecewise = any(r.piecewise for r in reps if r is not None)
        return _Rep(value=out, indicator=True, piecewise=piecewise)

    # -- everything else -----------------------------------------------------------------------
    def _generic(self, node, reps) -> list[_Rep]:
        op = node.op
        if isinstance(op, ScalarFromTensor | TensorFromScalar) and reps[0].onehot is not None:
            # tensor <-> scalar conversions of a category index keep its one-hot
            return [_Rep(value=op(reps[0].get_value()), onehot=reps[0].onehot)]
        if isinstance(op, Alloc) and any(r is not None for r in reps[1:]):
            raise self._fail(node, "a discrete value determines a shape (as in bincount)")
        inputs = [self.value(inp) for inp in node.inputs]
        if isinstance(op, CAReduce) and not node.outputs[0].dtype.startswith("float"):
            x = pt.cast(inputs[0], "float64")
            scalar_op = op.scalar_op
            if isinstance(scalar_op, ps.AND | ps.OR):
                # all/any of indicators: products, multilinear like logical and/or
                if not (reps[0].indicator or self._is_binary(reps[0])):
                    raise self._fail(node, "all/any of values that are not 0/1 indicators")
                if isinstance(scalar_op, ps.AND):
                    out = pt.prod(x, axis=op.axis)
                else:
                    out = 1.0 - pt.prod(1.0 - x, axis=op.axis)
                return [_Rep(value=out, indicator=True, piecewise=reps[0].piecewise)]
            fns = {ps.Add: pt.sum, ps.Mul: pt.prod, ps.ScalarMaximum: pt.max}
            fns[ps.ScalarMinimum] = pt.min
            fn = next((f for cls, f in fns.items() if isinstance(scalar_op, cls)), None)
            if fn is None:
                raise self._fail(node, "an integer reduction of discrete values")
            # max/min of the float values: equal on discrete points, (sub)differentiable
            return [_Rep(value=fn(x, axis=op.axis))]
        try:
            outs = op.make_node(*inputs).outputs
        except Exception as err:  # noqa: BLE001 - reported as not relaxable
            raise self._fail(node, f"the operation does not accept relaxed inputs ({err})") from err
        result = []
        for out in outs:
            if out.dtype.startswith(("int", "uint", "bool")):
                raise self._fail(node, f"the relaxed value would have integer dtype {out.dtype}")
            result.append(_Rep(value=out))
        return result


def _floor_log(v: Variable) -> Variable:
    """``max(v, LOG_FLOOR)`` for float ``v`` (a ``log 0`` about to meet a relaxed weight)."""
    return pt.maximum(v, LOG_FLOOR) if v.dtype.startswith("float") else v
