"""Exact neighbour differences whose cost grows with the interactions, not with sites squared.

When one site of the block moves, only the log-probability terms that touch it change. This
module finds those terms in the model's own graph and evaluates the exact differences to every
one-site neighbour with a handful of elementwise evaluations of the model's terms, instead of one
whole-model evaluation per neighbour (:class:`pymc_lbp.logp.neighbours.ExactDifferences`' batched
method).

How it works
------------
1. **Terms as sums of elements.** The model logp is the sum of its terms
   (``model.logp(sum=False)``: every variable's elementwise logp and every ``pm.Potential``).
   A term that is a linear combination of sums (``J * (sum(a) + sum(b))``, broadcast additions,
   ``Alloc``, ``Join``, reshapes) is split into *pieces* whose elements add up to the term
   (:func:`linear_pieces`). The Ising coupling ``J * sum(s[:-1] * s[1:])`` becomes the elements
   ``J * s_i s_{i+1}``. PyMC's parameter checks, which reduce their conditions over the whole
   term, are first applied element by element (:func:`elementwise_checks`).
2. **Which sites every element depends on** (:func:`analyse_dependencies`): a structural,
   conservative analysis of the graph. Dependencies are sparse (element x site) matrices
   propagated node by node: elementwise ops take the union over broadcast inputs, reductions the
   union over reduced elements, data-movement ops (reshape, dimshuffle, slicing, ``Alloc``,
   ``Join``, ``pt.roll``, gathers with constant indices) move dependency rows exactly as they move
   data (the op is run on element labels), gathers with value-dependent indices (``mu[z]``,
   ``P[z[:-1], z[1:]]``, factor tables ``T[x_a, x_b]``) depend on their index elements, and any
   other op makes each output depend on everything its inputs depend on. An element that depends
   on more than ``max_term_sites`` sites, or on a value whose shape could change with the state,
   is *global*.
3. **Colouring.** Sites that share an element are adjacent; a greedy colouring gives classes of
   sites no two of which share an element. For colour ``c`` and move ``k`` (binary: flip;
   categorical: category ``k``; integer: ``-1``/``+1``) the state with *all* sites of colour ``c``
   moved evaluates every element once; an element's change belongs to its unique moved site, and
   a segment sum over sites gives every site's difference. Cost: ``sum_c max_k`` elementwise
   evaluations (two for a bipartite lattice of binary sites) instead of one per neighbour.
4. **Global pieces** (a piece with any global element) are evaluated exactly at every neighbour
   (batched, like the general method) and added. Only when no piece is local does the block fall
   back to the batched method as a whole.

The result equals the batched method's: masked slots (a categorical's current value, integer
moves outside the support) and zero-probability neighbours are ``-inf``, never NaN. The analysis
assumes the shapes of shared variables (other variables' values, ``pm.Data``) stay as they were
at construction; :class:`LocalDifferences` checks that on every call and refuses otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pytensor
import pytensor.tensor as pt
import scipy.sparse as sp
from pymc.logprob.utils import CheckParameterValue
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.fg import FunctionGraph
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.graph.traversal import ancestors, io_toposort
from pytensor.raise_op import CheckAndRaise
from pytensor.scalar import basic as ps
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

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.graphs import repeated_rows, set_per_row, substitute

_log = logging.getLogger("pymc_lbp")

__all__ = [
    "LocalCheckError",
    "LocalDifferences",
    "LocalPlan",
    "NotLocalError",
    "analyse_dependencies",
    "build_local_plan",
    "greedy_colouring",
    "linear_pieces",
]

BINARY, CATEGORICAL, INTEGER = 0, 1, 2  # as in pymc_lbp.logp.neighbours


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

    deps: dict = field(default_factory=dict)  # var -> Deps or None
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


def _union_all(deps: list[Deps], n_sites: int, cap: int) -> tuple[np.ndarray | None, bool]:
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

    def dep(v):
        if v is x:
            return an.deps[x]
        if v.owner is None:
            return None
        return an.deps.get(v)

    def is_static(v):
        return isinstance(v, Constant) or v in an.static

    def is_shape_static(v):
        return v.owner is None or v in an.shape_static

    for node in nodes:
        op = node.op
        in_deps = [dep(i) for i in node.inputs]
        outs = node.outputs
        out_vals = [values.get(o) for o in outs]
        if all(d is None for d in in_deps):
            # independent of the block
            for o in outs:
                an.deps[o] = None
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
                an.deps[outs[0]] = None
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
            rows, glob = [], []
            for d in in_deps:
                if d is None:
                    rows.append(sp.csr_matrix((1, n_sites), dtype=np.float32))
                    glob.append(np.zeros(1, bool))
                else:
                    rows.append(d.rows)
                    glob.append(d.glob)
            result = [_cap(sp.vstack(rows, format="csr"), np.concatenate(glob), cap)]
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
        op, DimShuffle | Reshape | Subtensor | AdvancedSubtensor1 | AdvancedSubtensor | SpecifyShape
    ):
        return {0}
    if isinstance(op, Alloc | Split):
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
    rows, globs = [], []
    for p in sorted(data):
        d = in_deps[p]
        n = _size(_shape_of(_value(node.inputs[p], values)))
        if d is None:
            rows.append(sp.csr_matrix((n, n_sites), dtype=np.float32))
            globs.append(np.zeros(n, dtype=bool))
        else:
            rows.append(d.rows)
            globs.append(d.glob)
    stacked = sp.vstack(rows, format="csr")
    glob = np.concatenate(globs)
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
        cols, is_glob = _union_all([d_table], n_sites, cap)
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
    cols, is_glob = _union_all([d for d in in_deps if d is not None], n_sites, cap)
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


# --------------------------------------------------------------------------- pieces
@dataclass
class Piece:
    """``scale * graph``: elements whose sum is part of the logp (``scale`` free of the block)."""

    graph: Variable
    scale: Variable | float = 1.0

    def elements(self) -> Variable:
        g = pt.as_tensor_variable(self.graph)
        if isinstance(self.scale, float) and self.scale == 1.0:
            return pt.cast(g, "float64")
        return pt.cast(g, "float64") * self.scale


def linear_pieces(term: Variable, an: Analysis) -> list[Piece]:
    """Split ``sum(term)`` into pieces whose elements add up to it.

    Sums, additions (with their broadcasting factors), subtractions, negations, products with
    block-free scalars, reshapes, dimshuffles, ``Alloc`` and ``Join`` are looked through; any
    other graph is one piece.
    """
    out: list[Piece] = []

    def size(v):
        return _size(_shape_of(_value(v, an.values)))

    def sized(v):
        return v.owner is None or v in an.shape_static

    def depends(v):
        return an.deps.get(v) is not None

    def scaled(scale, factor):
        if factor == 1.0:
            return scale
        if isinstance(scale, float):
            return scale * factor
        return scale * factor

    def visit(v, scale):
        node = v.owner
        if node is None or not depends(v):
            out.append(Piece(v, scale))
            return
        op = node.op
        if not sized(v) or not all(sized(i) for i in node.inputs):
            out.append(Piece(v, scale))
            return
        if isinstance(op, CAReduce) and isinstance(op.scalar_op, ps.Add):
            visit(node.inputs[0], scale)
            return
        if isinstance(op, DimShuffle | Reshape | SpecifyShape):
            visit(node.inputs[0], scale)
            return
        if isinstance(op, Alloc):
            visit(node.inputs[0], scaled(scale, size(v) / size(node.inputs[0])))
            return
        if isinstance(op, Join):
            for i in node.inputs[1:]:
                visit(i, scale)
            return
        if isinstance(op, Elemwise):
            sop = op.scalar_op
            n = size(v)
            if isinstance(sop, ps.Add):
                for i in node.inputs:
                    visit(i, scaled(scale, n / size(i)))
                return
            if isinstance(sop, ps.Sub):
                a, b = node.inputs
                visit(a, scaled(scale, n / size(a)))
                visit(b, scaled(scale, -n / size(b)))
                return
            if isinstance(sop, ps.Neg):
                visit(node.inputs[0], scaled(scale, -1.0))
                return
            if isinstance(sop, ps.Mul):
                dep = [i for i in node.inputs if depends(i)]
                rest = [i for i in node.inputs if not depends(i)]
                if len(dep) == 1 and all(size(r) == 1 for r in rest):
                    (d,) = dep
                    factor = pt.prod([pt.cast(r, "float64").reshape(()) for r in rest])
                    new = factor if isinstance(scale, float) and scale == 1.0 else scale * factor
                    visit(d, scaled(new, n / size(d)))
                    return
        out.append(Piece(v, scale))

    visit(term, 1.0)
    return out


# --------------------------------------------------------------------------- colouring
def greedy_colouring(adjacency: sp.csr_matrix) -> np.ndarray:
    """A proper colouring of the site graph: adjacent sites get different colours.

    Two greedy orders are tried, site order (a checkerboard on even lattices) and DSatur (the
    most constrained uncoloured site next: 3 colours on odd tori); the one with fewer colours
    is kept. ``adjacency`` is a symmetric (sites x sites) CSR matrix; its diagonal is ignored.
    """
    adjacency = sp.csr_matrix(adjacency)
    natural = _greedy(adjacency, range(adjacency.shape[0]))
    if natural.max(initial=-1) <= 1:
        return natural  # already optimal
    dsatur = _dsatur(adjacency)
    return natural if natural.max(initial=-1) <= dsatur.max(initial=-1) else dsatur


def _smallest_free(colours, nb):
    used = colours[nb]
    used = used[used >= 0]
    if used.size == 0:
        return 0
    taken = np.zeros(used.max() + 2, dtype=bool)
    taken[used] = True
    return int(np.argmin(taken))


def _greedy(adjacency, order) -> np.ndarray:
    n = adjacency.shape[0]
    colours = np.full(n, -1, dtype=np.int64)
    indptr, indices = adjacency.indptr, adjacency.indices
    for i in order:
        colours[i] = _smallest_free(colours, indices[indptr[i] : indptr[i + 1]])
    return colours


def _dsatur(adjacency) -> np.ndarray:
    import heapq

    n = adjacency.shape[0]
    indptr, indices = adjacency.indptr, adjacency.indices
    colours = np.full(n, -1, dtype=np.int64)
    seen: list[set] = [set() for _ in range(n)]
    degree = np.diff(indptr)
    heap = [(0, -int(degree[i]), i) for i in range(n)]
    heapq.heapify(heap)
    while heap:
        neg_sat, _, i = heapq.heappop(heap)
        if colours[i] >= 0 or -neg_sat != len(seen[i]):
            continue
        nb = indices[indptr[i] : indptr[i + 1]]
        c = _smallest_free(colours, nb)
        colours[i] = c
        for j in nb:
            if colours[j] < 0 and c not in seen[j]:
                seen[j].add(c)
                heapq.heappush(heap, (-len(seen[j]), -int(degree[j]), int(j)))
    return colours


# --------------------------------------------------------------------------- the plan
def _unreduced(cond: Variable) -> list[Variable]:
    """The conditions an ``all`` reduction (of a list of ``all`` reductions, as PyMC's
    ``check_parameters`` builds it) combines, unreduced."""
    node = cond.owner
    if node is None:
        return [cond]
    if isinstance(node.op, CAReduce) and isinstance(node.op.scalar_op, ps.AND):
        (inner,) = node.inputs
        if node.op.axis is not None and len(node.op.axis) != inner.ndim:
            return [cond]
        if inner.owner is not None and isinstance(inner.owner.op, MakeVector):
            return [c for part in inner.owner.inputs for c in _unreduced(part)]
        return [inner]
    return [cond]


def _broadcasts_to(cond: Variable, target: Variable) -> bool:
    """Whether ``cond``'s static shape may broadcast to ``target``'s (no dimension known to
    differ; the rewrite broadcasts with ``broadcast_to``, which refuses at run time otherwise)."""
    if cond.ndim > target.ndim:
        return False
    for c, t in zip(reversed(cond.type.shape), reversed(target.type.shape), strict=False):
        if c is not None and c != 1 and t is not None and c != t:
            return False
    return True


@node_rewriter([CheckParameterValue])
def _local_elementwise_check(fgraph, node):
    """``check(term, all(c_1) & all(c_2))`` -> ``switch(c_1 & c_2, term, -inf)`` elementwise,
    where every ``c_i`` broadcasts to the term (PyMC's parameters broadcast to the value)."""
    if not node.op.can_be_replaced_by_ninf:
        return None
    expr, *conds = node.inputs
    return _elementwise_switch([c for cond in conds for c in _unreduced(cond)], expr, expr)


def _elementwise_switch(parts: list[Variable], expr: Variable, like: Variable):
    """``[switch(parts[0] & parts[1] & ..., expr, -inf)]`` with the conditions broadcast to
    ``expr`` (as ``like``'s dtype), or None when a condition cannot fit the term."""
    if not all(_broadcasts_to(c, expr) for c in parts):
        return None
    ok = parts[0]
    for c in parts[1:]:
        ok = pt.and_(ok, c)
    if ok.ndim:  # never wider than the term: a condition that does not fit raises instead
        ok = pt.broadcast_to(ok, expr.shape)
    out = pt.switch(ok, expr, -np.inf)
    if out.type.broadcastable != like.type.broadcastable:
        return None
    return [pt.cast(out, like.dtype)]


def _strip_scalar_wrappers(v: Variable) -> Variable:
    """``v`` without the expand-dims and scalar round trips that wrap a reduced condition."""
    while v.owner is not None:
        op = v.owner.op
        if isinstance(op, TensorFromScalar | ScalarFromTensor):
            v = v.owner.inputs[0]
        elif isinstance(op, DimShuffle) and op.is_expand_dims:
            v = v.owner.inputs[0]
        else:
            break
    return v


def _is_minus_inf(v: Variable) -> bool:
    v = _strip_scalar_wrappers(v)
    if not isinstance(v, Constant):
        return False
    data = np.asarray(v.data)
    return data.size == 1 and float(data.ravel()[0]) == -np.inf


@node_rewriter([pt.switch])
def _local_elementwise_check_switch(fgraph, node):
    """``switch(all(c_1) & all(c_2), term, -inf)`` (a check PyMC already turned into a switch)
    -> the same switch with the conditions elementwise (see :func:`_local_elementwise_check`)."""
    cond, expr, other = node.inputs
    if not _is_minus_inf(other):
        return None
    reduced = _strip_scalar_wrappers(cond)
    parts = _unreduced(reduced)
    if parts == [reduced]:
        return None  # not a reduction
    return _elementwise_switch(parts, expr, node.outputs[0])


def elementwise_checks(terms: list[Variable]) -> list[Variable]:
    """``terms`` with PyMC's parameter checks applied element by element.

    A check reduces its conditions over the whole term (``switch(all(n >= 0), logp, -inf)``):
    every element of a Binomial whose ``n`` is the block would then depend on every site, and
    the term would be global. Element by element (``switch(n >= 0, logp, -inf)``, conditions
    broadcast to the term) the sum of the elements is the same (``-inf`` as soon as any
    condition fails) and each element depends on its own sites only. Checks whose conditions
    do not broadcast to their term, and checks that must raise, are left as they are. Works on
    a clone; the model's graph is not changed.
    """
    return rewritten_clone(terms, _local_elementwise_check, _local_elementwise_check_switch)


def term_dependencies(
    model, replace: dict, x: Variable, n_sites: int, x0, max_term_sites: int = 32
):
    """Dependencies on the block's sites of every piece of the model's logp terms (a summed
    term read as its elements, :func:`linear_pieces`): a list of :class:`Deps`, one per piece
    that depends on the block, or None when the graph cannot be analysed."""
    terms = elementwise_checks(clone_replace(model.logp(sum=False), replace=replace))
    try:
        an = analyse_dependencies(terms, x, n_sites, x0, max_term_sites)
        pieces = [p for t in terms for p in linear_pieces(t, an)]
    except Exception:  # noqa: BLE001 - any failure of the analysis means: unknown structure
        return None
    return [d for d in (an.deps.get(p.graph) for p in pieces) if d is not None]


@dataclass
class SitePieces:
    """The model's logp as elements, and the sites each element touches (for evaluating
    one-site changes of many sites at once, :meth:`class_rows`).

    Attributes
    ----------
    x : Variable
        The block vector the graphs are written in.
    elements : Variable
        Every element of the pieces that depend on the block, raveled and concatenated (M,).
    element_sites : scipy.sparse.csr_matrix
        (M x sites) incidence of elements and the sites they touch.
    """

    x: Variable
    elements: Variable
    element_sites: sp.csr_matrix
    _batch: tuple | None = field(default=None, repr=False, compare=False)
    _at: dict = field(default_factory=dict, repr=False, compare=False)

    def _graphs(self, x: Variable) -> tuple[Variable, Variable, Variable]:
        """``(elements at x, elements at the rows of a matrix X, X)``: the batched graph is
        vectorised once and the elements at ``x`` cloned once per ``x``, so the graphs of
        several classes and of both ends of a move share them (smaller graphs to build and to
        compile)."""
        from pymc_lbp.logp.neighbours import unblock_gathers

        if self._batch is None:
            X = pt.matrix("X_moved", dtype="int64")
            batch = unblock_gathers(vectorize_graph(self.elements, replace={self.x: X}))
            self._batch = (batch, X)
        if x not in self._at:
            self._at[x] = substitute(self.elements, {self.x: x})
        batch, X = self._batch
        return self._at[x], batch, X

    def class_rows(self, x: Variable, sites: np.ndarray, values: Variable) -> Variable:
        """Change of the model logp from ``x`` when site ``sites[i]`` alone is set to
        ``values[i, k]``, shape (m, n): for sites that share no element (a colour class), from
        the elements evaluated at ``n`` states where *all* of them moved at once, each element's
        change credited to the one class site it touches. ``n`` evaluations of the elements
        instead of ``m n`` of the whole logp. ``x`` must have finite logp (the kernels never
        move from a state of probability 0); impossible changes are ``-inf``, never NaN."""
        sites = np.asarray(sites, dtype=np.int64)
        M = self.element_sites.shape[0]
        cols = sp.csc_matrix(self.element_sites)
        touched = [cols.indices[cols.indptr[s] : cols.indptr[s + 1]] for s in sites]
        width = max(1, max(t.size for t in touched))
        index = np.full((sites.size, width), M, dtype=np.int64)  # M: an appended zero
        for i, t in enumerate(touched):
            index[i, : t.size] = t
        at_x, batch, X = self._graphs(x)
        n = values.type.shape[1]
        moved = repeated_rows(x, values.shape[1] if n is None else n)
        moved = pt.set_subtensor(moved[:, sites], values.T)
        batch = substitute(batch, {X: moved})  # (n, M)
        change = pt.concatenate([batch - at_x[None, :], pt.zeros_like(batch[:, :1])], axis=1)
        rows = pt.sum(change[:, index], axis=2).T  # (m, n)
        return pt.switch(pt.isnan(rows), -np.inf, rows)


def site_pieces(model, replace: dict, x: Variable, n_sites: int, x0) -> SitePieces | None:
    """:class:`SitePieces` of the model, or None when some piece that depends on the block
    couples sites the analysis cannot name (or the graph cannot be analysed)."""
    terms = elementwise_checks(clone_replace(model.logp(sum=False), replace=replace))
    try:
        an = analyse_dependencies(terms, x, n_sites, x0)
        pieces = [p for t in terms for p in linear_pieces(t, an)]
    except Exception:  # noqa: BLE001 - any failure of the analysis means: no locality
        return None
    local = []
    for p in pieces:
        d = an.deps.get(p.graph)
        if d is None:
            continue
        if d.glob.any() or p.graph not in an.shape_static:
            return None
        local.append((p, d))
    if not local:
        return None
    elements = pt.concatenate([p.elements().ravel() for p, _ in local])
    incidence = sp.vstack([d.rows for _, d in local], format="csr")
    return SitePieces(x, elements, incidence)


def site_adjacency(deps: list[Deps] | None, n_sites: int) -> sp.csr_matrix | None:
    """Sites x sites matrix, nonzero where two sites share an element of some term (the
    diagonal included); None when some element couples sites the analysis cannot name."""
    if deps is None or any(d.glob.any() for d in deps):
        return None
    if not deps:
        return sp.csr_matrix((n_sites, n_sites))
    D = sp.vstack([d.rows for d in deps], format="csr")
    return sp.csr_matrix(D.T @ D)


def rewritten_clone(graphs: list[Variable], *rewriters) -> list[Variable]:
    """Clones of ``graphs`` (their inputs kept) with the node ``rewriters`` applied in2out; the
    original graphs are not changed."""
    fgraph = FunctionGraph(outputs=[clone_replace(g) for g in graphs], clone=False)
    in2out(*rewriters).rewrite(fgraph)
    return list(fgraph.outputs)


@dataclass
class LocalPlan:
    """Everything the local method needs, as graphs of the block ``x``.

    Attributes
    ----------
    logp : Variable
        The model logp at ``x``.
    deltas : Variable
        Exact differences to every slot's neighbour, ``-inf`` for masked slots and
        zero-probability neighbours.
    n_colours, n_rows : int
        Colours of the site graph and moved states evaluated per call.
    n_local_pieces, n_global_pieces : int
    n_pairs : int
        (slot, element) pairs of the segment sum.
    reason : str
        One line: what was found (for logs).
    """

    x: Variable
    logp: Variable
    deltas: Variable
    n_colours: int
    n_rows: int
    n_local_pieces: int
    n_global_pieces: int
    n_pairs: int
    colours: np.ndarray
    reason: str


def _per_site_slots(layout) -> np.ndarray:
    return np.diff(np.append(layout.site_offset, layout.n_slots))


def build_local_plan(
    model,
    layout,
    replace: dict,
    x: Variable,
    bounds=None,
    x0: np.ndarray | None = None,
    max_term_sites: int = 32,
    max_rows_fraction: float = 0.5,
    max_global_batch: int = 16_000_000,
) -> LocalPlan:
    """Analyse the model and build the graphs of the local exact differences.

    Parameters
    ----------
    model : pymc.Model
    layout : BlockLayout
    replace : dict
        Replacement of the model's value variables (block slices of ``x``, shared variables).
    x : Variable
        The block, an int64 vector.
    bounds : tuple of Variable, optional
        ``(lower, upper)`` support graphs of every site (integer sites).
    x0 : ndarray, optional
        A probe state (zeros by default); only shapes and constant indices are read from it.
    max_term_sites : int
        Elements depending on more sites are handled as global terms.
    max_rows_fraction : float
        Pieces whose colouring would need more moved states than this fraction of the slots are
        evaluated at every neighbour instead (as global pieces).
    max_global_batch : int
        Global pieces are evaluated at all neighbours in one batch of ``slots x sites`` values;
        refuse (``NotLocalError``) above this size (the batched method works in chunks).

    Raises
    ------
    NotLocalError
        With the reason, when no useful locality was found.
    """
    n_sites = layout.n_sites
    terms = model.logp(sum=False)
    terms = elementwise_checks(clone_replace(terms, replace=replace))
    logp = clone_replace(model.logp(), replace=replace)
    if x0 is None:
        x0 = np.zeros(n_sites, dtype=np.int64)
    try:
        an = analyse_dependencies(terms, x, n_sites, x0, max_term_sites)
    except NotLocalError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure of the analysis means: no locality
        raise NotLocalError(f"dependency analysis failed ({type(err).__name__}: {err})") from err

    pieces = [p for t in terms for p in linear_pieces(t, an)]
    local, glob = [], []
    for p in pieces:
        d = an.deps.get(p.graph)
        if d is None:
            continue  # free of the block
        if p.graph not in an.shape_static:
            raise NotLocalError(
                f"the shape of a term ({p.graph}) may depend on the block's values, so it "
                "cannot be evaluated at all neighbours at once"
            )
        if d.glob.any():
            glob.append(p)
        else:
            local.append((p, d))
    if not local:
        raise NotLocalError(
            "every term that depends on the block couples more than "
            f"{max_term_sites} sites (or could not be analysed)"
        )

    # elements, their sites, colouring; pieces whose elements couple so many sites that the
    # colouring gains nothing are evaluated at every neighbour instead (widest first)
    per_site = _per_site_slots(layout)
    limit = max(2.0, max_rows_fraction * layout.n_slots)
    while True:
        D = sp.vstack([d.rows for _, d in local], format="csr")
        colours = greedy_colouring(sp.csr_matrix(D.T @ D))
        n_colours = int(colours.max()) + 1 if n_sites else 0
        rows, row_of = _moved_rows(colours, per_site)
        if len(rows) <= limit:
            break
        widths = [int(np.diff(d.rows.indptr).max(initial=0)) for _, d in local]
        glob.append(local.pop(int(np.argmax(widths)))[0])
        if not local:
            raise NotLocalError(
                f"the terms couple the sites so densely that {n_colours} colours are needed "
                f"({len(rows)} moved states for {layout.n_slots} neighbours)"
            )
    M = D.shape[0]
    n_rows = len(rows)

    # (slot, row, element) pairs
    Dc = sp.csc_matrix(D)
    elem_of_site = [Dc.indices[Dc.indptr[i] : Dc.indptr[i + 1]] for i in range(n_sites)]
    p_slot, p_row, p_elem = [], [], []
    for site in range(n_sites):
        es = elem_of_site[site]
        if es.size == 0:
            continue
        for k in range(int(per_site[site])):
            slot = int(layout.site_offset[site]) + k
            p_slot.append(np.full(es.size, slot))
            p_row.append(np.full(es.size, row_of[(int(colours[site]), k)]))
            p_elem.append(es)
    p_slot = np.concatenate(p_slot).astype(np.int64)
    p_row = np.concatenate(p_row).astype(np.int64)
    p_elem = np.concatenate(p_elem).astype(np.int64)

    # graphs
    T = pt.concatenate([p.elements().ravel() for p, _ in local])
    valid, new_value = _slot_moves(layout, x, bounds)
    moved = []
    for c_k, r in sorted(row_of.items(), key=lambda kv: kv[1]):
        sites = rows[r]
        slots = layout.site_offset[sites] + c_k[1]
        keep = valid[slots]
        vals = pt.switch(keep, new_value[slots], x[sites])
        moved.append(pt.set_subtensor(x[sites], vals))
    # one clone of the elements per moved state (a vectorised graph is not faster here)
    TT = pt.concatenate([T, *[substitute(T, {x: xr}) for xr in moved]])
    deltas = _segment_differences(TT, (n_rows + 1) * M, M, p_slot, p_row, p_elem, layout.n_slots)
    if glob and layout.n_slots * n_sites > max_global_batch:
        raise NotLocalError(
            f"{len(glob)} global term piece(s) on a block of {n_sites} sites: evaluating them at "
            f"all {layout.n_slots} neighbours at once exceeds max_global_batch={max_global_batch}"
        )
    if glob:
        G = pt.sum([pt.sum(p.elements()) for p in glob])
        sites_all = layout.slot_site
        batch = repeated_rows(x, layout.n_slots)
        new_all = pt.switch(valid, new_value, x[sites_all])
        batch = set_per_row(batch, sites_all, new_all)
        X = pt.matrix("X_local", dtype="int64")
        from pymc_lbp.logp.neighbours import unblock_gathers

        G_batch = unblock_gathers(vectorize_graph(G, replace={x: X}))
        G_batch = clone_replace(G_batch, replace={X: batch})
        deltas = deltas + (G_batch - G)
    deltas = pt.switch(valid & ~pt.isnan(deltas), deltas, -np.inf)
    reason = (
        f"local exact differences: {len(local)} local and {len(glob)} global term piece(s), "
        f"{n_colours} colour(s), {n_rows} moved state(s) per call for {layout.n_slots} "
        "neighbours"
    )
    return LocalPlan(
        x,
        logp,
        deltas,
        n_colours,
        n_rows,
        len(local),
        len(glob),
        int(p_slot.size),
        colours,
        reason,
    )


def _segment_differences(TT, n_total, M, p_slot, p_row, p_elem, n_slots):
    """``delta[s] = sum over the pairs of slot s of TT[row + 1, e] - TT[0, e]`` (``TT`` the
    raveled ``(rows + 1, M)`` element values, ``n_total`` elements).

    When the pairs per slot are even enough, a padded (slots x width) gather and a row sum
    (no scatter); otherwise a scatter-add.
    """
    new_idx = (p_row + 1) * M + p_elem
    counts = np.bincount(p_slot, minlength=n_slots)
    width = int(counts.max(initial=0))
    if width == 0:
        return pt.zeros(n_slots)
    if width * n_slots > 2 * p_slot.size + 64:
        return pt.inc_subtensor(pt.zeros(n_slots)[p_slot], TT[new_idx] - TT[p_elem])
    # pairs are grouped by slot; position of each pair within its slot's group
    order = np.argsort(p_slot, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    within = np.arange(p_slot.size) - starts[p_slot[order]]
    pad = n_total  # index of an appended zero
    new_m = np.full((n_slots, width), -1, dtype=np.int64)
    old_m = np.full((n_slots, width), -1, dtype=np.int64)
    new_m[p_slot[order], within] = new_idx[order]
    old_m[p_slot[order], within] = p_elem[order]
    TTz = pt.concatenate([TT, pt.zeros(1)])
    new_m = np.where(new_m < 0, pad, new_m)
    old_m = np.where(old_m < 0, pad, old_m)
    # (width, slots): the row sum runs over contiguous rows
    return pt.sum(TTz[new_m.T.copy()] - TTz[old_m.T.copy()], axis=0)


def _moved_rows(colours, per_site):
    """Moved states: one per colour ``c`` and move ``k``, holding the sites of colour ``c`` that
    have a ``k``-th move; returns ``(rows, row_of)`` with ``row_of[(c, k)]`` the row index."""
    rows, row_of = [], {}
    for c in range(int(colours.max(initial=-1)) + 1):
        sites_c = np.flatnonzero(colours == c)
        for k in range(int(per_site[sites_c].max())):
            row_of[(c, k)] = len(rows)
            rows.append(sites_c[per_site[sites_c] > k])
    return rows, row_of


def _slot_moves(layout, x, bounds):
    """Validity and new value of every slot's move, as graphs of ``x``."""
    site = pt.as_tensor_variable(layout.slot_site)
    kind = pt.as_tensor_variable(layout.slot_kind)
    arg = pt.as_tensor_variable(layout.slot_arg)
    xs = x[site]
    new = pt.switch(pt.eq(kind, BINARY), 1 - xs, pt.switch(pt.eq(kind, CATEGORICAL), arg, xs + arg))
    valid = pt.or_(pt.neq(kind, CATEGORICAL), pt.neq(arg, xs))
    if bounds is not None:
        lo, hi = bounds
        inside = pt.ge(new, lo[site]) & pt.le(new, hi[site])
        valid = pt.switch(pt.eq(kind, INTEGER), inside, valid)
    return valid, pt.cast(new, "int64")


# --------------------------------------------------------------------------- compiled callable
class LocalCheckError(RuntimeError):
    """The local differences disagreed with the model logp in the first-call self-check."""


class LocalDifferences:
    """Compiled ``(logp_x, deltas) = diffs(x)`` from a :class:`LocalPlan`.

    On its first call from a state of finite logp it checks a few differences against the model
    logp evaluated at the neighbours and raises :class:`LocalCheckError` on disagreement.

    Parameters
    ----------
    plan : LocalPlan
    layout : BlockLayout
    compile_kwargs : dict, optional

    Attributes
    ----------
    evals_per_call : int
        Cost of one call in model-logp evaluations: the moved states plus the state itself
        (plus one per slot when global terms are evaluated at every neighbour).
    """

    n_checks = 8

    def __init__(self, plan: LocalPlan, layout, compile_kwargs=None):
        self.plan = plan
        self.layout = layout
        self._kw = dict(compile_kwargs or {})
        self._fn = pm_compile(
            [plan.x], [plan.logp, plan.deltas], on_unused_input="ignore", **self._kw
        )
        self._fn.trust_input = True
        self._logp_fn = None
        self.evals_per_call = plan.n_rows + 1 + (layout.n_slots if plan.n_global_pieces else 0)
        shared = [v for v in ancestors([plan.logp, plan.deltas]) if isinstance(v, SharedVariable)]
        self._shared = [(v, np.shape(v.get_value(borrow=True))) for v in shared]
        self._checked = False

    def check_shapes(self) -> None:
        """Refuse shared variables whose shape changed since the analysis."""
        for v, shape in self._shared:
            now = np.shape(v.get_value(borrow=True))
            if now != shape:
                raise ValueError(
                    f"Shared variable {v.name!r} changed shape from {shape} to {now} after the "
                    "local exact differences were built; build the step again."
                )

    def logp(self, x: np.ndarray) -> float:
        """Model logp at ``x``."""
        if self._logp_fn is None:
            self._logp_fn = pm_compile(
                [self.plan.x], self.plan.logp, on_unused_input="ignore", **self._kw
            )
            self._logp_fn.trust_input = True
        return float(self._logp_fn(x))

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        self.check_shapes()
        logp_x, deltas = self._fn(x)
        logp_x = float(logp_x)
        if not self._checked and np.isfinite(logp_x):
            self._self_check(x, logp_x, deltas)
        return logp_x, deltas

    def _self_check(self, x, logp_x, deltas):
        lay = self.layout
        new, valid = lay.candidates(x)
        slots = np.flatnonzero(valid)
        rng = np.random.default_rng(12345)  # verification only; sampling never sees it
        for s in rng.permutation(slots)[: self.n_checks]:
            y = x.copy()
            y[lay.slot_site[s]] = new[s]
            with np.errstate(invalid="ignore"):
                want = self.logp(y) - logp_x
            want = -np.inf if np.isnan(want) else want
            got = deltas[s]
            same = (got == want) or abs(got - want) <= 1e-8 * (1.0 + abs(logp_x))
            if not same:
                raise LocalCheckError(
                    f"local exact difference of slot {s} is {got}, the model logp gives {want}"
                )
        self._checked = True
