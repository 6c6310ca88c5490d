"""Graph hygiene before compiling a kernel: no creation stack traces.

pytensor's ``local_useless_switch`` appends a switch's input and output traces (``tag.trace``,
debugging aids) to its surviving branch. When that branch is a constant merged across the graph
(a ``0``), its trace doubles at every such switch; a kernel graph holds several evaluations of
the model, and compiling the integer jumps of a two-site block once exhausted 24 GB in rewriting.
Traces that are empty stay empty, so every kernel clears them before compiling.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytensor.graph.basic import Variable
from pytensor.graph.traversal import ancestors


def clear_traces(outputs: Sequence[Variable]) -> None:
    """Drop the creation stack traces of every variable of the graph of ``outputs``."""
    for var in ancestors(list(outputs)):
        if getattr(var.tag, "trace", None):
            var.tag.trace = []


__all__ = ["clear_traces"]
