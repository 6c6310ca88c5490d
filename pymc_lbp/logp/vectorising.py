"""Graph rewrites that let a logp graph be vectorised over a batch of states, row by row.

:func:`checks_per_row` turns PyMC's parameter checks into per-row switches before vectorising (so
one impossible row does not void the batch); :func:`unblock_gathers` replaces the Python-looped
``Blockwise`` gathers that ``vectorize_graph`` builds by plain advanced indexing;
:func:`one_site_rows` evaluates a graph at many one-site changes of a state.
"""

from __future__ import annotations

import pytensor.tensor as pt
from pymc.logprob.utils import local_check_parameter_to_ninf_switch
from pytensor.graph.basic import Variable
from pytensor.graph.replace import clone_replace, graph_replace, vectorize_graph
from pytensor.graph.traversal import graph_inputs, io_toposort
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1

from pymc_lbp.logp.graphs import dim, repeated_rows, rewritten_clone, set_per_row


def checks_per_row(logp: Variable) -> Variable:
    """``logp`` with PyMC's parameter checks as ``switch(condition, term, -inf)``.

    Compiled, a check becomes that switch anyway, but on the graph as written: vectorised over a
    batch of states afterwards, its condition would be reduced over the whole batch, so one row
    with an impossible parameter (a HyperGeometric population below its sample size) would void
    every row. Rewritten before vectorising, each row keeps its own condition. Checks that must
    raise (``can_be_replaced_by_ninf`` false) are left as they are. The model's own graph is not
    changed (the rewrite works on a clone).
    """
    return rewritten_clone([logp], local_check_parameter_to_ninf_switch)[0]


def unblock_gathers(out: Variable) -> Variable:
    """Replace batched gathers from unbatched tables by plain advanced indexing.

    ``vectorize_graph`` wraps ``table[i, j]`` with batched index arrays in a ``Blockwise``, which
    loops in Python over the batch. When every index is an array, NumPy's broadcasting of index
    arrays does the batching: ``table[I, J]`` with ``I, J`` of shape ``(B, ...)`` is the batched
    gather from a table without batch dimension (its leading axis broadcastable), and
    ``table[R, I, J]`` with the row numbers ``R`` (shape ``(B, 1, ...)``) from a batched one.
    """
    while True:  # one gather at a time: a replaced gather may read from another
        new = _unblock_one_gather(out)
        if new is None:
            return out
        out = graph_replace(out, new)


def one_site_rows(graph: Variable, x: Variable, sites: Variable, values: Variable) -> Variable:
    """``graph`` (of the block vector ``x``) at every row ``r``: ``x`` with ``x[sites[r]] =
    values[r]``, vectorised over the rows."""
    X = pt.matrix("X", dtype="int64")
    batch = unblock_gathers(vectorize_graph(graph, replace={x: X}))
    rows = set_per_row(repeated_rows(x, dim(sites, 0)), sites, values)
    return clone_replace(batch, replace={X: rows})


def _unblock_one_gather(out: Variable) -> dict | None:
    """``{batched gather: plain indexing}`` for the first rewritable gather of ``out`` (or None)."""
    for node in io_toposort(graph_inputs([out]), [out]):
        op = node.op
        if not (
            isinstance(op, Blockwise)
            and isinstance(op.core_op, AdvancedSubtensor | AdvancedSubtensor1)
            and all(isinstance(i.type, pt.TensorType) for i in node.inputs)
        ):
            continue
        table, *indices = node.inputs
        n_batch = (
            node.outputs[0].ndim
            - op.core_op.make_node(
                *[pt.tensor(dtype=i.dtype, shape=(None,) * (i.ndim - 1)) for i in node.inputs]
            )
            .outputs[0]
            .ndim
        )
        if n_batch != 1 or any(i.ndim < 1 for i in indices):
            continue
        # index arrays broadcast from the right: pad each after its batch axis to equal rank
        rank = max(i.ndim for i in indices)
        indices = [i.dimshuffle(0, *(["x"] * (rank - i.ndim)), *range(1, i.ndim)) for i in indices]
        if table.type.shape[0] != 1:  # a batched table: its batch axis indexed by the row
            rows = pt.arange(table.shape[0]).reshape((-1,) + (1,) * (rank - 1))
            return {node.outputs[0]: table[(rows, *indices)]}
        return {node.outputs[0]: table[0][tuple(indices)]}
    return None
