"""Learning a balancing function: the compiled LSB objective and its Adam optimiser state.

:class:`BalancingLearner` compiles, once, a pure pytensor function

    (params, m, v, t, learning_rate, batch arrays) -> (loss, rejection, params', m', v', t')

from :func:`pymc_lbp.samplers.self_balancing.parametrizations.lsb_objective`, its gradient (pytensor
autodiff) and PyMC's own Adam update expressions (:func:`pymc.variational.updates.adam`, with
:func:`pymc.variational.updates.total_norm_constraint` on the gradient). PyMC's optimisers keep
their state in shared variables; here those shared variables are swapped for explicit inputs, so
the optimiser state is a few plain numpy arrays (:class:`AdamState`) that a step method can hold,
reset, pickle and round-trip through ``sampling_state``.

Guards: an update whose loss, gradient or new parameters are not finite is skipped (the state is
left unchanged and the skip is reported); the gradient's norm is clipped to ``max_grad_norm``;
the parameters are clipped to ``[-param_clip, param_clip]`` after each update.

The graph is float64 whatever ``pytensor.config.floatX`` is (the learned parameters do not depend
on it). :func:`check_learning_size` refuses particle counts and network sizes whose learning is
clearly out of range (time: :data:`MAX_PARTICLES`; memory: :func:`learning_memory_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
from pymc.variational.updates import adam, total_norm_constraint
from pytensor.graph.basic import Variable
from pytensor.graph.replace import clone_replace

from pymc_lbp.compiling import pm_compile
from pymc_lbp.samplers.common import draw_slot_rows, mh_accept_probs, mh_log_ratios
from pymc_lbp.samplers.mh_graph import finite
from pymc_lbp.samplers.self_balancing.parametrizations import (
    D_CLIP,
    GRID_DENSITY,
    BalancingParametrization,
    lsb_objective,
    make_parametrization,
)

MAX_PARTICLES = 100_000
"""Largest ``n_particles`` accepted: every particle costs one compiled evaluation of the neighbour
differences per tuning step (tens of microseconds at the very least), so 10^5 particles already
cost seconds per tuning step."""

MAX_LEARNING_BYTES = 2**31
"""Largest estimate of :func:`learning_memory_bytes` accepted (2 GiB)."""

_ARRAYS_PER_SLOT = 16
"""float64 arrays of shape (particles, slots) alive during one learning step: the particles'
differences and their proposals' differences, balanced weights, cumulative sums and reverse
weights of both, the batch's two difference matrices and the objective's intermediate values."""

_ARRAYS_PER_SITE = 2
"""int64 arrays of shape (particles, sites): the particles' states and their proposals."""

_ARRAYS_PER_HIDDEN = 8
"""float64 arrays of shape (grid points, hidden units) of the LSB2 network in the learning graph:
activations at +u and -u, forward and backward (see :class:`NeuralBalancing`)."""


def learning_memory_bytes(n_particles: int, n_sites: int, n_slots: int, hidden: int = 0) -> int:
    """Estimated peak memory (bytes) of one SelfBalancing learning step.

    ``8 * [(n_particles + 1) * (16 * n_slots + 2 * n_sites) + 8 * G * hidden]`` with ``G`` the
    points of the LSB2 grid (``hidden = 0`` for LSB1): the particles' and the chain's
    differences and states as float64 / int64 arrays (see ``_ARRAYS_PER_SLOT``), and the
    network's activations on the grid.
    """
    grid = int(D_CLIP * GRID_DENSITY) + 1
    rows = int(n_particles) + 1
    per_row = _ARRAYS_PER_SLOT * int(n_slots) + _ARRAYS_PER_SITE * int(n_sites)
    return 8 * (rows * per_row + _ARRAYS_PER_HIDDEN * grid * int(hidden))


