"""Which sites of the block every element of every logp term depends on.

:func:`analyse_dependencies` is the structural, conservative analysis of step 2 of
:mod:`pymc_lbp.logp.local_differences` (its rules in words there; here the ``_rule_*``
functions). The result is an :class:`Analysis`; :class:`NotLocalError` says why a model has no
usable locality.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytensor
import pytensor.tensor as pt
import scipy.sparse as sp
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import io_toposort
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.basic import (
    Alloc,
    Join,
    MakeVector,
    ScalarFromTensor,
    Split,
    TensorFromScalar,
)
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
)


class NotLocalError(ValueError):
    """The model's logp has no usable locality in the block (the reason is the message)."""


# --------------------------------------------------------------------------- dependencies
@dataclass
class Deps:
    """Dependencies of one variable's elements (C order) on the block's sites.

    ``rows`` is a CSR matrix (elements x sites) of ones, ``glob`` marks elements that may depend
    on any site (their rows are empty). ``None`` for a variable that does not depend on the block.
    """

    rows: sp.csr_matrix
    glob: np.ndarray


@dataclass
class Analysis:
    """Result of :func:`analyse_dependencies`."""

    deps: dict = field(default_factory=dict)  # var -> Deps (absent: free of the block)
    values: dict = field(default_factory=dict)  # var -> value at the probe state
    static: set = field(default_factory=set)  # vars whose value is fixed (constants, shapes)
    shape_static: set = field(default_factory=set)  # vars whose shape cannot change


def _binarize(m: sp.csr_matrix) -> sp.csr_matrix:
    m = sp.csr_matrix(m)
    m.sum_duplicates()
    m.eliminate_zeros()
    m.data[:] = 1.0
    return m


def _cap(rows: sp.csr_matrix, glob: np.ndarray, cap: int) -> Deps:
    rows = _binarize(rows)
    glob = np.asarray(glob, dtype=bool).copy()
    glob |= np.diff(rows.indptr) > cap
    if glob.any():
        rows = sp.csr_matrix(sp.diags((~glob).astype(np.float32)) @ rows)
        rows.eliminate_zeros()
    return Deps(rows, glob)


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _shape_of(value) -> tuple:
    return tuple(np.shape(value))


def _all_global(shape, n_sites) -> Deps:
    n = _size(shape)
    return Deps(sp.csr_matrix((n, n_sites), dtype=np.float32), np.ones(n, dtype=bool))


def _broadcast_rows(dep: Deps, in_shape, out_shape) -> tuple[sp.csr_matrix, np.ndarray]:
    labels = np.arange(_size(in_shape)).reshape(in_shape)
    labels = np.broadcast_to(labels, out_shape).ravel()
    return dep.rows[labels], dep.glob[labels]


def _union_all(deps: list[Deps], cap: int) -> tuple[np.ndarray | None, bool]:
    """Union of the sites of all elements; ``(sites, is_global)``."""
    if any(d.glob.any() for d in deps):
        return None, True
    cols = np.unique(np.concatenate([d.rows.indices for d in deps] or [np.zeros(0, int)]))
    if cols.size > cap:
        return None, True
    return cols, False


def _constant_rows(n_out: int, cols: np.ndarray, n_sites: int) -> sp.csr_matrix:
    indptr = np.arange(n_out + 1, dtype=np.int64) * cols.size
    indices = np.tile(cols, n_out)
    return sp.csr_matrix(
        (np.ones(indices.size, np.float32), indices, indptr), shape=(n_out, n_sites)
    )


def _stacked(deps, sizes, n_sites) -> tuple[sp.csr_matrix, np.ndarray]:
    """Rows and global flags of parts put one after the other (``None``: ``size`` free rows)."""
    rows, glob = [], []
    for d, n in zip(deps, sizes, strict=True):
        rows.append(sp.csr_matrix((n, n_sites), dtype=np.float32) if d is None else d.rows)
        glob.append(np.zeros(n, dtype=bool) if d is None else d.glob)
    return sp.vstack(rows, format="csr"), np.concatenate(glob)


