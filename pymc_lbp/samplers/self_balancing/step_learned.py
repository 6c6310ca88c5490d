"""SelfBalancing's learned balancing function: its parameters, the Adam optimiser's state and the
auxiliary particles (read and set through the ``lsb_*`` properties, kept through pickling), and
the learning steps that update them while tuning (:meth:`~SelfBalancingLearned.learn`).

A mixin of :class:`pymc_lbp.samplers.self_balancing.step.SelfBalancing`; the objective and the
compiled update are in :mod:`pymc_lbp.samplers.self_balancing.learning`.
"""

from __future__ import annotations

import numpy as np

from pymc_lbp.samplers.self_balancing.learning import (
    AdamState,
    batch_moves,
)


def _adam_moment(name: str) -> property:
    """The Adam state's moment ``name`` (``"m"`` or ``"v"``) as a property of the step, set as a
    float array (PyMC's sampling state reads and sets it)."""
    return property(
        lambda self: getattr(self._adam, name),
        lambda self, value: setattr(self._adam, name, np.array(value, dtype=float)),
    )


class SelfBalancingLearned:
    """The learned balancing function of :class:`SelfBalancing` and its learning."""

    # -- learned parameters and their state ------------------------------------------------------
    @property
    def lsb_params(self) -> np.ndarray:
        """The current parameter vector of the balancing function."""
        return self._adam.params

    @lsb_params.setter
    def lsb_params(self, value) -> None:
        value = np.array(value, dtype=float)
        if value.shape != (self.parametrization.n_params,):
            raise ValueError(
                f"lsb_params must have shape ({self.parametrization.n_params},), got {value.shape}"
            )
        self._adam.params = value
        self._version += 1

    lsb_adam_m = _adam_moment("m")
    lsb_adam_v = _adam_moment("v")

    @property
    def lsb_adam_t(self) -> float:
        return float(self._adam.t)

    @lsb_adam_t.setter
    def lsb_adam_t(self, value) -> None:
        self._adam.t = float(value)

    @property
    def lsb_particles(self) -> np.ndarray | None:
        """The auxiliary particles' states (``None`` before the first tuning step)."""
        return self._p_x

    @lsb_particles.setter
    def lsb_particles(self, value) -> None:
        self._reset_particles()
        if value is not None:
            self._p_x = np.array(value, dtype=np.int64)  # evaluated when next used

    def _reset_particles(self) -> None:
        self._p_x = None

    def __getstate__(self):
        # the frozen kernel and its parameter input are rebuilt together after unpickling
        state = self.__dict__.copy()
        state["_kernel"] = None
        state["_g_params"] = None
        return state

    def balancing_function(self, d: np.ndarray) -> np.ndarray:
        """The current (learned) balancing function in log space, ``d -> log g(e^d)``."""
        return self.parametrization.log_g(d, self.lsb_params)

    def reset_tuning(self) -> None:
        """Restore the untuned parameters, a fresh optimiser and no particles; tune again."""
        super().reset_tuning()
        self._adam = AdamState.fresh(self._initial_params)
        self._version += 1
        self._reset_particles()

    def learn(self, x: np.ndarray, n_updates: int) -> tuple[list[float], int]:
        """``n_updates`` learning steps: each moves every particle by one transition
        (:func:`~pymc_lbp.samplers.self_balancing.learning.batch_moves`, proposals evaluated in one
        call of :attr:`batched_rows`) and makes one Adam update on their transitions. The particles
        start at ``x`` the first time and are evaluated afresh first (the other variables may have
        moved since the last call). Returns the updates' losses (NaN for one skipped or with
        nothing to learn from) and the number of particle evaluations."""
        if self._p_x is None:
            self._p_x = np.tile(x, (self.n_particles, 1))
        rows = self._p_x
        logp, deltas = self.batched_rows(rows)
        losses = []
        for _ in range(n_updates):
            res, loss = self._learning_step(rows, logp, deltas)
            losses.append(loss)
            rows, logp, deltas = res.x, res.logp, res.deltas
        self._p_x = rows
        return losses, rows.shape[0] * (n_updates + 1)

    def _learning_step(self, rows, logp, deltas):
        """One learning step of the particles from their states, logps and differences."""
        res = batch_moves(
            self.rng.random((rows.shape[0], 2)),
            rows,
            logp,
            deltas,
            self._adam.params,
            log_g=self.parametrization.log_g,
            layout=self.layout,
            target_rows=self.batched_rows,
            particle_weights=self.particle_weights,
        )
        loss = float("nan")
        if res.movable.any():
            self._adam, loss, skipped = self.learner.update(self._adam, res.batch)
            self._version += 1
            if skipped:
                loss = float("nan")
        return res, loss
