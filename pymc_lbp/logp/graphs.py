"""Graph-building helpers that keep graphs small and compiled.

**Substituting without copying.** ``pytensor.clone_replace(outputs, replace={t: y})`` clones the
ancestors of ``y`` as well as the graph of ``outputs``. Our kernels substitute chains into
templates: the block state after one move becomes the ``x`` of the next move's logp graph, so
each substitution copied every move before it and the graph grew geometrically with the chain
(three unrolled Poisson-site jumps: 14,865 nodes before rewriting, 229 after; their cost in
docs/integer_moves.md). :func:`substitute` clones only the template between its substituted
inputs and its outputs and links the clone to the given variables themselves, as
``graph_replace`` does, without building a ``FunctionGraph``.

**Row copies.** :func:`repeated_rows` broadcasts against a column of zeros:
``pt.repeat(x[None, :], n, axis=0)`` is an ``Alloc`` whose shape reads ``x.shape[0]``, and
building an ``Alloc`` folds its shape over every ancestor of ``x``, whose cost grows with the
square of a chain of moves. For the same reason :func:`dim` reads a length from the static
type where it is known: ``pt.zeros((v.shape[0], k))`` folds ``v.shape[0]`` over the ancestors of
``v`` (a walk over a large graph in NeuralBlock's compiled sweep, where ``v`` holds the model
logp at every block's states: docs/test_suite.md), ``pt.zeros((dim(v, 0), k))`` does not.

**One element per row.** ``matrix[pt.arange(m), cols]`` is pytensor's general
``AdvancedSubtensor`` (its ``set_subtensor`` the general ``AdvancedIncSubtensor``), which has no
C implementation: the C backend runs it in Python, a large share of a small compiled kernel's
call (docs/integer_moves.md). :func:`pick_per_row` and :func:`set_per_row` index the flattened
matrix with ``row * width + col`` (``AdvancedSubtensor1`` / ``AdvancedIncSubtensor1``,
compiled), with the same values.

**Rewriting a copy.** :func:`rewritten_clone` applies node rewriters to clones of graphs (the
model's own graph stays as it is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytensor.tensor as pt
from pytensor.graph.basic import Variable, clone_get_equiv
from pytensor.graph.fg import FunctionGraph
from pytensor.graph.replace import clone_replace
from pytensor.graph.rewriting.basic import in2out


def substitute(
    outputs: Variable | Sequence[Variable], replace: Mapping[Variable, Variable]
) -> Variable | list[Variable]:
    """``outputs`` with every key of ``replace`` standing for its value (a new graph; the
    template is not changed, the values' own graphs are reused, not copied). Roots of the
    template that are not keys (shared variables, constants) are kept."""
    single = isinstance(outputs, Variable)
    outs = [outputs] if single else list(outputs)
    memo = dict(replace)
    equiv = clone_get_equiv(list(replace), outs, copy_inputs=False, copy_orphans=False, memo=memo)
    new = [equiv[o] for o in outs]
    return new[0] if single else new


def _flat_index(matrix: Variable, cols: Variable) -> Variable:
    rows = pt.arange(matrix.shape[0], dtype="int64")
    return rows * matrix.shape[1] + pt.cast(cols, "int64")


def pick_per_row(matrix: Variable, cols: Variable) -> Variable:
    """``matrix[i, cols[i]]`` for every row ``i`` (``cols`` of length ``matrix.shape[0]``)."""
    return matrix.ravel()[_flat_index(matrix, cols)]


def set_per_row(matrix: Variable, cols: Variable, values: Variable) -> Variable:
    """``matrix`` with ``matrix[i, cols[i]] = values[i]`` for every row ``i``."""
    flat = pt.set_subtensor(matrix.ravel()[_flat_index(matrix, cols)], values)
    return flat.reshape(matrix.shape)


def dim(v: Variable, axis: int) -> int | Variable:
    """Length of ``v`` along ``axis``: an int where its type knows it, else ``v.shape[axis]``."""
    known = v.type.shape[axis]
    return int(known) if known is not None else v.shape[axis]


def repeated_rows(x: Variable, n: int | Variable) -> Variable:
    """``n`` copies of the vector ``x`` as the rows of a matrix (see the module docstring)."""
    return x[None, :] + pt.zeros((n, 1), dtype=x.dtype)


def rewritten_clone(graphs: list[Variable], *rewriters) -> list[Variable]:
    """Clones of ``graphs`` (their inputs kept) with the node ``rewriters`` applied in2out; the
    original graphs are not changed."""
    fgraph = FunctionGraph(outputs=[clone_replace(g) for g in graphs], clone=False)
    in2out(*rewriters).rewrite(fgraph)
    return list(fgraph.outputs)


__all__ = ["dim", "pick_per_row", "repeated_rows", "rewritten_clone", "set_per_row", "substitute"]
