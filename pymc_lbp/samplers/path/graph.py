"""The path auxiliary kernel (PathAuxiliaryLBP) as a pytensor graph, and its compiled loop.

One transition (:func:`path_kernel`) is the five steps of
:func:`pymc_lbp.samplers.path.reference.path_step`, the tested numpy reference, from the same row
of noise (:func:`~pymc_lbp.samplers.path.reference.noise_width`), drawn by the step from
``self.rng``. The race and the path's order log-probabilities are two Ops of
:mod:`pymc_lbp.samplers.path.ops` (C, NUMBA and JAX implementations), one or two passes over the
sites each: they write the remaining mass as (mass off the path) + (suffix sums of the path), a
sum of positive terms, with no cancellation however much mass the path holds. On all-binary
blocks the state carries the site weights only (sites are slots; no within-site probabilities).

The scale ``U`` is an input of the compiled function: it is frozen after tuning, and changing it
needs no recompilation. While tuning, the loop carries the adaptation's state instead
(``log U``, its average, the update count and the doubling flag): each step's scale is
``exp(log U)`` and each path step (not the single-site ones) updates the state with its
acceptance probability (:meth:`pymc_lbp.samplers.path.adaptation.PathLengthAdaptation.update_graph`,
the arithmetic of the Python update), so tuning draws run in one call too.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from pytensor.compile.mode import get_mode
from pytensor.graph.basic import Variable

from pymc_lbp.compiling import pm_compile
from pymc_lbp.logp.layout import BlockLayout
from pymc_lbp.samplers.graph_driver import CompiledRuns, scan_kernel
from pymc_lbp.samplers.mh_graph import finite, mh_accept, mh_log_ratio
from pymc_lbp.samplers.path.adaptation import AdaptState, PathLengthAdaptation
from pymc_lbp.samplers.path.ops import PathRace, ReversePathLogProb, register_backend
from pymc_lbp.samplers.path.reference import PathSteps, noise_width
from pymc_lbp.samplers.single_site.graph import GraphBalancing, SingleSiteMoves, Target
from pymc_lbp.samplers.traces import clear_traces


class PathState(NamedTuple):
    """Carried between steps: block vector, logp, differences, and the weights derived from
    them (site log-weights, and the within-site log-probabilities of the slots; ``within`` is
    ``None`` on all-binary blocks, whose sites are their slots)."""

    x: Variable
    logp: Variable
    deltas: Variable
    site_w: Variable
    within: Variable | None

    def carried(self) -> tuple[Variable, ...]:
        """The parts a loop carries (``within`` only where there is one)."""
        return tuple(v for v in self if v is not None)

    @classmethod
    def from_carried(cls, parts, moves: PathMoves) -> PathState:
        """Inverse of :meth:`carried`."""
        return cls(*parts, None) if moves.all_binary else cls(*parts)


class PathInfo(NamedTuple):
    """What one transition reports."""

    accept: Variable  # MH acceptance probability (0 when no path could be drawn)
    accepted: Variable  # bool
    evaluated: Variable  # bool: the target was evaluated at a proposal
    length: Variable  # R (int64)


def backend_of(compile_kwargs: dict | None) -> str | None:
    """``"numba"`` or ``"jax"`` where the graph is compiled whole by that backend, else ``None``
    (the C backend, pytensor's default, which runs the graph op by op)."""
    linker = type(get_mode((compile_kwargs or {}).get("mode")).linker).__name__.lower()
    return next((b for b in ("numba", "jax") if b in linker), None)


class PathMoves(SingleSiteMoves):
    """Layout constants of the path kernel: the single-site ones, plus a padded
    ``(n_sites, max slots per site)`` table of each site's slots (padding points past the last
    slot, at a ``-inf`` weight)."""

    def __init__(self, layout: BlockLayout):
        super().__init__(layout)
        self.n_sites = layout.n_sites
        self.n_slots = layout.n_slots
        counts = np.diff(np.append(layout.site_offset, layout.n_slots))
        width = int(counts.max()) if counts.size else 1
        table = np.full((layout.n_sites, width), layout.n_slots, dtype=np.int64)
        for k in range(width):
            has = counts > k
            table[has, k] = layout.site_offset[has] + k
        self.table = pt.as_tensor_variable(table)


def path_weights(log_w: Variable, moves: PathMoves) -> tuple[Variable, Variable | None]:
    """``(site_w, within)`` from slot log-weights (all-binary blocks: sites are slots, and
    ``within``, all 0, is ``None``)."""
    if moves.all_binary:
        return log_w, None
    padded = pt.concatenate([log_w, pt.as_tensor_variable(np.array([-np.inf]))])[moves.table]
    top = pt.max(padded, axis=1)
    safe = pt.switch(finite(top), top, 0.0)
    site_w = pt.log(pt.sum(pt.exp(padded - safe[:, None]), axis=1)) + safe
    site_w = pt.switch(finite(top), site_w, -np.inf)
    within = pt.switch(finite(log_w), log_w - site_w[moves.slot_site], -np.inf)
    return site_w, within


def prepare(deltas: Variable, log_g: GraphBalancing, moves: PathMoves):
    """``(site_w, within)`` of a state from its differences (``within`` ``None`` on all-binary
    blocks)."""
    log_w = pt.switch(pt.eq(deltas, -np.inf), -np.inf, log_g(deltas))
    return path_weights(log_w, moves)


def path_kernel(
    noise: Variable,
    state: PathState,
    *,
    scale: Variable,
    share: float,
    target: Target,
    log_g: GraphBalancing,
    moves: PathMoves,
) -> tuple[PathState, PathInfo]:
    """One path auxiliary MH transition (graph builder, pure). See the module docs."""
    x, logp, deltas, site_w, within = state
    n = moves.n_sites
    # 1. path length
    floor_u = pt.floor(scale)
    rounded = pt.cast(floor_u + pt.lt(noise[1], scale - floor_u), "int64")
    length = pt.switch(pt.lt(noise[0], share), 1, pt.clip(rounded, 1, n))
    # 2. sites by the exponential race, and the log-probability of their order
    path, picked, log_q_fwd, can_move = PathRace()(site_w, noise[3 : 3 + n], length)
    # 3. slots by Gumbel-max within each site
    if moves.all_binary:
        y = pt.switch(picked, 1 - x, x)
    else:
        gumbel = -pt.log(noise[3 + n : 3 + n + moves.n_slots])
        padded = pt.concatenate([within + gumbel, pt.as_tensor_variable(np.array([-np.inf]))])
        best = pt.argmax(padded[moves.table], axis=1)
        slot = moves.table[pt.arange(n), best]
        slot = pt.minimum(slot, moves.n_slots - 1)  # sites that cannot move: never picked
        y = pt.switch(picked, moves.new_value(x, slot), x)
        log_q_fwd = log_q_fwd + pt.sum(pt.switch(picked, within[slot], 0.0))
    # 4. the target at y and the reverse path (same sites, reversed order, each back)
    logp_y, deltas_y = target(y)
    site_w_y, within_y = prepare(deltas_y, log_g, moves)
    log_q_rev = ReversePathLogProb()(site_w_y, path, picked, length)
    if not moves.all_binary:
        back = moves.reverse_slot(slot, x)
        log_q_rev = log_q_rev + pt.sum(pt.switch(picked, within_y[back], 0.0))
    # 5. MH
    prob, accepted = mh_accept(mh_log_ratio(logp, logp_y, log_q_fwd, log_q_rev), noise[2])
    prob = pt.switch(can_move, prob, 0.0)
    accepted = accepted & can_move
    proposed = PathState(y, logp_y, deltas_y, site_w_y, within_y)
    pairs = zip(proposed.carried(), state.carried(), strict=True)
    new_state = PathState.from_carried([pt.switch(accepted, p, c) for p, c in pairs], moves)
    return new_state, PathInfo(prob, accepted, can_move, pt.cast(length, "int64"))


def tuned_path_step(
    noise: Variable,
    state: PathState,
    adapt: tuple,
    scale: Variable,
    tuning: Variable,
    *,
    share: float,
    target: Target,
    log_g: GraphBalancing,
    moves: PathMoves,
    adaptation: PathLengthAdaptation,
) -> tuple[PathState, PathInfo, tuple]:
    """:func:`path_kernel` with the path-length adaptation (graph builder, pure).

    ``adapt`` is ``(log U, log Ubar, count, doubling)``. While ``tuning`` the step's scale is
    ``exp(log U)`` and a path step (not a single-site one) updates ``adapt`` with its acceptance
    probability (:meth:`~pymc_lbp.samplers.path.adaptation.PathLengthAdaptation.update_graph`);
    otherwise the scale is ``scale`` and ``adapt`` passes through.
    """
    new, info = path_kernel(
        noise,
        state,
        scale=pt.switch(tuning, pt.exp(adapt[0]), scale),
        share=share,
        target=target,
        log_g=log_g,
        moves=moves,
    )
    # only path steps (not the single-site ones) feed the adaptation, and only in tuning
    adapts = tuning & pt.ge(noise[0], share)
    updated = adaptation.update_graph(*adapt[:3], info.accept, adapt[3])
    adapt = tuple(pt.switch(adapts, a, b) for a, b in zip(updated, adapt, strict=True))
    return new, info, adapt


class CompiledPathSteps:
    """:func:`path_kernel` run once per row of a noise matrix inside one compiled ``scan``.

    Called as ``(x, logp, deltas, noise, scale, adapt=None)``; ``noise`` has
    :func:`~pymc_lbp.samplers.path.reference.noise_width` columns. With ``adapt`` (an
    :class:`AdaptState`) the steps tune: their scale is ``exp(log U)`` of the carried state,
    updated by ``adaptation`` after every path step, and ``scale`` is unused; the result holds
    the final state. With the JAX backend (which traces shapes as values) the function is
    compiled on first use for the number of steps, once per number; tuning runs, whose number
    of steps follows the tuned scale, run in chunks of powers of two.
    """

    def __init__(
        self,
        target: Target,
        log_g: GraphBalancing,
        layout: BlockLayout,
        share: float,
        compile_kwargs: dict | None = None,
        adaptation: PathLengthAdaptation | None = None,
    ):
        self.adaptation = adaptation or PathLengthAdaptation(0.574, max(layout.n_sites, 1))
        backend = backend_of(compile_kwargs)
        if backend is not None:
            register_backend(backend)
        moves = PathMoves(layout)
        self.noise_width = noise_width(layout)
        self.n_sites, self.n_slots = layout.n_sites, layout.n_slots
        self._parts = (target, log_g, moves, share, dict(compile_kwargs or {}))
        self.runs = CompiledRuns(self._compile, compile_kwargs)

    def _compile(self, n_steps: int | None):
        """The compiled run (the one driver's ``scan``): the block's sizes are static; so is the
        number of steps when ``n_steps`` is given (JAX). The loop carries the state and the
        adaptation's state as one vector (``log U``, ``log Ubar``, count, doubling; the last two
        as floats, exact): each value carried costs the call a handful of nodes around the loop,
        most of a short call's time."""
        target, log_g, moves, share, compile_kwargs = self._parts
        x = pt.tensor("x", dtype="int64", shape=(self.n_sites,))
        logp = pt.scalar("logp", dtype="float64")
        deltas = pt.tensor("deltas", dtype="float64", shape=(self.n_slots,))
        noise = pt.tensor("noise", dtype="float64", shape=(n_steps, self.noise_width))
        scale = pt.scalar("scale", dtype="float64")
        tuning = pt.scalar("tuning", dtype="bool")
        adapt_in = pt.tensor("adapt", dtype="float64", shape=(4,))
        start = PathState(x, logp, deltas, *prepare(deltas, log_g, moves)).carried()
        adaptation = self.adaptation

        def step(u, carry, scale_, tuning_):
            adapt = carry[-1]
            unpacked = (adapt[0], adapt[1], pt.cast(adapt[2], "int64"), pt.gt(adapt[3], 0.5))
            new, info, updated = tuned_path_step(
                u,
                PathState.from_carried(carry[:-1], moves),
                unpacked,
                scale_,
                tuning_,
                share=share,
                target=target,
                log_g=log_g,
                moves=moves,
                adaptation=adaptation,
            )
            moved = info.length * pt.cast(info.accepted, "int64")
            adapt_out = pt.stack([pt.cast(v, "float64") for v in updated])
            return (*new.carried(), adapt_out), (*info, moved)

        last, info = scan_kernel(step, (*start, adapt_in), noise, params=[scale, tuning])
        outs = [*last[:3], *info, last[-1]]
        clear_traces(outs)
        fn = pm_compile(
            [x, logp, deltas, noise, scale, tuning, adapt_in],
            outs,
            on_unused_input="ignore",
            **compile_kwargs,
        )
        fn.trust_input = True
        return fn

    def draw_noise(self, rng: np.random.Generator, n_steps: int) -> np.ndarray:
        """The noise of ``n_steps`` steps from ``rng`` (uniforms, then exponentials)."""
        noise = np.empty((n_steps, self.noise_width))
        noise[:, :3] = rng.random((n_steps, 3))
        noise[:, 3:] = rng.standard_exponential((n_steps, self.noise_width - 3))
        return noise

    def __call__(self, x, logp, deltas, noise, scale, adapt: AdaptState | None = None) -> PathSteps:
        if self.runs.static_shapes and adapt is not None and len(noise) & (len(noise) - 1):
            return self._chunked(x, logp, deltas, noise, scale, adapt)
        return self._run(x, logp, deltas, noise, scale, adapt)

    def _chunked(self, x, logp, deltas, noise, scale, adapt: AdaptState) -> PathSteps:
        """Tuning steps under static shapes, whose number follows the tuned scale: run in
        chunks of powers of two (the binary digits of the number of steps, largest first), one
        compiled function per power, so the tuning compiles a few functions, not one per number.
        The chunks carry the state and the adaptation: the same steps as one call."""
        sums = np.zeros(5)
        start = 0
        for bit in reversed(range(len(noise).bit_length())):
            size = 1 << bit
            if not len(noise) & size:
                continue
            res = self._run(x, logp, deltas, noise[start : start + size], scale, adapt)
            start += size
            x, logp, deltas, adapt = res.x, res.logp, res.deltas, res.adapt_state
            sums += (res.sum_accept, res.n_accepted, res.n_evaluated, res.sum_length, res.sum_moved)
        return PathSteps(
            x, logp, deltas, float(sums[0]), *(int(v) for v in sums[1:]), adapt_state=adapt
        )

    def _run(self, x, logp, deltas, noise, scale, adapt: AdaptState | None) -> PathSteps:
        fn = self.runs(len(noise))
        state = adapt if adapt is not None else AdaptState(0.0, 0.0, 0, False)
        x_out, logp_out, deltas_out, *sums, tuned = fn(
            np.ascontiguousarray(x, dtype=np.int64),
            np.asarray(logp, dtype=np.float64),
            np.ascontiguousarray(deltas, dtype=np.float64),
            np.ascontiguousarray(noise, dtype=np.float64),
            np.asarray(scale, dtype=np.float64),
            np.asarray(adapt is not None),
            np.array(
                [state.log_u, state.log_u_bar, state.count, float(state.doubling)],
                dtype=np.float64,
            ),
        )
        if adapt is not None:
            adapt = AdaptState(float(tuned[0]), float(tuned[1]), int(tuned[2]), bool(tuned[3]))
        return PathSteps(
            np.array(x_out),
            float(logp_out),
            np.array(deltas_out),
            float(sums[0]),
            *(int(v) for v in sums[1:]),
            adapt_state=adapt,
        )
