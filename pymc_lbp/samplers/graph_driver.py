"""The one pytensor driver of the samplers' kernels (issue #56): any kernel, a draw's steps in
one ``scan``.

Every room's kernel has BlackJAX's shape, as a graph builder: ``step(u, state, *params) ->
(state, info)``, ``state`` a tuple (or NamedTuple) of graphs carried from step to step, ``info``
a tuple of scalar graphs one step reports, ``u`` one step's row of its inputs. :func:`scan_kernel`
runs it once per row, in the backend ``pm.sample``'s step compiles for (C, NUMBA or JAX), and
gives the last state and the sums of the steps' ``info``. The JAX program of
:mod:`pymc_lbp.whole_model` runs the same steps with :func:`pymc_lbp.samplers.jax_driver.
scan_kernel`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from pymc_lbp.samplers.traces import clear_traces


@dataclass
class StepsResult:
    """A compiled run's state after its steps (the block vector, its logp and differences) and
    the sums of what the steps reported."""

    x: np.ndarray
    logp: float
    deltas: np.ndarray
    sum_accept: float
    n_accepted: int
    n_evaluated: int


def scan_kernel(
    step: Callable,
    state: Sequence[Variable],
    sequences: Variable | Sequence[Variable],
    params: Sequence[Variable] = (),
) -> tuple[tuple, tuple]:
    """Graphs of ``(state, info)`` after ``step(u, state, *params) -> (state, info)`` once per
    row of ``sequences``: the last state (of ``state``'s type) and the sum over the steps of each
    field of ``info`` (float64 for floating fields, int64 for integer and boolean ones).

    The steps' reports travel as one float64 vector per step, summed after the loop: a value
    carried around a ``scan`` costs its call a handful of nodes, most of a short call's time
    (integer counts stay exact as floats below 2**53).

    Parameters
    ----------
    step : callable
        The kernel, a graph builder.
    state : sequence of Variable
        The state before the first step.
    sequences : Variable or sequence of Variable
        The steps' inputs, one row per step; with several, ``u`` is the tuple of their rows.
    params : sequence of Variable
        Inputs every step reads (the ``scan``'s non-sequences).
    """
    seqs = list(sequences) if isinstance(sequences, list | tuple) else [sequences]
    n_seq, n_state = len(seqs), len(state)
    make_state = type(state)._make if hasattr(state, "_fields") else tuple
    info_dtypes: list[str] = []

    def body(*args):
        u = args[0] if n_seq == 1 else tuple(args[:n_seq])
        current = make_state(args[n_seq : n_seq + n_state])
        new, info = step(u, current, *args[n_seq + n_state :])
        info_dtypes[:] = [v.dtype for v in info]
        out = (*new, pt.stack([pt.cast(v, "float64") for v in info]))
        clear_traces(out)  # the inner graph is rewritten on its own
        return out

    outs = pytensor.scan(
        body,
        sequences=seqs,
        outputs_info=[*state, None],
        non_sequences=list(params),
        return_updates=False,
    )
    last = make_state(o[-1] for o in outs[:n_state])
    sums = outs[n_state].sum(axis=0)
    info = tuple(
        sums[i] if dtype.startswith("float") else pt.cast(sums[i], "int64")
        for i, dtype in enumerate(info_dtypes)
    )
    return last, info


def needs_static_shapes(compile_kwargs: dict | None) -> bool:
    """Whether the backend traces shapes as values (JAX: a ``scan`` over a number of steps that
    comes from an input's shape fails with "Shapes must be 1D sequences of concrete values")."""
    mode = (compile_kwargs or {}).get("mode")
    if mode is None:
        return False
    if isinstance(mode, str):
        return mode.upper() == "JAX"
    return "jax" in type(getattr(mode, "linker", None)).__name__.lower()


class CompiledRuns:
    """A kernel's compiled run, one function for every number of steps, or, with a backend that
    traces shapes as values (JAX, :func:`needs_static_shapes`), one per number, compiled on
    first use (a step's number of steps per draw is fixed after tuning: a handful at most).

    Parameters
    ----------
    compile_run : callable
        ``key -> function``: the run compiled with its shapes fixed by ``key`` (``None``: not
        fixed).
    compile_kwargs : dict, optional
        The compilation's options (their ``mode`` decides).
    compile_now : bool
        Compile the one function now (else at the first call).
    """

    def __init__(self, compile_run: Callable, compile_kwargs: dict | None, compile_now=True):
        self.compile_run = compile_run
        self.static_shapes = needs_static_shapes(compile_kwargs)
        self._fns: dict = {}
        if compile_now and not self.static_shapes:
            self(None)

    def __call__(self, key):
        """The function for the shapes ``key`` (ignored unless shapes must be static)."""
        key = key if self.static_shapes else None
        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = self.compile_run(key)
        return fn


__all__ = ["CompiledRuns", "StepsResult", "needs_static_shapes", "scan_kernel"]
