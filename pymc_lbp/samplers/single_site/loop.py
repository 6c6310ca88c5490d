"""Run the single-site kernel for many steps inside one compiled call (the one pytensor driver,
:func:`pymc_lbp.samplers.graph_driver.scan_kernel`).

The compiled function maps ``(x, logp, deltas, U)`` to the state after ``U.shape[0]`` steps and
the per-draw summaries; ``U`` holds the uniforms of every step (one row per step), drawn by the
caller from the step's ``self.rng``. Nothing runs in Python between steps.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pytensor.tensor as pt

from pymc_lbp.compiling import pm_compile
from pymc_lbp.samplers.graph_driver import CompiledRuns, StepsResult, scan_kernel
from pymc_lbp.samplers.single_site.graph import (
    SingleSiteMoves,
    State,
    balanced_weights,
    single_site_kernel,
)
from pymc_lbp.samplers.traces import clear_traces


def _block_inputs(n_sites, n_slots) -> tuple:
    """Symbolic ``(x, logp, deltas)`` of the block, with these static sizes (None: any)."""
    return (
        pt.tensor("x", dtype="int64", shape=(n_sites,)),
        pt.scalar("logp", dtype="float64"),
        pt.tensor("deltas", dtype="float64", shape=(n_slots,)),
    )


class CompiledSteps:
    """:func:`~pymc_lbp.samplers.single_site.graph.single_site_kernel` on a step's differences
    and block layout, compiled to run ``n`` steps per call (LocallyBalanced, GibbsWithGradients,
    SelfBalancing); each step consumes :attr:`n_uniforms` uniforms.

    With the JAX backend, which needs shapes known when it traces, the function is compiled on
    first use for the shapes of its arguments, once per number of steps (a step method's
    ``steps_per_draw`` is fixed after tuning, so a handful of compilations at most); the other
    backends compile one function for every shape, at construction.

    Parameters
    ----------
    differences : Differences
        The step's differences (their ``graph`` is the kernel's target).
    layout : BlockLayout
    log_g : callable
        The balancing function, a graph builder.
    compile_kwargs : dict, optional
        Passed to :func:`pymc.pytensorf.compile` (e.g. ``{"mode": "NUMBA"}``).
    compile_now : bool
        False: nothing is compiled until the first call (the JAX program only reads
        :meth:`step_graph` and :meth:`prepare_graph`).
    """

    n_uniforms = 2

    def __init__(
        self,
        differences,
        layout,
        log_g: Callable,
        compile_kwargs: dict | None = None,
        compile_now: bool = True,
    ):
        moves = SingleSiteMoves(layout)
        kernel = partial(single_site_kernel, target=differences.graph, log_g=log_g, moves=moves)
        prepare = partial(balanced_weights, log_g=log_g)
        self._parts = (kernel, prepare, dict(compile_kwargs or {}))
        self.runs = CompiledRuns(self._compile, compile_kwargs, compile_now)

    def graph(self, shapes: tuple | None) -> tuple[list, list]:
        """Inputs ``[x, logp, deltas, uniforms]`` and outputs ``[x, logp, deltas, sum_accept,
        n_accepted, n_evaluated]`` of the run as graphs; ``shapes = (n_sites, n_slots,
        n_steps)`` fixes the input shapes (the JAX program of :mod:`pymc_lbp.whole_model`
        loops :meth:`step_graph`, this scan's body, instead)."""
        kernel, prepare, _ = self._parts
        n_sites, n_slots, n_steps = shapes if shapes is not None else (None, None, None)
        x, logp, deltas = _block_inputs(n_sites, n_slots)
        uniforms = pt.tensor("uniforms", dtype="float64", shape=(n_steps, self.n_uniforms))
        # the prepared weights stay inside the loop
        last, info = scan_kernel(kernel, State(x, logp, deltas, *prepare(deltas)), uniforms)
        outs = [last.x, last.logp, last.deltas, *info]
        clear_traces(outs)
        return [x, logp, deltas, uniforms], outs

    def step_graph(self, n_sites: int, n_slots: int) -> tuple[list, list]:
        """One step as graphs, for a loop written in the target backend (the JAX program's
        ``jax.lax.scan``, :mod:`pymc_lbp.samplers.single_site.jax_steps`): inputs ``[u, x,
        logp, deltas, log_w, cdf, log_z]`` (``u`` one row of uniforms, the rest the
        :class:`~pymc_lbp.samplers.single_site.graph.State`) and outputs the next state's six
        parts followed by ``accept`` (float64), ``accepted`` and ``evaluated`` (int64): the body
        of :meth:`graph`'s ``scan``."""
        kernel, _, _ = self._parts
        u = pt.tensor("u", dtype="float64", shape=(self.n_uniforms,))
        x, logp, deltas = _block_inputs(n_sites, n_slots)
        log_w = pt.tensor("log_w", dtype="float64", shape=(n_slots,))
        cdf = pt.tensor("cdf", dtype="float64", shape=(n_slots,))
        log_z = pt.scalar("log_z", dtype="float64")
        state = State(x, logp, deltas, log_w, cdf, log_z)
        new, info = kernel(u, state)
        outs = [
            *new,
            pt.cast(info.accept, "float64"),
            pt.cast(info.accepted, "int64"),
            pt.cast(info.evaluated, "int64"),
        ]
        clear_traces(outs)
        return [u, *state], outs

    def prepare_graph(self, deltas: pt.TensorVariable) -> list:
        """``[log_w, cdf, log_z]``: the prepared weights of a state with these differences."""
        return list(self._parts[1](deltas))

    def _compile(self, shapes: tuple | None):
        """The compiled run; ``shapes = (n_sites, n_slots, n_steps)`` fixes the input shapes."""
        inputs, outs = self.graph(shapes)
        fn = pm_compile(inputs, outs, on_unused_input="ignore", **self._parts[2])
        fn.trust_input = True
        return fn

    def __call__(
        self, x: np.ndarray, logp: float, deltas: np.ndarray, uniforms: np.ndarray
    ) -> StepsResult:
        """Run ``len(uniforms)`` steps from ``(x, logp, deltas)``."""
        fn = self.runs((np.size(x), np.size(deltas), len(uniforms)))
        x_out, logp_out, deltas_out, acc, n_acc, n_eval = fn(
            np.ascontiguousarray(x, dtype=np.int64),
            np.asarray(logp, dtype=np.float64),
            np.ascontiguousarray(deltas, dtype=np.float64),
            np.ascontiguousarray(uniforms, dtype=np.float64),
        )
        return StepsResult(
            np.array(x_out),
            float(logp_out),
            np.array(deltas_out),
            float(acc),
            int(n_acc),
            int(n_eval),
        )
