"""A block's logp and neighbour differences at many states in one compiled call.

:class:`~pymc_lbp.SelfBalancing` advances its auxiliary particles together while it learns;
each learning step evaluates every particle at its proposal. Evaluated one row per call, the
particles cost a compiled call each (tens of microseconds of overhead on small models); here the
step's one-row graph ``x -> (logp, deltas)`` (:meth:`~pymc_lbp.logp.differences.Differences.graph`)
is vectorised over a batch of rows, with PyMC's parameter checks kept per row and batched gathers
turned into plain indexing (as the exact differences' own batched evaluation does). Where the
graph cannot be vectorised, or would hold too much memory (a row's graph that already evaluates
every neighbour state), the one-row graph runs in a ``scan`` over the rows instead. Either way
the values are the one-row graph's (tests/samplers/self_balancing/test_self_balancing_batch.py
checks them row by row).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from pytensor.graph.replace import vectorize_graph

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.vectorising import checks_per_row, unblock_gathers
from pymc_lbp.samplers.traces import clear_traces

Target = Callable[[Variable], tuple[Variable, Variable]]

VECTORISED_ELEMENTS = 4_000_000
"""Largest ``rows x slots x sites`` vectorised when one row's graph evaluates every neighbour
state (exact differences by batched evaluation); above it the rows are scanned."""


def rows_graph(target: Target, X: Variable, vectorise: bool = True) -> tuple[Variable, Variable]:
    """Graphs of ``(logp, deltas)`` at every row of the ``(B, n)`` int matrix ``X``:
    vectorised (``vectorise=True`` and the graph allows it) or one row at a time in a ``scan``."""
    if vectorise:
        x = pt.tensor("x_row", dtype="int64", shape=(X.type.shape[1],))
        try:
            outs = [checks_per_row(o) for o in target(x)]
            outs = vectorize_graph(outs, replace={x: X})
            return tuple(unblock_gathers(o) for o in outs)
        except (NotImplementedError, ValueError, TypeError):
            pass  # the scan below works for every graph

    def body(row):
        out = list(target(row))
        clear_traces(out)
        return out

    return tuple(pytensor.scan(body, sequences=[X], return_updates=False))


def fits_vectorised(differences, n_rows: int) -> bool:
    """Whether ``n_rows`` rows of ``differences`` may be vectorised (see
    :data:`VECTORISED_ELEMENTS`)."""
    exact = getattr(differences, "exact", differences)  # pairwise couplings: their exact ones
    if getattr(exact, "method", None) != "batched":
        return True
    layout = differences.layout
    return n_rows * layout.n_slots * layout.n_sites <= VECTORISED_ELEMENTS


class BatchedRows:
    """``X -> (logp, deltas)`` for a batch of states of a block, compiled on first use.

    Parameters
    ----------
    differences : Differences
        The step's differences (their :meth:`graph` is evaluated at every row).
    n_rows : int
        Rows per call (decides between vectorising and scanning, see :func:`fits_vectorised`).
    compile_kwargs : dict, optional
    """

    def __init__(self, differences, n_rows: int, compile_kwargs: dict | None = None):
        self.vectorised = fits_vectorised(differences, n_rows)
        self.shape = (int(n_rows), differences.layout.n_sites)
        self._graph = differences.graph
        self._compile_kwargs = dict(compile_kwargs or {})
        self._fn = None

    def __call__(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._fn is None:
            Xv = pt.tensor("X", dtype="int64", shape=self.shape)
            outs = list(rows_graph(self._graph, Xv, self.vectorised))
            clear_traces(outs)
            self._fn = pm_compile([Xv], outs, on_unused_input="ignore", **self._compile_kwargs)
            self._fn.trust_input = True
        logp, deltas = self._fn(np.ascontiguousarray(X, dtype=np.int64))
        return np.asarray(logp, dtype=np.float64), np.asarray(deltas, dtype=np.float64)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_fn"] = None  # recompiled (from pytensor's cache) where it is used
        return state


__all__ = ["VECTORISED_ELEMENTS", "BatchedRows", "fits_vectorised", "rows_graph"]