def _probe_values(outputs, x, x0):
    """Values of every variable of the graph at ``x = x0`` (python linker, no rewrites)."""
    nodes = io_toposort([x], outputs)
    variables = [v for node in nodes for v in node.outputs]
    keep = list(dict.fromkeys(variables))
    fn = pytensor.function(
        [x],
        keep,
        mode=Mode(linker="py", optimizer=None),
        on_unused_input="ignore",
        accept_inplace=True,
    )
    vals = dict(zip(keep, fn(x0), strict=True))
    vals[x] = np.asarray(x0)
    return nodes, vals


def _value(var, values):
    if isinstance(var, Constant):
        return var.data
    if isinstance(var, SharedVariable):
        return var.get_value(borrow=True)
    if var in values:
        return values[var]
    raise NotLocalError(f"no probe value for {var}")


def _run_on_labels(node, data_positions, values):
    """Run a data-movement op on float labels in place of its data inputs.

    Returns the output labels as int arrays (one per output), or None when the op cannot be run
    that way (then the caller uses the conservative rule).
    """
    inputs = list(node.inputs)
    new_inputs = []
    vals = []
    offset = 0
    for pos, inp in enumerate(inputs):
        if pos in data_positions:
            shape = _shape_of(_value(inp, values))
            lab = (np.arange(_size(shape), dtype=np.float64) + offset).reshape(shape)
            offset += _size(shape)
            const = pt.constant(lab)
            new_inputs.append(const)
            vals.append(lab)
        else:
            new_inputs.append(inp)
            vals.append(_value(inp, values))
    try:
        new_node = node.op.make_node(*new_inputs)
        if any(o.dtype != "float64" for o in new_node.outputs):
            return None
        storage = [[None] for _ in new_node.outputs]
        node.op.perform(new_node, vals, storage)
        outs = [np.asarray(s[0]) for s in storage]
    except Exception:  # noqa: BLE001 - an op that cannot move labels gets the general rule
        return None
    result = []
    for out in outs:
        if out.dtype != np.float64 or not np.all(np.isfinite(out)):
            return None
        lab = out.astype(np.int64)
        if not np.array_equal(lab, out) or lab.min(initial=0) < 0 or lab.max(initial=-1) >= offset:
            return None
        result.append(lab)
    return result


def analyse_dependencies(outputs, x, n_sites: int, x0, max_term_sites: int = 32) -> Analysis:
    """Conservative dependency of every element of every variable on the sites of ``x``.

    Parameters
    ----------
    outputs : list of Variable
        Graphs of ``x`` (and of constants and shared variables).
    x : Variable
        The block, an int vector of ``n_sites`` sites.
    n_sites : int
    x0 : ndarray
        A state at which the graph can be evaluated (values give shapes and constant indices).
    max_term_sites : int
        Elements that depend on more sites are global.

    Returns
    -------
    Analysis
    """
    cap = int(max_term_sites)
    nodes, values = _probe_values(outputs, x, x0)
    an = Analysis(values=values)
    eye = sp.identity(n_sites, dtype=np.float32, format="csr")
    an.deps[x] = Deps(eye, np.zeros(n_sites, dtype=bool))
    an.shape_static.add(x)

    def is_static(v):
        return isinstance(v, Constant) or v in an.static

    def is_shape_static(v):
        return v.owner is None or v in an.shape_static

    for node in nodes:
        op = node.op
        in_deps = [an.deps.get(i) for i in node.inputs]  # None: free of the block
        outs = node.outputs
        out_vals = [values.get(o) for o in outs]
        if all(d is None for d in in_deps):
            for o in outs:  # independent of the block
                if isinstance(op, Shape | Shape_i):
                    if all(is_shape_static(i) for i in node.inputs):
                        an.static.add(o)
                elif all(is_static(i) for i in node.inputs):
                    an.static.add(o)
                if all(is_shape_static(i) for i in node.inputs):
                    an.shape_static.add(o)
            continue
        if isinstance(op, Shape | Shape_i):
            (inp,) = node.inputs[:1]
            if is_shape_static(inp):
                an.static.add(outs[0])
                an.shape_static.add(outs[0])
            else:
                an.deps[outs[0]] = _all_global(_shape_of(out_vals[0]), n_sites)
            continue

        inputs_shape_static = all(is_shape_static(i) for i in node.inputs)
        result = None
        if isinstance(op, Elemwise | CheckAndRaise | ScalarFromTensor | TensorFromScalar):
            result = _rule_broadcast(node, in_deps, values, cap)
            static_shape = inputs_shape_static
        elif isinstance(op, CAReduce):
            result = _rule_reduce(node, in_deps[0], values, cap)
            static_shape = inputs_shape_static
        elif isinstance(op, MakeVector):
            rows, glob = _stacked(in_deps, [1] * len(in_deps), n_sites)
            result = [_cap(rows, glob, cap)]
            static_shape = True
        elif isinstance(op, IncSubtensor | AdvancedIncSubtensor1 | AdvancedIncSubtensor):
            result, static_shape = _rule_inc(node, in_deps, values, cap, is_static, n_sites)
            static_shape = static_shape and inputs_shape_static
        elif isinstance(op, AdvancedSubtensor1 | AdvancedSubtensor) and any(
            d is not None or not is_static(i)
            for i, d in zip(node.inputs[1:], in_deps[1:], strict=True)
        ):
            result = _rule_dynamic_gather(node, in_deps, values, cap, n_sites)
            static_shape = inputs_shape_static and result is not None
        else:
            data = _data_positions(node)
            if data is not None and all(
                is_static(i) for p, i in enumerate(node.inputs) if p not in data
            ):
                result = _rule_move(node, in_deps, data, values, cap, n_sites)
                static_shape = inputs_shape_static and result is not None
        if result is None:
            result, static_shape = _rule_generic(node, in_deps, values, cap, n_sites)
            static_shape = static_shape and inputs_shape_static
        for o, d in zip(outs, result, strict=True):
            if not static_shape:
                d = _all_global(_shape_of(values[o]), n_sites)
            else:
                an.shape_static.add(o)
            an.deps[o] = d
    return an


