"""A differentiable extension of a PyMC model's logp over discrete values.

PyMC's logp of a discrete variable is not differentiable in its value: ``pytensor.grad`` of a
Bernoulli logp with respect to its integer value is identically zero, and categorical values are
used as indices. First-order (gradient) neighbour differences (Grathwohl et al. 2021) need a
differentiable ``f~`` with ``f~ = f`` on every discrete point. This module builds it honestly:

* Each block variable gets a float "relaxed" input: binary (Bernoulli) ``v`` in [0, 1]; categorical
  a one-hot tensor ``O`` with a trailing axis of length K; integer-valued variables their float
  value. Binary variables also carry the one-hot ``[1 - v, v]``.
* The block variables' own logp terms become their multilinear extensions:
  Bernoulli ``v log p + (1 - v) log(1 - p)``, Categorical ``sum_k O_k log p_k``.
* Uses of a discrete value as an index into a tensor that does not depend on the block
  (``mu[z]``, ``table[x[a], x[b]]``) become one-hot contractions
  ``sum_{c1, c2} O_a[c1] O_b[c2] table[c1, c2]``. The contraction is kept lazy through elementwise
  functions with block-independent operands (``log(cpt[z])``, ``(y - mu[z]) / sigma``), because a
  unary function commutes with one-hot selection: that keeps mixture likelihoods and conditional
  probability tables multilinear.
* ``eq(z, k)``, ``neq``, ``lt``, ... of a one-hot variable become sums of one-hot entries;
  ``switch(c, a, b)`` on a relaxed indicator becomes ``c a + (1 - c) b``; logical and/or/not act
  on indicators as products.
* Arithmetic uses take the float value; parameter checks (``CheckParameterValue``/``Assert``) are
  dropped (they guard parameters, not the target's values).

Where none of these rules applies (a non-differentiable function of a discrete value, a discrete
value indexing a tensor that itself depends on the block, ...), :class:`NotRelaxableError` names
the operation: the relaxation never returns a silent zero gradient. Comparisons of unbounded
integer variables (support checks such as ``value < 0``) are kept piecewise constant and listed in
:attr:`RelaxedLogp.piecewise`, so callers can warn.

Zero probabilities: ``log 0 = -inf`` entries are floored at :data:`LOG_FLOOR` where they are
multiplied by a relaxed weight (``0 * -inf`` would be NaN). On discrete points ``f~`` therefore
equals ``f`` wherever ``f`` is finite, and is ``<= LOG_FLOOR`` where ``f = -inf``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import pytensor.tensor as pt
from pytensor.graph.basic import Constant, Variable
from pytensor.raise_op import CheckAndRaise
from pytensor.scalar import basic as ps
from pytensor.tensor.basic import Join, ScalarFromTensor, TensorFromScalar
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.random.basic import BernoulliRV, CategoricalRV
from pytensor.tensor.shape import Reshape
from pytensor.tensor.subtensor import (
    AdvancedSubtensor,
    AdvancedSubtensor1,
    Subtensor,
    indices_from_subtensor,
)
from pytensor.tensor.type import TensorType
from pytensor.tensor.type_other import NoneTypeT, SliceType

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
    ps.IsNan,
    ps.IsInf,
)


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


@dataclass
class RelaxedLogp:
    """A relaxed logp graph and its float inputs.

    Attributes
    ----------
    inputs : list of TensorVariable
        One float input per block variable, in block order: binary and integer variables have the
        variable's shape, categorical ones an extra trailing axis of length K (one-hot).
    logp : TensorVariable
        Scalar relaxed log-density, a function of ``inputs`` and of the model's other value
        variables.
    piecewise : list of str
        Operations kept piecewise constant (comparisons of unbounded integer variables); they
        contribute no gradient.
    """

    inputs: list[Variable]
    logp: Variable
    piecewise: list[str] = field(default_factory=list)


class _Relaxer:
    def __init__(self, leaves: dict[Variable, _Rep], n_categories: dict[Variable, int]):
        self.memo: dict[Variable, _Rep | None] = dict(leaves)
        self.n_categories = n_categories
        self.piecewise: list[str] = []
        self._w_cache: dict[tuple, Variable] = {}

    # -- entry point -------------------------------------------------------------------------
    def relax(self, var: Variable) -> _Rep | None:
        """Relaxed representation of ``var``; ``None`` if it does not depend on the block."""
        if var in self.memo:
            return self.memo[var]
        node = var.owner
        if node is None:
            self.memo[var] = None
            return None
        if isinstance(node.op, CheckAndRaise):
            rep = self.relax(node.inputs[0])
            self.memo[var] = rep
            return rep
        reps = [self.relax(inp) for inp in node.inputs]
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
        if isinstance(op, DimShuffle | Reshape | Join):
            return [self._structural(node, reps)]
        return self._generic(node, reps)

    def _fail(self, node, why: str) -> NotRelaxableError:
        return NotRelaxableError(
            f"Cannot build a differentiable extension of the model's logp: {why} "
            f"(operation {node.op} in `{node.outputs[0]}`). Use exact neighbour differences "
            "(differences='exact') for this model."
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
        if isinstance(scalar_op, _NON_DIFFERENTIABLE):
            raise self._fail(node, "a non-differentiable function of a discrete value")
        inputs = [self.value(inp) for inp in node.inputs]
        out = node.op(*inputs)
        if not out.dtype.startswith("float"):
            out = pt.cast(out, "float64") if out.dtype == "bool" else out
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

    def _elemwise_on_tables(self, node, reps, table: _Table) -> _Rep:
        out_ndim = node.outputs[0].ndim
        n_rest = out_ndim - table.n_batch
        args = []
        for inp, rep in zip(node.inputs, reps, strict=True):
            if rep is not None:
                args.append(rep.table.G)
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
        elif ra is not None:
            O = ra.onehot
            cats = pt.arange(O.shape[-1])
            val = pt.sum(O * pt.cast(op(cats, pt.shape_padright(b, 1)), "float64"), axis=-1)
        else:
            O = rb.onehot
            cats = pt.arange(O.shape[-1])
            val = pt.sum(O * pt.cast(op(pt.shape_padright(a, 1), cats), "float64"), axis=-1)
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
        return _Rep(value=out, indicator=True)

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
        if x_rep.table is not None and x_rep.value is None:
            rep = self._index_table(node, x_rep.table)
            if rep is not None:
                return rep
        value = node.op(x_rep.get_value(), *node.inputs[1:])
        onehot = None
        if x_rep.onehot is not None:
            onehot = (
                node.op(x_rep.onehot, *node.inputs[1:])
                if not isinstance(node.op, Subtensor)
                else self._subtensor_onehot(node, x_rep.onehot)
            )
        return _Rep(value=value, onehot=onehot)

    @staticmethod
    def _subtensor_onehot(node, onehot):
        indices = indices_from_subtensor(node.inputs[1:], node.op.idx_list)
        return onehot[tuple(indices)]

    def _index_table(self, node, table: _Table) -> _Rep | None:
        """Basic indexing of a lazy table that leaves its batch axes whole."""
        if not isinstance(node.op, Subtensor):
            return None
        indices = indices_from_subtensor(node.inputs[1:], node.op.idx_list)
        head, tail = indices[: table.n_batch], indices[table.n_batch :]
        full = all(isinstance(i, slice) and i == slice(None) for i in head)
        if not full or len(head) < table.n_batch:
            return None
        G = table.G[tuple(head) + (slice(None),) * table.n_k + tuple(tail)]
        return _Rep(table=_Table(G, table.W, table.n_batch, table.n_k, table.key))

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
        n_arrays = 0
        for i in idx:
            if isinstance(i.type, TensorType):
                n_arrays += 1
            else:
                break
        trailing = idx[n_arrays:]
        for i in trailing:
            if not (isinstance(i.type, SliceType) and _is_full_slice(i)):
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
        values = [self.value(inp) for inp in node.inputs]
        value = op(*values)
        onehot = None
        if isinstance(op, DimShuffle) and reps[0].onehot is not None:
            O = reps[0].onehot
            onehot = O.dimshuffle([*op.new_order, O.ndim - 1])
        elif isinstance(op, Reshape) and reps[0].onehot is not None:
            O = reps[0].onehot
            shape = pt.concatenate([pt.as_tensor_variable(node.inputs[1]), O.shape[-1:]])
            onehot = O.reshape(shape, ndim=op.ndim + 1)
        elif isinstance(op, Join) and all(r is not None and r.onehot is not None for r in reps[1:]):
            axis = node.inputs[0]
            ohs = [r.onehot for r in reps[1:]]
            onehot = pt.join(
                axis % node.outputs[0].ndim if isinstance(axis, Constant) else axis, *ohs
            )
        return _Rep(value=value, onehot=onehot)

    # -- everything else -----------------------------------------------------------------------
    def _generic(self, node, reps) -> list[_Rep]:
        op = node.op
        if isinstance(op, ScalarFromTensor | TensorFromScalar) and reps[0].onehot is not None:
            # tensor <-> scalar conversions of a category index keep its one-hot
            return [_Rep(value=op(reps[0].get_value()), onehot=reps[0].onehot)]
        inputs = [self.value(inp) for inp in node.inputs]
        if isinstance(op, CAReduce) and not node.outputs[0].dtype.startswith("float"):
            if not isinstance(op.scalar_op, ps.Add | ps.Mul):
                raise self._fail(node, "an integer reduction of discrete values")
            fn = pt.sum if isinstance(op.scalar_op, ps.Add) else pt.prod
            return [_Rep(value=fn(inputs[0], axis=op.axis))]
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


def _is_full_slice(var: Variable) -> bool:
    if isinstance(var, Constant):
        return var.data == slice(None)
    owner = var.owner
    if owner is None:
        return False
    return all(isinstance(i.type, NoneTypeT) for i in owner.inputs)


def _leaf_reps(specs, inputs) -> dict[Variable, _Rep]:
    leaves = {}
    for spec, leaf in zip(specs, inputs, strict=True):
        if spec.kind == "binary":
            onehot = pt.stack([1.0 - leaf, leaf], axis=-1)
            leaves[spec.value_var] = _Rep(value=leaf, onehot=onehot)
        elif spec.kind == "categorical":
            cats = pt.arange(spec.n_categories, dtype="float64")
            leaves[spec.value_var] = _Rep(value=pt.sum(leaf * cats, axis=-1), onehot=leaf)
        else:
            leaves[spec.value_var] = _Rep(value=leaf)
    return leaves


def make_relaxed_inputs(specs) -> list[Variable]:
    """Float leaf inputs of the relaxed logp, one per block variable (see :class:`RelaxedLogp`)."""
    inputs = []
    for spec in specs:
        shape = tuple(spec.shape) + ((spec.n_categories,) if spec.kind == "categorical" else ())
        inputs.append(pt.tensor(f"relaxed_{spec.name}", dtype="float64", shape=shape))
    return inputs


def relaxed_logp(model, specs) -> RelaxedLogp:
    """Build the relaxed logp of ``model`` over the block described by ``specs``.

    Parameters
    ----------
    model : pymc.Model
        The model.
    specs : sequence of VariableSpec
        The block variables (see :func:`pymc_lbp.neighbours.describe_block`).

    Returns
    -------
    RelaxedLogp

    Raises
    ------
    NotRelaxableError
        If some use of a block variable has no differentiable extension here.
    """
    inputs = make_relaxed_inputs(specs)
    leaves = _leaf_reps(specs, inputs)
    n_categories = {s.value_var: s.n_categories for s in specs if s.kind == "categorical"}
    relaxer = _Relaxer(leaves, n_categories)

    block_rvs = {model.values_to_rvs[s.value_var] for s in specs}
    other = [rv for rv in model.free_RVs + model.observed_RVs if rv not in block_rvs]
    terms = (
        model.logp(vars=other + list(model.potentials), sum=False)
        if (other or model.potentials)
        else []
    )

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))
    try:
        total = pt.constant(0.0, dtype="float64")
        for term in terms:
            total = total + pt.sum(relaxer.value(term))
        # comparisons met so far are the model's own; those in the block variables' own terms
        # (support checks of integer variables) are expected and not reported
        user_piecewise = list(relaxer.piecewise)
        for spec, leaf in zip(specs, inputs, strict=True):
            total = total + _own_term(model, spec, leaf, relaxer)
    finally:
        sys.setrecursionlimit(old_limit)
    return RelaxedLogp(inputs=inputs, logp=total, piecewise=user_piecewise)


def _floored(rep: _Rep | None, graph: Variable) -> Variable:
    if rep is None:
        return pt.maximum(graph, LOG_FLOOR)
    if rep.table is not None and rep.value is None:
        return rep.table.materialize()
    return pt.maximum(rep.get_value(), LOG_FLOOR)


def _own_term(model, spec, leaf, relaxer: _Relaxer) -> Variable:
    """Multilinear extension of a block variable's own logp term."""
    rv = model.values_to_rvs[spec.value_var]
    op = rv.owner.op
    if isinstance(op, BernoulliRV | CategoricalRV):
        (p,) = model.replace_rvs_by_values(op.dist_params(rv.owner))
        if isinstance(op, BernoulliRV):
            log_p1, log_p0 = pt.log(p), pt.log1p(-p)
            lp1 = _floored(relaxer.relax(log_p1), log_p1)
            lp0 = _floored(relaxer.relax(log_p0), log_p0)
            return pt.sum(leaf * lp1 + (1.0 - leaf) * lp0)
        log_p = pt.log(p)
        lp = _floored(relaxer.relax(log_p), log_p)
        return pt.sum(leaf * lp)
    # integer-valued variables: the model's own term, retyped onto the float value
    (term,) = model.logp(vars=[rv], sum=False)
    return pt.sum(relaxer.value(term))


__all__ = ["LOG_FLOOR", "NotRelaxableError", "RelaxedLogp", "make_relaxed_inputs", "relaxed_logp"]
