"""NeuralBlock's random-scan steps as one compiled ``scan``.

Every step picks one update unit (a motif block proposed by the network, a block or an uncovered
site resampled exactly) and updates it; the numpy reference, which these graphs reproduce move
for move given the same uniforms, is :meth:`pymc_lbp.samplers.block.step.NeuralBlock.
scan_step`. Read top to bottom, one step from the uniforms ``u`` (one row of the noise matrix):

1. the unit ``j = floor(u[0] * units)``; the state ``z = [x, values of other steps'
   variables and fixed values, 0]`` (the last entry is where the padding of smaller units
   writes, read by nothing);
2. **motif block** (``neural``): the network's first layer from the unit's prepared parameter
   part and its conditioning values, the mixture of products
   (:meth:`~pymc_lbp.samplers.block.mdn.MixtureDensityNetwork.mixture_graph_from_preactivation`),
   clamping on entries the step does not sample (component weights times the clamped values'
   probabilities, renormalised), a component from ``u[1]``, entry ``i`` from ``u[2 + i]``, the
   target at the proposal, ``log q`` of the new and the old values over the free entries, and
   the one MH rule (:mod:`pymc_lbp.samplers.mh_graph`) with the coin ``u[-1]``; a proposal equal to
   the block is accepted as is, without evaluating the target;
3. **exact unit**: the target at every joint state of the unit's free entries, one state by
   inverse CDF from ``u[1]``;
4. the target: with factor-local differences (``read_uai`` models) the sum of the log factor
   values that meet the unit (flat look-ups into the model's tables,
   :class:`~pymc_lbp.logp.local_logp.FactorLogp`), otherwise the model logp graph at the new
   rows.

Units of both kinds (motif blocks and uncovered sites) compute both branches and keep the one
of their kind; the exact branch of a site is a handful of look-ups. Blocks whose parameters are
read from the model at every update (chain blocks) are not compiled here: their updates run as
colour-class sweeps (:mod:`pymc_lbp.samplers.block.sweep_graph`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from pymc_lbp.compiling import pm_compile
from pymc_lbp.samplers.block.sweep_graph import pick_index_graph
from pymc_lbp.samplers.graph_driver import CompiledRuns, scan_kernel
from pymc_lbp.samplers.mh_graph import finite, mh_accept, mh_log_ratio
from pymc_lbp.samplers.traces import clear_traces

NETWORK_NAMES = ("prepared", "R", "W1", "b1", "W2", "b2")
"""The network inputs of the compiled random scan: every unit's first-layer pre-activation at
all-zero conditioning values
(:meth:`~pymc_lbp.samplers.block.neural_proposal.NeuralProposal.prepare` of its parameters, ``units
x hidden``), what each conditioning entry at each value adds (``R``, ``entries x values x hidden``),
then the other layers."""


@dataclass(frozen=True)
class ScanUnits:
    """The units of a random scan as padded arrays (every unit padded to ``D`` entries, ``F``
    factors, ``S`` joint states). Positions index ``z = [x, outside values, 0]``; padding
    points at the last entry.

    Attributes
    ----------
    neural : (U,) bool
        Motif block proposed by the network (else exact: a block or a site).
    block_idx : (U, D) int
        Positions of the block entries (neural units; for exact units the free entries).
    free : (U, D) bool
        Entries the step samples (padding is not free).
    cond_idx : (U, M) int
        Positions of the conditioning entries (neural units; zeros otherwise).
    states : (T, S, D) int
        The distinct tables of joint states of exact units' free entries, zeros as padding.
    state_set : (U,) int
        Each unit's table in ``states`` (0 for neural units).
    n_states : (U,) int
        Valid joint states per unit (0 for neural units).
    """

    neural: np.ndarray
    block_idx: np.ndarray
    free: np.ndarray
    cond_idx: np.ndarray
    states: np.ndarray
    state_set: np.ndarray
    n_states: np.ndarray

    @property
    def width(self) -> int:
        """Uniforms per step: the unit, the component or state, one per entry, the coin."""
        return self.block_idx.shape[1] + 3


@dataclass(frozen=True)
class ScanFactors:
    """Factor-local targets as padded arrays: per unit ``F`` factors (padding points at the
    appended ``0.0`` of ``flat``), their offsets into ``flat``, the positions in ``z`` and the
    strides of their scope variables, and ``slot``: which of the unit's entries a scope
    position is (``-1`` for none)."""

    flat: np.ndarray
    offsets: np.ndarray  # (U, F)
    positions: np.ndarray  # (U, F, R)
    strides: np.ndarray  # (U, F, R)
    slot: np.ndarray  # (U, F, R)


def _row(table: np.ndarray, j: Variable) -> Variable:
    """Row ``j`` of a constant table."""
    return pt.as_tensor_variable(table)[j]


def _log_value(z_vals: Variable, factors: ScanFactors, j: Variable) -> Variable:
    """``sum_f log f`` over unit ``j``'s factors, scope values ``z_vals (..., F, R)``."""
    idx = _row(factors.offsets, j) + pt.sum(z_vals * _row(factors.strides, j), axis=-1)
    return pt.sum(pt.as_tensor_variable(factors.flat)[idx], axis=-1)