def _data_positions(node):
    """Inputs that a data-movement op copies (None for other ops)."""
    op = node.op
    if isinstance(
        op,
        DimShuffle
        | Reshape
        | Subtensor
        | AdvancedSubtensor1
        | AdvancedSubtensor
        | SpecifyShape
        | Alloc
        | Split,
    ):
        return {0}
    if isinstance(op, Join):
        return set(range(1, len(node.inputs)))
    return None


def _rule_broadcast(node, in_deps, values, cap):
    out_shape = _shape_of(values[node.outputs[0]])
    n_out = _size(out_shape)
    total = None
    glob = np.zeros(n_out, dtype=bool)
    for inp, d in zip(node.inputs, in_deps, strict=True):
        if d is None:
            continue
        in_shape = _shape_of(_value(inp, values))
        if _size(in_shape) == 1:
            rows = sp.csr_matrix(np.ones((n_out, 1), np.float32)) @ d.rows
            g = np.full(n_out, bool(d.glob[0]))
        else:
            rows, g = _broadcast_rows(d, in_shape, out_shape)
        total = rows if total is None else total + rows
        glob |= g
    return [_cap(total, glob, cap) for _ in node.outputs]


def _rule_reduce(node, d, values, cap):
    op = node.op
    in_shape = _shape_of(_value(node.inputs[0], values))
    axes = tuple(range(len(in_shape))) if op.axis is None else tuple(op.axis)
    keep = tuple(1 if a in axes else n for a, n in enumerate(in_shape))
    n_out = _size(keep)
    target = np.broadcast_to(np.arange(n_out).reshape(keep), in_shape).ravel()
    n_in = target.size
    R = sp.csr_matrix((np.ones(n_in, np.float32), (target, np.arange(n_in))), shape=(n_out, n_in))
    rows = R @ d.rows
    glob = (R @ d.glob.astype(np.float32)) > 0
    return [_cap(rows, glob, cap)]


def _rule_move(node, in_deps, data, values, cap, n_sites):
    labels = _run_on_labels(node, data, values)
    if labels is None:
        return None
    data = sorted(data)
    sizes = [_size(_shape_of(_value(node.inputs[p], values))) for p in data]
    stacked, glob = _stacked([in_deps[p] for p in data], sizes, n_sites)
    return [_cap(stacked[lab.ravel()], glob[lab.ravel()], cap) for lab in labels]


