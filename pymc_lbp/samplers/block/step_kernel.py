"""NeuralBlock's numpy kernel: the unit targets, the proposals and the random-scan step
(:meth:`~NeuralBlockKernel.scan_step`).

A mixin of :class:`pymc_lbp.samplers.block.step.NeuralBlock`. :meth:`scan_step` is what
runs the random scan where no compiled scan takes the units (chain blocks, whose parameters are
read from the model at each update, and ``BlockGibbs``' elimination blocks), and elsewhere the
numpy reference of the compiled random scan
(:mod:`pymc_lbp.samplers.block.step_compiled`), which takes the same uniforms.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from pymc_lbp.samplers.block.motifs.chain import (
    canonical_chain_params,
    chain_potentials_from_reference,
    chain_reference_states,
)
from pymc_lbp.samplers.block.reference import (
    block_log_probs,
    clamp_mixture,
    draw_blocks,
    pick_index,
)
from pymc_lbp.samplers.block.step_units import _Unit
from pymc_lbp.samplers.common import (
    mh_accept_probs,
    mh_log_ratio,
)
from pymc_lbp.step_methods.base import StepResult


class NeuralBlockKernel:
    """The numpy block updates of :class:`NeuralBlock`."""

    # ------------------------------------------------------------------ targets
    def _z(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([x, self._outside_values]) if self._outside else x

    def _local_delta(self, unit: _Unit, x: np.ndarray, y: np.ndarray) -> float:
        """Factor-local ``log pi(y) - log pi(x)`` for states differing on the unit's sites."""
        lv = self._factors.log_value(unit.factors, np.stack([self._z(x), self._z(y)]))
        if not np.isfinite(lv[1]):
            return -np.inf
        return float(lv[1] - lv[0])

    def _target_states(self, unit: _Unit, x: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """``log pi`` (up to a constant shared by all rows) at states ``Y`` that differ from
        ``x`` only on the unit's sites."""
        if unit.factors is None:
            return self.target.logp_batch(Y)
        Z = np.concatenate(
            [Y, np.broadcast_to(self._outside_values, (Y.shape[0], self._outside_values.size))],
            axis=1,
        )
        return self._factors.log_value(unit.factors, Z)

    def unit_proposal(self, u: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The (clamped) mixture that unit ``u`` proposes its free entries from at state ``x``.

        Returns
        -------
        log_w : ndarray, shape (K,)
        log_tables : ndarray, shape (K, D_free, C)
        """
        unit = self._units[u]
        z = self._z(x)
        if unit.chain is not None:
            prepared = self.proposal.prepare(self.chain_params(unit, x))
        else:
            version = self.proposal.net.version
            if unit.prepared is None or unit.prepared[0] != version:
                unit.prepared = (version, self.proposal.prepare(unit.params))
            prepared = unit.prepared[1]
        log_w, log_tables = self.proposal.mixture_at(z[unit.cond_idx], prepared)
        return clamp_mixture(log_w, log_tables, ~unit.free, z[unit.block_idx])

    def chain_params(self, unit: _Unit, x: np.ndarray) -> np.ndarray:
        """The chain motif's parameters of ``unit`` at ``x``: the model logp at the block's
        reference states (:func:`pymc_lbp.samplers.block.motifs.chain.chain_reference_states`, one
        batched call) turned into canonical log-potentials. They depend on the rest of the state
        only, never on the block's own values."""
        K, L = unit.chain
        ref = chain_reference_states(K, L)
        Y = np.repeat(x[None, :], ref.shape[0], axis=0)
        Y[:, unit.sites] = ref
        lp = self._target_states(unit, x, Y)
        self._draw_evals += ref.shape[0]
        return canonical_chain_params(*chain_potentials_from_reference(lp, K, L))

    @cached_property
    def scan_width(self) -> int:
        """Uniforms per random-scan step (:meth:`scan_step`): the unit, the component (or the
        joint state of an exact unit), one per block entry, the MH coin (the units are fixed at
        construction; read at every step)."""
        return max(u.block_idx.size for u in self._units) + 3

    def mh_step(self, x: np.ndarray, logp: float, deltas: np.ndarray) -> StepResult:
        return self.scan_step(x, logp, deltas, self.rng.random(self.scan_width))

    def scan_step(
        self, x: np.ndarray, logp: float, deltas: np.ndarray, u: np.ndarray
    ) -> StepResult:
        """One random-scan step from the uniforms ``u`` (:attr:`scan_width` of them): the unit
        ``floor(u[0] * units)``; for an exact unit (or an uncovered site) the joint state by
        inverse CDF from ``u[1]``; for a motif block the mixture's component from ``u[1]``, free
        entry ``i`` from ``u[2 + i]`` (clamped entries keep their values), the MH coin
        ``u[-1]``. The numpy reference of the compiled random scan
        (:mod:`pymc_lbp.samplers.block.random_scan_graph`), which takes the same uniforms. An
        elimination block (``BlockGibbs``) draws its values from ``self.rng`` instead."""
        j = min(int(u[0] * len(self._units)), len(self._units) - 1)
        unit = self._units[j]
        extra = {"block": j}
        if unit.kind == "eliminate":
            return self._eliminate_step(unit, x, logp, deltas, extra)
        if unit.kind != "neural":
            return self._exact_step(unit, x, logp, deltas, extra, u[1])
        log_w, log_tables = self.unit_proposal(j, x)
        columns = np.concatenate(([1], 2 + np.flatnonzero(unit.free)))
        new = draw_blocks(log_w[None], log_tables[None], u[None, columns])[0]
        old = x[unit.sites]
        if np.array_equal(new, old):
            return StepResult(x, logp, deltas, 1.0, True, evaluated=False, extra=extra)
        y = x.copy()
        y[unit.sites] = new
        if unit.factors is None:
            logp_y = self.target.logp(y)
        else:
            logp_y = logp + self._local_delta(unit, x, y)
        self._draw_evals += 1
        log_q_new, log_q_old = block_log_probs(log_w, log_tables, np.stack([new, old]))
        prob = float(mh_accept_probs(mh_log_ratio(logp, logp_y, log_q_new, log_q_old)))
        if u[-1] < prob:
            return StepResult(y, logp_y, deltas, prob, True, extra=extra)
        return StepResult(x, logp, deltas, prob, False, extra=extra)

    def _eliminate_step(self, unit: _Unit, x, logp, deltas, extra) -> StepResult:
        """An elimination block's exact update (only :class:`BlockGibbs` makes such units)."""
        raise NotImplementedError(f"{type(self).__name__} has no elimination blocks")

    def _exact_step(self, unit: _Unit, x, logp, deltas, extra, u: float) -> StepResult:
        Y = np.repeat(x[None, :], unit.states.shape[0], axis=0)
        Y[:, unit.sites] = unit.states
        lp = self._target_states(unit, x, Y)
        self._draw_evals += Y.shape[0]
        lp = np.where(np.isnan(lp), -np.inf, lp)
        if not np.isfinite(lp).any():  # cannot happen from a feasible x
            return StepResult(x, logp, deltas, 0.0, False, extra=extra)
        s = int(pick_index(np.exp(lp - lp.max()), np.asarray(u)))
        if unit.factors is None:
            logp_y = float(lp[s])
        else:
            current = int(np.flatnonzero((unit.states == x[unit.sites]).all(axis=1))[0])
            logp_y = logp + float(lp[s] - lp[current])
        return StepResult(Y[s], logp_y, deltas, 1.0, True, extra=extra)