def _at_values(tables: Variable, values: Variable) -> Variable:
    """``tables[:, d, values[d]]`` for tables ``(K, D, C)``: ``(K, D)``, as one flat
    first-axis take (pytensor's C backend runs the multi-index form in Python)."""
    K, D, C = tables.shape
    flat = tables.reshape((K, D * C)).T
    return flat[pt.arange(D) * C + values].T


def _logsumexp(v: Variable, axis: int) -> Variable:
    """``log sum exp`` as :func:`pymc_lbp.samplers.block.reference.block_log_probs` computes it (a
    non-finite maximum counts as 0)."""
    top = pt.max(v, axis=axis, keepdims=True)
    top = pt.switch(finite(top), top, 0.0)
    return (top + pt.log(pt.sum(pt.exp(v - top), axis=axis, keepdims=True))).squeeze(axis)


def neural_update(u, z, logp, j, units: ScanUnits, factors, logp_rows, n_sites, net, w):
    """Steps 2 and 4 for a motif block: ``(x, logp, accept probability, accepted, moved)``."""
    bidx = _row(units.block_idx, j)
    # only a motif block's entries are proposed (another unit's run of this branch is discarded,
    # but must not index out of its variables' categories)
    fr = _row(units.free, j) & _row(units.neural, j)
    zb = z[bidx]
    cond = z[_row(units.cond_idx, j)]
    M = units.cond_idx.shape[1]
    R = w["R"]
    rows = R.reshape((M * R.shape[1], R.shape[2]))[pt.arange(M) * R.shape[1] + cond]
    a0 = w["prepared"][j] + pt.sum(rows, axis=0)
    log_w, log_tables = net.mixture_graph_from_preactivation(a0[None], w)
    lw, lt = log_w[0], log_tables[0]  # (K,), (K, D, C)
    D = units.block_idx.shape[1]
    at_z = _at_values(lt, zb)  # (K, D): each entry's table at its current value
    clamped = pt.sum(pt.switch(fr[None, :], 0.0, at_z), axis=1)
    lw_c = lw + clamped
    lw_c = pt.switch(pt.all(fr), lw, lw_c - _logsumexp(lw_c, 0))
    k = pick_index_graph(pt.exp(lw_c - pt.max(lw_c)), u[1])
    tab = lt[k]
    picked = pick_index_graph(pt.exp(tab - pt.max(tab, axis=-1, keepdims=True)), u[2 : 2 + D])
    new = pt.switch(fr, pt.cast(picked, "int64"), zb)
    moved = pt.any(pt.neq(new, zb))

    def log_q(values):
        per_entry = _at_values(lt, values)  # (K, D)
        return _logsumexp(lw_c + pt.sum(pt.switch(fr[None, :], per_entry, 0.0), axis=1), 0)

    z_y = pt.set_subtensor(z[bidx], new)
    if factors is None:
        logp_y = logp_rows(z_y[:n_sites][None, :])[0]
    else:
        pos = _row(factors.positions, j)
        lv_x = _log_value(z[pos], factors, j)
        lv_y = _log_value(z_y[pos], factors, j)
        logp_y = logp + pt.switch(finite(lv_y), lv_y - lv_x, -np.inf)
    prob, won = mh_accept(mh_log_ratio(logp, logp_y, log_q(new), log_q(zb)), u[-1])
    change = won & moved
    return (
        pt.switch(change, z_y[:n_sites], z[:n_sites]),
        pt.switch(change, logp_y, logp),
        pt.switch(moved, prob, 1.0),
        won | ~moved,
        moved,
    )


