"""The model's logp terms as sums of elements, and the sites each element touches.

Step 1 of :mod:`pymc_lbp.logp.local_differences` (:func:`linear_pieces`, after
:func:`elementwise_checks`) and, on :func:`~pymc_lbp.logp.dependency_analysis.analyse_dependencies`,
the sites of every piece (:func:`term_dependencies`, :func:`site_pieces`, :func:`site_adjacency`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytensor.tensor as pt
import scipy.sparse as sp
from pymc.logprob.utils import CheckParameterValue
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.scalar import basic as ps
from pytensor.tensor.basic import (
    Alloc,
    Join,
    MakeVector,
    ScalarFromTensor,
    TensorFromScalar,
)
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape, SpecifyShape

from pymc_lbp.logp.dependency_analysis import (
    Analysis,
    Deps,
    _shape_of,
    _size,
    _value,
    analyse_dependencies,
)
from pymc_lbp.logp.graphs import repeated_rows, rewritten_clone, substitute
from pymc_lbp.logp.model_logp import model_logp
from pymc_lbp.logp.vectorising import unblock_gathers


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
        return scale if factor == 1.0 else scale * factor

    def visit(v, scale):
        node = v.owner
        if node is None or not depends(v) or not sized(v) or not all(map(sized, node.inputs)):
            out.append(Piece(v, scale))
            return
        op = node.op
        summed = isinstance(op, CAReduce) and isinstance(op.scalar_op, ps.Add)
        if summed or isinstance(op, DimShuffle | Reshape | SpecifyShape):
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


def _dependent_pieces(model, replace, x, n_sites, x0, max_term_sites=32):
    """``(piece, its Deps, whether its shape is fixed)`` for every piece of the model's terms
    that depends on the block (:func:`linear_pieces`); None when the graph cannot be analysed."""
    terms = elementwise_checks(clone_replace(model_logp(model, sum=False), replace=replace))
    try:
        an = analyse_dependencies(terms, x, n_sites, x0, max_term_sites)
        pieces = [p for t in terms for p in linear_pieces(t, an)]
    except Exception:  # noqa: BLE001 - any failure of the analysis means: unknown structure
        return None
    dependent = [p for p in pieces if an.deps.get(p.graph) is not None]
    return [(p, an.deps[p.graph], p.graph in an.shape_static) for p in dependent]


def term_dependencies(
    model, replace: dict, x: Variable, n_sites: int, x0, max_term_sites: int = 32
):
    """Dependencies on the block's sites of every piece of the model's logp terms (a summed
    term read as its elements, :func:`linear_pieces`): a list of :class:`Deps`, one per piece
    that depends on the block, or None when the graph cannot be analysed."""
    found = _dependent_pieces(model, replace, x, n_sites, x0, max_term_sites)
    return None if found is None else [d for _, d, _ in found]


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
    found = _dependent_pieces(model, replace, x, n_sites, x0)
    if not found or any(d.glob.any() or not fixed for _, d, fixed in found):
        return None
    elements = pt.concatenate([p.elements().ravel() for p, _, _ in found])
    incidence = sp.vstack([d.rows for _, d, _ in found], format="csr")
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


__all__ = [
    "Piece",
    "SitePieces",
    "elementwise_checks",
    "linear_pieces",
    "site_adjacency",
    "site_pieces",
    "term_dependencies",
]
