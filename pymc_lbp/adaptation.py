"""Adaptation during tuning: acceptance-rate targeting of the path length.

Path length (Sun, Dai, Schuurmans 2022, "Optimal scaling for locally balanced proposals in
discrete spaces"): the expected jump distance of a path auxiliary proposal of length ``R`` is
maximised, asymptotically, when the mean acceptance probability is about 0.574. During tuning the
continuous path scale ``U`` follows a Robbins-Monro recursion on ``log U``::

    log U_{t+1} = clip(log U_t + gamma_t (a_t - target), 0, log D),
    gamma_t = gamma0 (t + t0)^(-kappa),

``a_t = min(1, MH ratio)`` the expected acceptance probability of step ``t`` and ``D`` the number
of sites. Each step uses ``R_t`` = unbiased stochastic rounding of ``U_t``
(``P(R = ceil U) = frac U``, so ``E[R_t] = U_t``). The recursion on ``log U`` rather than on ``U``
makes the gain scale-free: the optimal ``R`` ranges from 1 to hundreds, and an additive step of
fixed size is either too slow for large ``R`` or too noisy for small ``R``. The gains satisfy the
Robbins-Monro conditions (``sum gamma_t = inf``, ``sum gamma_t^2 < inf`` for ``1/2 < kappa <= 1``).

Tuning starts with a doubling phase, as step-size searches do: while the acceptance probability
of a step is at least the target, ``U`` doubles (``R = 1, 2, 4, ...``); the first step below the
target ends the phase (within a factor 2 of the right scale, in ``log2(R*)`` steps instead of the
hundreds a small-gain recursion needs to climb from 1 to ``R* ~ 100``), and the Robbins-Monro
recursion, with its gains restarted, takes over.

At the end of tuning the scale is frozen at ``exp(log Ubar)``, where ``log Ubar`` is an average
of the iterates that forgets the start (weights ``t^(-avg_kappa)`` as in the dual averaging of
NUTS), so the frozen value is not the last, noisy iterate. After tuning nothing adapts: each step
draws ``R`` from ``{floor U, ceil U}`` with state-independent probabilities, a fixed mixture of
pi-invariant kernels. The frozen ``U`` is kept 0.1 away from integers because on binary (and
+-1 integer) blocks a path of fixed even length never changes the parity of the number of ones:
a single fixed ``R`` would not be irreducible, two consecutive values are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def check_target_accept(target_accept: float) -> float:
    """Validate an acceptance-rate target: a float strictly between 0 and 1."""
    if isinstance(target_accept, bool) or not isinstance(target_accept, int | float | np.floating):
        raise ValueError(f"target_accept must be a float in (0, 1), got {target_accept!r}")
    target = float(target_accept)
    if not 0.0 < target < 1.0:
        raise ValueError(
            f"target_accept must lie strictly between 0 and 1, got {target_accept!r} "
            "(0.574 is the optimal rate for locally balanced proposals, 0.234 the random-walk one)"
        )
    return target


@dataclass(frozen=True)
class PathLengthAdaptation:
    """Robbins-Monro targeting of the acceptance rate through ``log U`` (see module docs).

    Parameters
    ----------
    target : float
        Target mean acceptance probability, in (0, 1).
    max_length : int
        Upper clip of ``U`` (the number of sites that can move).
    gamma0, t0, kappa : float
        Gain schedule ``gamma_t = gamma0 (t + t0)^(-kappa)``.
    avg_kappa : float
        Weight exponent of the averaged iterate used for the frozen value.
    """

    target: float
    max_length: int
    gamma0: float = 1.0
    t0: float = 10.0
    kappa: float = 0.6
    avg_kappa: float = 0.75

    def gain(self, count: int) -> float:
        """``gamma_t`` for the ``count``-th update (``count`` starts at 0)."""
        return self.gamma0 * (count + 1 + self.t0) ** (-self.kappa)

    def update(
        self, log_u: float, log_u_bar: float, count: int, accept: float, doubling: bool = False
    ) -> tuple[float, float, int, bool]:
        """One update from the acceptance probability ``accept`` of a step.

        Parameters
        ----------
        log_u, log_u_bar : float
            The current iterate and averaged iterate.
        count : int
            Robbins-Monro updates made so far (0 during the doubling phase).
        accept : float
            ``min(1, MH ratio)`` of the step.
        doubling : bool
            Whether the doubling phase is on.

        Returns
        -------
        log_u, log_u_bar, count, doubling
            The new state.
        """
        log_max = float(np.log(self.max_length))
        if doubling:
            if accept >= self.target and log_u < log_max:
                log_u = min(log_u + float(np.log(2.0)), log_max)
                return log_u, log_u, 0, True
            doubling = False
        log_u = float(np.clip(log_u + self.gain(count) * (accept - self.target), 0.0, log_max))
        eta = (count + 1) ** (-self.avg_kappa)
        log_u_bar = eta * log_u + (1.0 - eta) * log_u_bar
        return log_u, log_u_bar, count + 1, doubling

    def frozen_scale(self, log_u_bar: float) -> float:
        """The scale ``U`` used after tuning, from the averaged iterate.

        ``exp(log Ubar)`` within ``[1, max_length]``, with its fractional part kept in
        [0.1, 0.9] (a shift of at most 0.1) and at most ``max_length - 0.5``, so that the
        stochastically rounded path length takes two consecutive values with probabilities of
        at least 0.1: a single fixed even length would keep binary chains in one parity class.
        ``U = 1`` (single-site moves) stays 1.
        """
        u = float(np.clip(np.exp(log_u_bar), 1.0, self.max_length))
        if u <= 1.0 or self.max_length < 2:
            return 1.0
        lo = np.floor(u)
        u = lo + float(np.clip(u - lo, 0.1, 0.9))
        return float(min(u, self.max_length - 0.5))


__all__ = ["PathLengthAdaptation", "check_target_accept"]