def _rule_dynamic_gather(node, in_deps, values, cap, n_sites):
    """``table[i1, i2, ...]`` with index arrays that vary: each output element depends on its
    index elements, plus (conservatively) every element of the table."""
    table, *indices = node.inputs
    if not all(
        isinstance(i.type, pt.TensorType) and i.dtype.startswith(("int", "uint")) for i in indices
    ):
        return None
    out_shape = _shape_of(values[node.outputs[0]])
    idx_shapes = [_shape_of(_value(i, values)) for i in indices]
    try:
        adv_shape = np.broadcast_shapes(*idx_shapes)
    except ValueError:
        return None
    table_shape = _shape_of(_value(table, values))
    if tuple(out_shape) != tuple(adv_shape) + tuple(table_shape[len(indices) :]):
        return None
    n_adv = _size(adv_shape)
    trailing = _size(table_shape[len(indices) :])
    total = sp.csr_matrix((n_adv, n_sites), dtype=np.float32)
    glob = np.zeros(n_adv, dtype=bool)
    for i, d in zip(indices, in_deps[1:], strict=True):
        if d is None:
            continue
        shape = _shape_of(_value(i, values))
        r, g = _broadcast_rows(d, shape, adv_shape)
        total = total + r
        glob |= g
    # every output element of one index position shares the index's dependencies
    expand = np.repeat(np.arange(n_adv), trailing)
    rows, glob = total[expand], glob[expand]
    d_table = in_deps[0]
    if d_table is not None:
        cols, is_glob = _union_all([d_table], cap)
        if is_glob:
            glob = np.ones_like(glob)
        elif cols.size:
            rows = rows + _constant_rows(rows.shape[0], cols, n_sites)
    return [_cap(rows, glob, cap)]


def _rule_inc(node, in_deps, values, cap, is_static, n_sites):
    """``set/inc_subtensor(x[idx], y)``: every element keeps x's dependencies and gains those of
    the y elements written to it (constant indices); otherwise the general rule."""
    op = node.op
    xv, yv, *idx = node.inputs
    if not all(is_static(i) for i in idx):
        return None, False
    x_shape = _shape_of(_value(xv, values))
    labels = np.arange(_size(x_shape)).reshape(x_shape)
    idx_vals = [_value(i, values) for i in idx]
    try:
        if isinstance(op, IncSubtensor):
            region = Subtensor(op.idx_list)
            storage = [[None]]
            sub_node = region.make_node(pt.constant(labels), *idx)
            region.perform(sub_node, [labels, *idx_vals], storage)
            dest = np.asarray(storage[0][0])
        elif isinstance(op, AdvancedIncSubtensor1):
            dest = labels[np.asarray(idx_vals[0])]
        else:
            dest = labels[tuple(idx_vals)]
        y_shape = _shape_of(_value(yv, values))
        y_lab = np.broadcast_to(np.arange(_size(y_shape)).reshape(y_shape), dest.shape).ravel()
    except Exception:  # noqa: BLE001 - fall back to the general rule
        return None, False
    dest = dest.ravel()
    n_x = _size(x_shape)
    d_x, d_y = in_deps[0], in_deps[1]
    rows = sp.csr_matrix((n_x, n_sites), dtype=np.float32)
    glob = np.zeros(n_x, dtype=bool)
    if d_x is not None:
        rows = rows + d_x.rows
        glob |= d_x.glob
    if d_y is not None:
        S = sp.csr_matrix(
            (np.ones(dest.size, np.float32), (dest, np.arange(dest.size))), shape=(n_x, dest.size)
        )
        rows = rows + S @ d_y.rows[y_lab]
        glob |= (S @ d_y.glob[y_lab].astype(np.float32)) > 0
    return [_cap(rows, glob, cap)], True


def _rule_generic(node, in_deps, values, cap, n_sites):
    """Every output element depends on everything the inputs depend on."""
    cols, is_glob = _union_all([d for d in in_deps if d is not None], cap)
    result = []
    static_shape = True
    for o in node.outputs:
        if not isinstance(o.type, pt.TensorType):
            raise NotLocalError(f"non-tensor output of {node.op} depends on the block")
        shape = _shape_of(values[o])
        # an op we do not know may give an output whose shape depends on the values
        if any(s is None for s in o.type.shape):
            static_shape = False
        n = _size(shape)
        if is_glob:
            result.append(_all_global(shape, n_sites))
        else:
            result.append(Deps(_constant_rows(n, cols, n_sites), np.zeros(n, dtype=bool)))
    return result, static_shape


__all__ = ["Analysis", "Deps", "NotLocalError", "analyse_dependencies"]