def check_learning_size(n_particles: int, n_sites: int, n_slots: int, hidden: int = 0) -> None:
    """Refuse particle counts and network sizes whose learning is clearly out of range.

    Raises
    ------
    ValueError
        If ``n_particles > MAX_PARTICLES`` (time) or :func:`learning_memory_bytes` exceeds
        ``MAX_LEARNING_BYTES`` (memory); the message gives the estimate and the largest
        ``n_particles`` that fits.
    """
    if n_particles > MAX_PARTICLES:
        raise ValueError(
            f"n_particles={n_particles} is out of range: each particle costs one evaluation of "
            f"the neighbour differences per tuning step, so more than {MAX_PARTICLES} particles "
            "would take seconds per tuning step (Sansone 2022 uses 30)"
        )
    need = learning_memory_bytes(n_particles, n_sites, n_slots, hidden)
    if need > MAX_LEARNING_BYTES:
        fixed = learning_memory_bytes(-1, n_sites, n_slots, hidden)
        per = learning_memory_bytes(0, n_sites, n_slots, 0)
        fits = max(0, (MAX_LEARNING_BYTES - fixed) // per - 1) if per else 0
        what = f"{n_particles} particles x {n_slots} slots x {n_sites} sites"
        if hidden:
            what += f", {hidden} hidden units"
        raise ValueError(
            f"SelfBalancing learning would need about {need / 2**30:.1f} GiB ({what}; "
            f"limit {MAX_LEARNING_BYTES / 2**30:.0f} GiB, see "
            "pymc_lbp.samplers.self_balancing.learning.learning_memory_bytes); "
            + (
                f"use n_particles <= {fits}"
                if fits >= 1
                else "use fewer hidden units or a smaller block"
            )
        )


@dataclass
class AdamState:
    """Adam's state for a flat parameter vector: parameters, moments and step count."""

    params: np.ndarray
    m: np.ndarray
    v: np.ndarray
    t: float = 0.0

    @classmethod
    def fresh(cls, params: np.ndarray) -> AdamState:
        """Zero moments at ``params``."""
        params = np.array(params, dtype=float)
        return cls(params, np.zeros_like(params), np.zeros_like(params), 0.0)


class TransitionBatch(NamedTuple):
    """The inputs of one learning update, in its order (see :func:`lsb_objective` for their
    meaning): numpy arrays, or JAX arrays in the whole-model program."""

    deltas_x: np.ndarray
    deltas_y: np.ndarray
    slot: np.ndarray
    reverse: np.ndarray
    dlogp: np.ndarray
    feasible: np.ndarray
    weights: np.ndarray


@lru_cache(maxsize=16)
def _compiled_update(name: str, hidden: int, max_grad_norm: float, mode_key: str | None):
    """Compile the functional Adam update of the LSB objective (cached per configuration).

    The graph is built in float64 whatever ``pytensor.config.floatX`` is: the optimiser state is
    float64 numpy arrays, and PyMC's ``adam`` creates its step counter with ``floatX`` (a float32
    counter fed a float64 array fails, and a float32 graph would make the learned parameters
    depend on the user's floatX).
    """
    with pytensor.config.change_flags(floatX="float64"):
        inputs, outs = update_graph_io(make_parametrization(name, hidden), max_grad_norm)
        fn = pm_compile(inputs, outs, on_unused_input="ignore", mode=mode_key)
    fn.trust_input = True
    return fn


def adam_update_graph(
    parametrization: BalancingParametrization,
    state: tuple[Variable, Variable, Variable, Variable],
    learning_rate: Variable,
    batch: tuple[Variable, ...],
    max_grad_norm: float,
    param_clip: float,
) -> tuple[Variable, ...]:
    """One guarded Adam step on the LSB objective, as graphs of its inputs.

    ``state = (params, m, v, t)``; ``batch = (deltas_x, deltas_y, slot, reverse, dlogp,
    feasible, weights)`` (see :func:`lsb_objective`). PyMC's :func:`~pymc.variational.updates.adam`
    and :func:`~pymc.variational.updates.total_norm_constraint` build the update on shared
    variables; those are swapped for the given state, so the result is a pure function of it,
    guards included (:class:`BalancingLearner` compiles it).

    Returns
    -------
    (loss, rejection, grad, params', m', v', t', skipped)
        ``skipped`` is True when the loss, the gradient or the new state is not finite; the
        returned state is then the old one. New parameters are clipped to
        ``[-param_clip, param_clip]``.
    """
    params, m, v, t = state
    n = parametrization.n_params
    p_sh = pytensor.shared(np.zeros(n), name="lsb_params")
    loss, rejection = lsb_objective(parametrization, p_sh, *batch)
    (grad,) = total_norm_constraint([pt.grad(loss, p_sh)], max_grad_norm)
    updates = adam([grad], [p_sh], learning_rate=learning_rate)
    shared_vars = list(updates.keys())
    moments = [sv for sv in shared_vars if sv is not p_sh and sv.ndim == 1]
    (t_sh,) = [sv for sv in shared_vars if sv.ndim == 0]
    given = {p_sh: params, moments[0]: m, moments[1]: v, t_sh: pt.cast(t, t_sh.dtype)}
    order = [p_sh, moments[0], moments[1], t_sh]
    outs = [loss, rejection, grad] + [updates[sv] for sv in order]
    outs = clone_replace(outs, replace=given, rebuild_strict=False)
    loss, rejection, grad, *new = (pt.cast(o, "float64") for o in outs)
    ok = finite(loss) & pt.all(finite(grad))
    for part in new[:3]:
        ok = ok & pt.all(finite(part))
    new[0] = pt.clip(new[0], -param_clip, param_clip)
    kept = [pt.switch(ok, a, pt.cast(b, "float64")) for a, b in zip(new, state, strict=True)]
    return (loss, rejection, grad, *kept, ~ok)


def update_graph_io(
    parametrization: BalancingParametrization, max_grad_norm: float
) -> tuple[list[Variable], list[Variable]]:
    """Inputs ``[params, m, v, t, learning_rate, param_clip, *batch]`` and outputs of
    :func:`adam_update_graph` (float64), the graph :class:`BalancingLearner` compiles and the
    JAX program of :mod:`pymc_lbp.whole_model` converts."""
    n = parametrization.n_params
    state = (
        pt.vector("params", dtype="float64", shape=(n,)),
        pt.vector("adam_m", dtype="float64", shape=(n,)),
        pt.vector("adam_v", dtype="float64", shape=(n,)),
        pt.scalar("adam_t", dtype="float64"),
    )
    lr = pt.scalar("learning_rate", dtype="float64")
    clip = pt.scalar("param_clip", dtype="float64")
    batch = (
        pt.matrix("deltas_x", dtype="float64"),
        pt.matrix("deltas_y", dtype="float64"),
        pt.vector("slot", dtype="int64"),
        pt.vector("reverse", dtype="int64"),
        pt.vector("dlogp", dtype="float64"),
        pt.vector("feasible", dtype="float64"),
        pt.vector("weights", dtype="float64"),
    )
    outs = adam_update_graph(parametrization, state, lr, batch, max_grad_norm, clip)
    return [*state, lr, clip, *batch], list(outs)


class BatchMoves(NamedTuple):
    """One transition of every row of a batch (SelfBalancing's particles).

    ``x``, ``logp``, ``deltas``: the rows after the MH decisions. ``batch``: the rows' records of
    the learning update (:class:`TransitionBatch`). ``accept``, ``accepted``, ``movable``: per
    row, the MH acceptance probability, the decision, and whether anything could be proposed.
    """

    x: np.ndarray
    logp: np.ndarray
    deltas: np.ndarray
    batch: TransitionBatch
    accept: np.ndarray
    accepted: np.ndarray
    movable: np.ndarray


def batch_moves(
    u, x, logp, deltas, params, *, log_g, layout, target_rows, particle_weights="uniform", xp=np
) -> BatchMoves:
    """One locally balanced single-site MH transition of each row, vectorised, with the one MH
    rule (:func:`~pymc_lbp.samplers.common.mh_log_ratios`: a non-finite ratio rejects): the
    numpy reference of SelfBalancing's learning step and, with ``xp=jax.numpy``, the step the
    whole-model program runs (:mod:`pymc_lbp.whole_model`).

    Row ``i`` proposes slot ``s`` with probability ``g(e^{Delta_is}) / Z_i`` (inverse CDF with
    ``u[i, 0]``, never a slot of zero weight) and accepts with ``u[i, 1] < alpha``. Every row is
    evaluated at its proposal (a row with no possible move proposes itself). The records:
    rows with no move get weight 0 and finite placeholders; infeasible moves (zero-probability
    proposal or impossible reverse) get ``feasible = 0`` and the forward row as placeholder.

    Parameters
    ----------
    u : (B, 2) uniforms
    x, logp, deltas : (B, n) int, (B,), (B, S)
        The rows' states, logps and neighbour differences.
    params : parameters of ``log_g``
    log_g : callable
        ``(deltas, params) -> log g(e^deltas)`` elementwise (a parametrization's ``log_g``).
    layout : :class:`~pymc_lbp.logp.layout.BlockLayout`
    target_rows : callable
        ``X -> (logp, deltas)`` of every row at once.
    particle_weights : {"uniform", "target"}
    xp : module
        The array module: numpy, or ``jax.numpy``.
    """
    rows = xp.arange(x.shape[0])
    slot, log_q_fwd, movable = draw_slot_rows(log_g(deltas, params), u[:, 0], xp=xp)
    site = xp.asarray(layout.slot_site)[slot]
    new, back = layout.moves_of(slot, x[rows, site], xp=xp)
    moved = (xp.arange(x.shape[1])[None, :] == site[:, None]) & movable[:, None]
    y = xp.where(moved, new[:, None], x)
    reverse = xp.where(movable, back, slot)
    logp_y, deltas_y = target_rows(y)
    logp_y = xp.asarray(logp_y, dtype=xp.float64)
    deltas_y = xp.asarray(deltas_y, dtype=xp.float64)
    log_w_y = log_g(deltas_y, params)
    top_y = xp.max(log_w_y, axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe_top = xp.where(xp.isfinite(top_y), top_y, 0.0)
        log_z_y = safe_top + xp.log(xp.sum(xp.exp(log_w_y - safe_top[:, None]), axis=1))
        log_q_rev = log_w_y[rows, reverse] - log_z_y
        ratio = mh_log_ratios(logp, logp_y, log_q_fwd, log_q_rev, xp=xp)
        accept = mh_accept_probs(xp.where(movable, ratio, -xp.inf), xp=xp)
        accepted = u[:, 1] < accept
        feasible = movable & xp.isfinite(logp_y) & xp.isfinite(log_q_rev)
        deltas_x = xp.where(movable[:, None], deltas, 0.0)
        if particle_weights == "target":
            top_lp = xp.max(xp.where(movable, logp, -xp.inf))
            top_lp = xp.where(xp.any(movable), top_lp, 0.0)
            base = xp.where(movable, xp.exp(xp.where(movable, logp - top_lp, 0.0)), 0.0)
        else:
            base = movable.astype(xp.float64)
    total = base.sum()
    batch = TransitionBatch(
        deltas_x=deltas_x,
        deltas_y=xp.where(feasible[:, None], deltas_y, deltas_x),
        slot=slot.astype(xp.int64),
        reverse=xp.where(feasible, reverse, slot).astype(xp.int64),
        dlogp=xp.where(feasible, logp_y - xp.where(feasible, logp, 0.0), 0.0),
        feasible=feasible.astype(xp.float64),
        weights=xp.where(total > 0, base / xp.where(total > 0, total, 1.0), base),
    )
    return BatchMoves(
        xp.where(accepted[:, None], y, x),
        xp.where(accepted, logp_y, logp),
        xp.where(accepted[:, None], deltas_y, deltas),
        batch,
        accept,
        accepted,
        movable,
    )


class BalancingLearner:
    """Compiled LSB objective + Adam, as a pure update of an :class:`AdamState`.

    Parameters
    ----------
    parametrization : BalancingParametrization
    learning_rate : float
        Adam's step size (> 0).
    max_grad_norm : float, default 10
        The gradient is rescaled to at most this Euclidean norm.
    param_clip : float, default 20
        Parameters are clipped to ``[-param_clip, param_clip]`` after each update.
    mode : str, optional
        Pytensor compilation mode.
    """

    def __init__(
        self,
        parametrization: BalancingParametrization,
        learning_rate: float,
        max_grad_norm: float = 10.0,
        param_clip: float = 20.0,
        mode: str | None = None,
    ):
        self.parametrization = parametrization
        self.learning_rate = float(learning_rate)
        self.max_grad_norm = float(max_grad_norm)
        self.param_clip = float(param_clip)
        self.mode = mode
        self._fn = None

    @property
    def fn(self):
        """The compiled update (built on first use)."""
        if self._fn is None:
            hidden = getattr(getattr(self.parametrization, "mlp", None), "hidden", 0)
            self._fn = _compiled_update(
                self.parametrization.name, hidden, self.max_grad_norm, self.mode
            )
        return self._fn

    def compile(self) -> None:
        """Build the compiled update now (it is otherwise built on first use)."""
        _ = self.fn

    def __getstate__(self):
        # the compiled function is rebuilt (from pytensor's cache) after unpickling
        state = self.__dict__.copy()
        state["_fn"] = None
        return state

    def evaluate(self, state: AdamState, batch: TransitionBatch) -> tuple[float, float, np.ndarray]:
        """``(loss, rejection, clipped gradient)`` at ``state.params`` without updating."""
        loss, rej, grad, *_ = self._call(state, batch)
        return float(loss), float(rej), np.asarray(grad)

    def _call(self, state: AdamState, batch: TransitionBatch):
        return self.fn(
            state.params,
            state.m,
            state.v,
            np.asarray(state.t, dtype=np.float64),
            np.asarray(self.learning_rate, dtype=np.float64),
            np.asarray(self.param_clip, dtype=np.float64),
            np.ascontiguousarray(batch.deltas_x, dtype=np.float64),
            np.ascontiguousarray(batch.deltas_y, dtype=np.float64),
            np.ascontiguousarray(batch.slot, dtype=np.int64),
            np.ascontiguousarray(batch.reverse, dtype=np.int64),
            np.ascontiguousarray(batch.dlogp, dtype=np.float64),
            np.ascontiguousarray(batch.feasible, dtype=np.float64),
            np.ascontiguousarray(batch.weights, dtype=np.float64),
        )

    def update(self, state: AdamState, batch: TransitionBatch) -> tuple[AdamState, float, bool]:
        """One Adam step on the batch.

        Returns
        -------
        state : AdamState
            The new state (the old one, unchanged, if the update was skipped).
        loss : float
            The batch loss at the old parameters (NaN if not finite).
        skipped : bool
            Whether the update was skipped because something was not finite.
        """
        loss, _, _, p, m, v, t, skipped = self._call(state, batch)
        loss = float(loss) if np.isfinite(loss) else float("nan")
        if skipped:
            return state, loss, True
        return AdamState(np.array(p), np.array(m), np.array(v), float(t)), loss, False


__all__ = [
    "MAX_LEARNING_BYTES",
    "MAX_PARTICLES",
    "AdamState",
    "BalancingLearner",
    "BatchMoves",
    "TransitionBatch",
    "adam_update_graph",
    "batch_moves",
    "check_learning_size",
    "learning_memory_bytes",
    "update_graph_io",
]
