"""The relaxation rules for indexing and structure: indexing by discrete values, structural ops
(reshape, dimshuffle, join) and ``set_subtensor``/``inc_subtensor``.

A mixin of :class:`pymc_lbp.logp.relaxer._Relaxer`, which dispatches these nodes here (the other
rules, the entry point and the dispatch are in :mod:`pymc_lbp.logp.relaxer`).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Constant, Variable
from pytensor.tensor.basic import Join, MakeVector
from pytensor.tensor.elemwise import DimShuffle
from pytensor.tensor.shape import Reshape
from pytensor.tensor.subtensor import (
    Subtensor,
    indices_from_subtensor,
)
from pytensor.tensor.type import TensorType
from pytensor.tensor.type_other import NoneTypeT, SliceType

from pymc_lbp.logp.relaxed_values import (
    _Rep,
    _Table,
)


class _IndexingRules:
    """Indexing, structural and ``inc_subtensor`` rules of :class:`_Relaxer`."""

    # -- indexing ----------------------------------------------------------------------------
    def _indexing(self, node, reps) -> _Rep:
        x_rep, idx_reps = reps[0], reps[1:]
        if any(r is not None for r in idx_reps):
            if x_rep is not None:
                raise self._fail(
                    node, "a discrete value indexes a tensor that depends on the block"
                )
            if isinstance(node.op, Subtensor):
                return self._subtensor_by_discrete(node)
            return self._index_by_discrete(node, node.inputs[0], node.inputs[1:], idx_reps)
        # the indexed tensor depends on the block, the indices do not
        if x_rep.table is not None:  # (possibly materialised already: stays lazy here)
            table = self._index_table(node, x_rep.table)
            if table is not None:
                return _Rep(table=table, indicator=x_rep.indicator)
        value = node.op(x_rep.get_value(), *node.inputs[1:])
        onehot = x_rep.onehot
        if onehot is not None and isinstance(node.op, Subtensor):
            onehot = onehot[tuple(indices_from_subtensor(node.inputs[1:], node.op.idx_list))]
        elif onehot is not None:
            onehot = node.op(onehot, *node.inputs[1:])
        return _Rep(value=value, onehot=onehot)

    def _index_table(self, node, table: _Table) -> _Table | None:
        """Basic indexing (integers and slices) of a lazy table: applied to ``G`` and ``W`` alike.

        Axes of length one that only broadcast (static shape 1) take index 0 or a full slice, so
        the table stays a contraction; indexing beyond the batch axes applies to ``G`` alone.
        """
        if not isinstance(node.op, Subtensor):
            return None
        indices = indices_from_subtensor(node.inputs[1:], node.op.idx_list)
        head, tail = list(indices[: table.n_batch]), list(indices[table.n_batch :])
        head += [slice(None)] * (table.n_batch - len(head))
        k_axes = (slice(None),) * table.n_k
        if all(isinstance(i, slice) and i == slice(None) for i in head):
            G = table.G[tuple(head) + k_axes + tuple(tail)]
            return _Table(G, table.W, table.n_batch, table.n_k, table.key)

        def adapt(i, broadcastable):
            if not broadcastable:
                return i
            return slice(None) if isinstance(i, slice) else 0

        g_bc, w_bc = table.G.type.broadcastable, table.W.type.broadcastable
        G = table.G[tuple(adapt(i, g_bc[d]) for d, i in enumerate(head)) + k_axes + tuple(tail)]
        W = table.W[tuple(adapt(i, w_bc[d]) for d, i in enumerate(head))]
        n_batch = sum(isinstance(i, slice) for i in head)
        return _Table(G, W, n_batch, table.n_k, ("index", id(node)))

    def _subtensor_by_discrete(self, node) -> _Rep:
        """Basic indexing ``A[z, ...]`` by scalar discrete values: as index arrays of ndim 0."""
        indices = indices_from_subtensor(node.inputs[1:], node.op.idx_list)
        lead = []
        for i in indices:
            if isinstance(i, slice):
                break
            lead.append(pt.as_tensor_variable(i))
        rest = indices[len(lead) :]
        if any(not (isinstance(i, slice) and i == slice(None)) for i in rest):
            raise self._fail(node, "discrete indices must come first, followed only by full slices")
        reps = [self.relax(i) for i in lead]
        return self._index_by_discrete(node, node.inputs[0], lead, reps)

    def _index_by_discrete(self, node, A, idx, idx_reps) -> _Rep:
        idx = list(idx)
        reps = list(idx_reps)
        # normalise to: tensor index arrays first, then only full slices
        n_arrays = next(
            (k for k, i in enumerate(idx) if not isinstance(i.type, TensorType)), len(idx)
        )
        if not all(isinstance(i.type, SliceType) and _is_full_slice(i) for i in idx[n_arrays:]):
            raise self._fail(
                node, "discrete index arrays must come first, followed only by full slices"
            )
        idx, reps = idx[:n_arrays], reps[:n_arrays]
        for i, r in zip(idx, reps, strict=True):
            if i.dtype == "bool":
                raise self._fail(node, "boolean masks built from discrete values")
            if r is not None and r.onehot is None:
                raise self._fail(node, "an unbounded integer value used as an index")
            if isinstance(i.type, NoneTypeT):
                raise self._fail(node, "newaxis in a discrete index")
        dep = [k for k, r in enumerate(reps) if r is not None]
        shapes = [
            r.onehot.ndim - 1 if r is not None else i.ndim for i, r in zip(idx, reps, strict=True)
        ]
        nb = max(shapes)
        nk = len(dep)
        gather = []
        weights = []
        for k, (i, r) in enumerate(zip(idx, reps, strict=True)):
            if r is None:
                x = pt.shape_padleft(i, nb - i.ndim)
                gather.append(pt.shape_padright(x, nk))
            else:
                t = dep.index(k)
                O = r.onehot
                K = O.shape[-1]
                cats = pt.arange(K)
                order = ["x"] * nb + ["x"] * nk
                order[nb + t] = 0
                gather.append(cats.dimshuffle(order))
                O = pt.shape_padleft(O, nb - (O.ndim - 1))
                w_order = list(range(nb)) + ["x"] * nk
                w_order[nb + t] = nb
                weights.append((O, O.dimshuffle(w_order)))
        key = tuple((id(O), nb, t) for t, (O, _) in enumerate(weights))
        if key not in self._w_cache:
            W = weights[0][1]
            for _, w in weights[1:]:
                W = W * w
            self._w_cache[key] = W
        G = A[tuple(gather)]
        return _Rep(table=_Table(G, self._w_cache[key], nb, nk, key))

    # -- structural ops (reshape, dimshuffle, join) --------------------------------------------
    def _structural(self, node, reps) -> _Rep:
        op = node.op
        if (
            isinstance(op, Join)
            and reps[0] is None
            and any(r is not None and r.table is not None and r.value is None for r in reps[1:])
        ):
            # keep lazy tables lazy through a join; materialised when needed
            parts = [
                r if r is not None else inp
                for inp, r in zip(node.inputs[1:], reps[1:], strict=True)
            ]
            return _Rep(join=(node.inputs[0], parts))
        if isinstance(op, MakeVector):
            # stack of scalars: relaxed values are floats whatever the original dtype
            values = [pt.cast(self.value(inp), "float64") for inp in node.inputs]
            onehots = self._onehots(node.inputs, reps)
            return _Rep(
                value=pt.stack(values),
                onehot=pt.stack(onehots) if onehots is not None else None,
            )
        values = [self.value(inp) for inp in node.inputs]
        if isinstance(op, Join):
            values = [values[0]] + [pt.cast(v, "float64") for v in values[1:]]
        value = op(*values)
        onehot = None
        if isinstance(op, DimShuffle) and reps[0].onehot is not None:
            O = reps[0].onehot
            onehot = O.dimshuffle([*op.new_order, O.ndim - 1])
        elif isinstance(op, Reshape) and reps[0].onehot is not None:
            O = reps[0].onehot
            shape = pt.concatenate([pt.as_tensor_variable(node.inputs[1]), O.shape[-1:]])
            onehot = O.reshape(shape, ndim=op.ndim + 1)
        elif isinstance(op, Join):
            ohs = self._onehots(node.inputs[1:], reps[1:])
            axis = node.inputs[0]
            if ohs is not None:
                onehot = pt.join(
                    axis % node.outputs[0].ndim if isinstance(axis, Constant) else axis, *ohs
                )
        return _Rep(value=value, onehot=onehot)

    def _onehots(self, inputs, reps) -> list[Variable] | None:
        """One-hots of parts put together (join, stack, set_subtensor), or None.

        Block-dependent parts must carry a one-hot (all with the same K); independent parts
        must be integer constants in ``[0, K)`` (e.g. a fixed initial state joined in front).
        """
        dep = [r.onehot for r in reps if r is not None]
        if not dep or any(o is None for o in dep):
            return None
        ks = {o.type.shape[-1] for o in dep}
        if len(ks) != 1 or None in ks:
            return None
        (K,) = ks
        out = []
        for inp, rep in zip(inputs, reps, strict=True):
            if rep is not None:
                out.append(rep.onehot)
                continue
            try:
                data = pt.get_underlying_scalar_constant_value(inp) if inp.ndim == 0 else None
            except Exception:  # noqa: BLE001 - not a constant
                data = None
            if data is None and isinstance(inp, Constant):
                data = inp.data
            if data is None:
                return None
            data = np.asarray(data)
            if data.dtype.kind not in "iub" or data.size and (data.min() < 0 or data.max() >= K):
                return None
            out.append(pt.as_tensor_variable(np.eye(K)[data.astype(np.int64)]))
        return out

    # -- set_subtensor / inc_subtensor -------------------------------------------------------------
    def _inc_subtensor(self, node, reps) -> _Rep:
        """``set_subtensor``/``inc_subtensor`` at block-independent positions: on float values."""
        if any(r is not None for r in reps[2:]):
            raise self._fail(node, "a discrete value used as the position of a set/inc_subtensor")
        x, y, *idx = node.inputs
        vx = pt.cast(self.value(x), "float64")
        vy = pt.cast(self.value(y), "float64")
        value = node.op.make_node(vx, vy, *idx).outputs[0]
        onehot = None
        if getattr(node.op, "set_instead_of_inc", False):
            ohs = self._onehots([x, y], reps[:2])
            if ohs is not None:
                onehot = node.op.make_node(ohs[0], ohs[1], *idx).outputs[0]
        return _Rep(value=value, onehot=onehot)


def _is_full_slice(var: Variable) -> bool:
    if isinstance(var, Constant):
        return var.data == slice(None)
    owner = var.owner
    if owner is None:
        return False
    return all(isinstance(i.type, NoneTypeT) for i in owner.inputs)