def exact_update(u, z, logp, j, units: ScanUnits, factors, logp_rows, n_sites):
    """Steps 3 and 4 for an exact unit: ``(x, logp, accept probability, accepted)``."""
    bidx = _row(units.block_idx, j)
    st = _row(units.states, _row(units.state_set, j))  # (S, D)
    S = units.states.shape[1]
    valid = pt.lt(pt.arange(S), _row(units.n_states, j))
    if factors is None:
        rows = pt.set_subtensor(pt.tile(z[None, :], (S, 1))[:, bidx], st)[:, :n_sites]
        lp = logp_rows(rows)
    else:
        pos, slot = _row(factors.positions, j), _row(factors.slot, j)  # (F, R)
        vals = pt.switch(
            pt.ge(slot, 0)[None], st[:, pt.maximum(slot, 0)], z[pos][None]
        )  # (S, F, R)
        lp = _log_value(vals, factors, j)
    lp = pt.switch(pt.isnan(lp) | ~valid, -np.inf, lp)
    possible = pt.any(finite(lp))
    s = pick_index_graph(pt.exp(lp - pt.max(lp)), u[1])
    current = pt.argmax(pt.all(pt.eq(st, z[bidx][None, :]), axis=1) & valid)
    logp_y = lp[s] if factors is None else logp + lp[s] - lp[current]
    x_y = pt.set_subtensor(z[bidx], st[s])[:n_sites]
    return (
        pt.switch(possible, x_y, z[:n_sites]),
        pt.switch(possible, logp_y, logp),
        pt.switch(possible, 1.0, 0.0),
        possible,
    )


def _inputs(units: ScanUnits, n_sites: int, n_outside: int):
    """``x, logp, outside`` and the network arrays of :data:`NETWORK_NAMES` as graph inputs."""
    x = pt.tensor("x", dtype="int64", shape=(n_sites,))
    logp = pt.scalar("logp", dtype="float64")
    outside = pt.tensor("outside", dtype="int64", shape=(n_outside,))
    w = {
        name: pt.tensor(name, dtype="float64", shape=(None,) * nd)
        for name, nd in zip(NETWORK_NAMES, (2, 3, 2, 1, 2, 1), strict=True)
    }
    return x, logp, outside, w


def _one_step(u, x_, logp_, outside, w, units: ScanUnits, factors, logp_rows, n_sites, net):
    """One random-scan step from the uniforms ``u``: ``(x, logp, accept, accepted, evaluations,
    unit)`` (``accepted`` and ``evaluations`` int64)."""
    has_neural, has_exact = bool(units.neural.any()), bool((~units.neural).any())
    n_units = units.neural.size
    j = pt.minimum(pt.cast(pt.floor(u[0] * n_units), "int64"), n_units - 1)
    z = pt.concatenate([x_, outside, pt.zeros((1,), dtype="int64")])
    args = (u, z, logp_, j, units, factors, logp_rows, n_sites)
    if has_neural:
        xn, ln, pn, an, moved = neural_update(*args, net, w)
        en = pt.cast(moved, "int64")
    if has_exact:
        xe, le, pe, ae = exact_update(*args)
        ee = _row(units.n_states, j)
    if has_neural and has_exact:
        is_n = _row(units.neural, j)
        new = [pt.switch(is_n, a, b) for a, b in
               ((xn, xe), (ln, le), (pn, pe), (an, ae), (en, ee))]  # fmt: skip
    else:
        new = [xn, ln, pn, an, en] if has_neural else [xe, le, pe, ae, ee]
    return (*new[:2], pt.cast(new[2], "float64"), *(pt.cast(v, "int64") for v in new[3:]), j)


