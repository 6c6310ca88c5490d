"""DiscreteStep's tuning bookkeeping: ``reset_tuning`` and ``stop_tuning`` (the PyMC contract),
the record of the tuning draws' acceptance and the report of a tuned acceptance far from the
target.

A mixin of :class:`pymc_lbp.step_methods.base.DiscreteStep`.
"""

from __future__ import annotations

import warnings

import numpy as np

TUNING_CHECK_MIN_DRAWS = 20
"""Tuning diagnostics (:meth:`DiscreteStep.stop_tuning`) need at least this many tuning draws."""

ACCEPT_TOLERANCE = 0.25
"""A tuned mean acceptance further than this from ``target_accept`` is reported."""


class DiscreteStepTuning:
    """Tuning bookkeeping of :class:`DiscreteStep`."""

    def reset_tuning(self) -> None:
        """Restore the untuned settings (a step reused for a new chain starts fresh; its start
        is judged at its first draw). Exact differences chosen while tuning an earlier chain
        are kept: they are right everywhere. The integer jumps' ``J`` is the untuned one again
        (each chain then starts it from its own start, at its first tuning draw)."""
        self.tune = True
        self._reset_tuning_record()
        self._judge_at_first_draw = True
        moves = getattr(self, "integer_moves", None)
        if moves is not None:
            moves.reset()

    def stop_tuning(self) -> None:
        """End tuning: adapted settings are frozen from now on.

        Warns (``UserWarning``) when, over at least :data:`TUNING_CHECK_MIN_DRAWS` tuning draws,
        the chain never moved, or the mean acceptance of the second half of tuning is further
        than :data:`ACCEPT_TOLERANCE` from ``target_accept`` (samplers that tune toward one).
        """
        if self.tune:
            self._check_tuning()
        self.tune = False

    def _reset_tuning_record(self) -> None:
        self._tune_draws = 0
        self._tune_accepted = 0
        self._tune_accept: list[float] = []

    def _record_tuning(self, accept: float, n_accepted: int) -> None:
        self._tune_draws += 1
        self._tune_accepted += n_accepted
        self._tune_accept.append(accept)

    def _check_tuning(self) -> None:
        n = self._tune_draws
        if n < TUNING_CHECK_MIN_DRAWS:
            return
        name = f"{type(self).__name__} on {self.var_names}"
        if self._tune_accepted == 0:
            other = (
                "PathAuxiliaryLBP"
                if type(self).__name__ == "BlockGibbs"
                else "BlockGibbs, which updates the variables of a zero-probability constraint "
                "together"
            )
            warnings.warn(
                f"{name}: the chain did not move during tuning ({n} draws, no step accepted). "
                "Either the posterior is concentrated on the start point or the sampler is "
                "stuck there; the draws will not explore the posterior. Check the start point, "
                f"the model, or try another sampler (e.g. {other}).",
                UserWarning,
                stacklevel=2,
            )
            return
        # no steps (integer sites only, each draw their jumps): no tuned acceptance to check
        target = self._tuned_target() if self.steps_per_draw else None
        if target is None:
            return
        late = float(np.mean(self._tune_accept[n // 2 :]))
        if abs(late - target) <= ACCEPT_TOLERANCE or self._tuning_at_bound(late > target):
            return
        warnings.warn(
            f"{name}: mean acceptance {late:.3f} over the second half of tuning is far from its "
            f"target {target}. " + self._tuning_advice(late > target),
            UserWarning,
            stacklevel=2,
        )

    def _tuned_target(self) -> float | None:
        """The acceptance rate tuning aimed at (None: this step tunes no acceptance)."""
        return self.target_accept

    def _tuning_at_bound(self, too_high: bool) -> bool:
        """Whether the tuned setting sits at the bound that explains a missed target (then the
        miss is expected, e.g. acceptance above target with paths as long as the block)."""
        return False

    def _tuning_advice(self, too_high: bool) -> str:
        return "Tune longer (pm.sample(tune=...))."
