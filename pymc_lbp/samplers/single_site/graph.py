"""The single-site locally balanced kernel as a pytensor graph builder.

From ``x`` with neighbour differences ``Delta(x)`` (one slot per one-site move, see
:mod:`pymc_lbp.logp.layout`), slot ``s`` is proposed with probability
``Q(s|x) = g(e^{Delta_s}) / Z(x)`` and accepted with
``min{1, pi(y) Q(s'|y) / (pi(x) Q(s|x))}``, ``s'`` the move back. Exact differences give
LocallyBalanced (Zanella 2020), first-order ones GibbsWithGradients (Grathwohl et al. 2021).

Everything is a graph of its inputs: the kernel consumes two uniforms per step (slot by inverse
CDF, then the MH coin), so given the same uniforms it makes the same decisions as the numpy
reference (:func:`pymc_lbp.samplers.common.prepare_weights`,
:func:`~pymc_lbp.samplers.common.draw_from_cdf`,
:func:`~pymc_lbp.samplers.common.mh_accept`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from pymc_lbp.logp.layout import BINARY, CATEGORICAL, BlockLayout
from pymc_lbp.samplers.balancing import BALANCING_FUNCTIONS, graph_log_balancing
from pymc_lbp.samplers.mh_graph import finite, mh_accept, mh_log_ratio

Target = Callable[[Variable], tuple[Variable, Variable]]
"""``x -> (logp_x, deltas)`` as graphs (e.g.
:meth:`pymc_lbp.logp.differences.Differences.graph`)."""

GraphBalancing = Callable[[Variable], Variable]
"""A balancing function as a graph builder, ``d -> log g(e^d)`` (see
:func:`pymc_lbp.samplers.balancing.graph_log_balancing`)."""


class State(NamedTuple):
    """State carried between steps: block vector, its logp, its neighbour differences, and the
    proposal weights prepared from them (:func:`balanced_weights`), so no step recomputes them."""

    x: Variable
    logp: Variable
    deltas: Variable
    log_w: Variable
    cdf: Variable
    log_z: Variable


class Info(NamedTuple):
    """What one transition reports."""

    accept: Variable  # MH acceptance probability (0 when no move could be proposed)
    accepted: Variable  # bool
    evaluated: Variable  # bool: the target was evaluated at a proposal


class SingleSiteMoves:
    """The one-site moves of a :class:`~pymc_lbp.logp.layout.BlockLayout` as graph
    builders."""

    def __init__(self, layout: BlockLayout):
        self.slot_site = pt.as_tensor_variable(np.asarray(layout.slot_site, dtype=np.int64))
        self.slot_kind = pt.as_tensor_variable(np.asarray(layout.slot_kind, dtype=np.int64))
        self.slot_arg = pt.as_tensor_variable(np.asarray(layout.slot_arg, dtype=np.int64))
        self.site_offset = pt.as_tensor_variable(np.asarray(layout.site_offset, dtype=np.int64))
        self.all_binary = layout.all_binary

    def new_value(self, x: Variable, slot: Variable) -> Variable:
        """Value slot ``slot`` gives its site from ``x``."""
        old = x[self.slot_site[slot]]
        if self.all_binary:
            return 1 - old
        kind, arg = self.slot_kind[slot], self.slot_arg[slot]
        return pt.switch(
            pt.eq(kind, BINARY), 1 - old, pt.switch(pt.eq(kind, CATEGORICAL), arg, old + arg)
        )

    def reverse_slot(self, slot: Variable, old_value: Variable) -> Variable:
        """The slot moving the site back to ``old_value`` after ``slot`` was applied."""
        if self.all_binary:
            return slot
        kind = self.slot_kind[slot]
        off = self.site_offset[self.slot_site[slot]]
        return pt.switch(
            pt.eq(kind, BINARY),
            slot,
            pt.switch(pt.eq(kind, CATEGORICAL), off + old_value, 2 * off + 1 - slot),
        )


def graph_balancing(name: str, fn: Callable) -> GraphBalancing:
    """The balancing function as a graph builder.

    Built-in names map to :func:`pymc_lbp.samplers.balancing.graph_log_balancing`. A custom
    callable must also accept pytensor tensors (written with arithmetic and ``pytensor.tensor``
    functions) and agree with its numpy evaluation.

    Raises
    ------
    ValueError
        If the callable cannot be applied to a pytensor tensor, or disagrees with itself.
    """
    if BALANCING_FUNCTIONS.get(name) is fn:
        return graph_log_balancing(name)
    d = pt.vector("d", dtype="float64")
    try:
        out = fn(d)
    except Exception as err:  # noqa: BLE001 - re-raised with context
        raise ValueError(
            f"The balancing callable {name!r} cannot be applied to a pytensor tensor ({err}); "
            "the compiled kernels need a callable written with arithmetic and pytensor.tensor "
            "functions (e.g. lambda d: -pytensor.tensor.softplus(-d)), which also works on arrays."
        ) from err
    if not isinstance(out, Variable):
        raise ValueError(
            f"The balancing callable {name!r} returned {type(out).__name__} for a pytensor "
            "tensor; the compiled kernels need a pytensor expression."
        )
    grid = np.linspace(-30.0, 30.0, 121)
    graph_values = pytensor.function([d], out, mode="FAST_COMPILE")(grid)
    if not np.allclose(graph_values, np.asarray(fn(grid), dtype=float), rtol=1e-10, atol=1e-10):
        raise ValueError(
            f"The balancing callable {name!r} gives different values on arrays and on pytensor "
            "tensors."
        )
    return fn


def balanced_weights(
    deltas: Variable, log_g: GraphBalancing
) -> tuple[Variable, Variable, Variable]:
    """``(log_w, cdf, log_z)``: proposal log-weights ``log g(e^Delta)`` (``-inf`` where
    ``Delta = -inf``), their unnormalised CDF and log-normaliser (``-inf``: no move)."""
    log_w = pt.switch(pt.eq(deltas, -np.inf), -np.inf, log_g(deltas))
    top = pt.max(log_w)
    cdf = pt.cumsum(pt.exp(log_w - top))
    return log_w, cdf, top + pt.log(cdf[-1])


def draw_slot(cdf: Variable, u: Variable) -> Variable:
    """Inverse-CDF draw from an unnormalised nondecreasing ``cdf`` with a uniform ``u``.

    Never returns a zero-weight slot: ``u * cdf[-1]`` rounding up to ``cdf[-1]`` is sent to the
    last slot of positive weight (``argmax`` of ``cdf``). Garbage but in range when ``cdf`` is NaN
    (no move; the caller rejects).
    """
    n = cdf.shape[0]
    idx = pt.extra_ops.searchsorted(cdf, u * cdf[-1], side="right")
    last = pt.argmax(cdf)
    return pt.clip(pt.minimum(idx, last), 0, n - 1)


def single_site_kernel(
    u: Variable, state: State, *, target: Target, log_g: GraphBalancing, moves: SingleSiteMoves
) -> tuple[State, Info]:
    """One locally balanced single-site MH transition (graph builder, pure).

    Parameters
    ----------
    u : vector of 2 uniforms
        ``u[0]`` picks the slot, ``u[1]`` is the MH coin.
    state : State
        Current ``(x, logp, deltas)`` with its prepared weights; ``logp`` finite.
    target : callable
        ``x -> (logp, deltas)`` graphs.
    log_g : callable
        Balancing function in log space, as a graph builder.
    moves : SingleSiteMoves

    Returns
    -------
    (State, Info)
    """
    x, logp, deltas, log_w, cdf, log_z = state
    has_move = finite(log_z)
    slot = draw_slot(cdf, u[0])
    site = moves.slot_site[slot]
    old = x[site]
    y = pt.set_subtensor(x[site], moves.new_value(x, slot))
    logp_y, deltas_y = target(y)
    log_w_y, cdf_y, log_z_y = balanced_weights(deltas_y, log_g)
    log_q_rev = log_w_y[moves.reverse_slot(slot, old)] - log_z_y
    log_ratio = mh_log_ratio(logp, logp_y, log_w[slot] - log_z, log_q_rev)
    prob, accepted = mh_accept(log_ratio, u[1])
    prob = pt.switch(has_move, prob, 0.0)
    accepted = accepted & has_move
    new_state = State(
        *(
            pt.switch(accepted, new, cur)
            for new, cur in zip((y, logp_y, deltas_y, log_w_y, cdf_y, log_z_y), state, strict=True)
        )
    )
    return new_state, Info(prob, accepted, has_move)