def random_scan_step_graph(
    units: ScanUnits, factors, logp_rows, n_sites: int, n_outside: int, net
) -> tuple[list[Variable], list[Variable]]:
    """One random-scan step as a graph, for a loop written in the target backend (the JAX
    program's JAX driver, :mod:`pymc_lbp.samplers.block.jax_steps`): inputs ``u`` (one row
    of ``units.width`` uniforms), ``x, logp, outside`` and the network arrays of
    :data:`NETWORK_NAMES`; outputs ``(x, logp, acceptance, accepted, target evaluations,
    unit)``: the body of :func:`random_scan_graph`'s ``scan``."""
    x, logp, outside, w = _inputs(units, n_sites, n_outside)
    u = pt.tensor("u", dtype="float64", shape=(units.width,))
    outs = list(_one_step(u, x, logp, outside, w, units, factors, logp_rows, n_sites, net))
    clear_traces(outs)
    return [u, x, logp, outside, *w.values()], outs


def random_scan_graph(
    units: ScanUnits, factors, logp_rows, n_sites: int, n_outside: int, net, n_steps: int | None
) -> tuple[list[Variable], list[Variable]]:
    """The graph of ``n_steps`` random-scan steps (``None``: as many as ``noise`` has rows):
    ``(inputs, outputs)``, inputs ``x, logp, outside, noise`` and the network arrays of
    :data:`NETWORK_NAMES`, outputs ``(x, logp, sum of acceptances, accepted, target
    evaluations, last unit)`` (:class:`CompiledRandomScan` compiles it; the compiled whole-model
    program runs :func:`random_scan_step_graph`, its step, in
    :func:`pymc_lbp.samplers.jax_driver.scan_kernel`)."""
    x, logp, outside, w = _inputs(units, n_sites, n_outside)
    noise = pt.tensor("noise", dtype="float64", shape=(n_steps, units.width))

    def step(u, state):
        x_new, logp_new, accept, accepted, evaluated, j = _one_step(
            u, *state[:2], outside, w, units, factors, logp_rows, n_sites, net
        )
        return (x_new, logp_new, j), (accept, accepted, evaluated)

    (x_last, logp_last, unit), info = scan_kernel(
        step, (x, logp, pt.constant(0, dtype="int64")), noise
    )
    outs = [x_last, logp_last, *info, unit]
    clear_traces(outs)
    return [x, logp, outside, noise, *w.values()], outs


class CompiledRandomScan:
    """Random-scan steps of :class:`~pymc_lbp.NeuralBlock` in one compiled call.

    Called as ``(x, logp, outside, noise, network)``: ``outside`` the values of the other
    entries of ``z``, ``noise`` ``(steps, units.width)`` uniforms, ``network`` the arrays of
    :data:`NETWORK_NAMES` (ignored without motif blocks). Returns ``(x, logp, sum of
    acceptances, accepted, target evaluations, last unit)``. With the JAX backend the function
    is compiled on first use for the number of steps, once per number.

    Parameters
    ----------
    units : ScanUnits
    factors : ScanFactors or None
        Factor-local targets, or None for the model logp (``logp_rows``).
    logp_rows : callable
        The model logp at the rows of an ``(n, n_sites)`` int64 graph.
    n_sites, n_outside : int
    net : MixtureDensityNetwork or None
    compile_kwargs : dict, optional
    """

    def __init__(self, units, factors, logp_rows, n_sites, n_outside, net, compile_kwargs=None):
        self.units = units
        self._parts = (factors, logp_rows, n_sites, n_outside, net, dict(compile_kwargs or {}))
        self.runs = CompiledRuns(self._compile, compile_kwargs)

    def _compile(self, n_steps: int | None):
        factors, logp_rows, n_sites, n_outside, net, compile_kwargs = self._parts
        inputs, outputs = random_scan_graph(
            self.units, factors, logp_rows, n_sites, n_outside, net, n_steps
        )
        fn = pm_compile(inputs, outputs, on_unused_input="ignore", **compile_kwargs)
        fn.trust_input = True
        return fn

    def __call__(self, x, logp, outside, noise, network: list):
        out = self.runs(len(noise))(
            np.ascontiguousarray(x, dtype=np.int64),
            np.asarray(logp, dtype=np.float64),
            np.ascontiguousarray(outside, dtype=np.int64),
            np.ascontiguousarray(noise, dtype=np.float64),
            *(np.ascontiguousarray(a, dtype=np.float64) for a in network),
        )
        x_out, logp_out, acc, won, evals, last = out
        return np.array(x_out), float(logp_out), float(acc), int(won), int(evals), int(last)
