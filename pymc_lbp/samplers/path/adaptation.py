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
NUTS), so the frozen value is not the last, noisy iterate. After tuning nothing adapts.

Short paths stay possible, during tuning and after. A step is a *single-site* step (``R = 1``)
with a fixed probability ``s`` (``single_site_share``, default 0.1) and otherwise a *path* step
with ``R`` the stochastic rounding of ``U`` (see
:func:`pymc_lbp.samplers.path.reference.draw_path_length`). The frozen kernel is the fixed mixture
``s T_1 + (1 - s) [(1 - f) T_floor(U) + f T_ceil(U)]`` (``f = frac U``) of pi-invariant kernels
with state-independent weights, so it is pi-invariant, and ``T_1`` (the single-site locally
balanced kernel) makes it irreducible wherever single-site moves connect the support. Without
it a path-only chain can be reducible (on binary and +-1 integer blocks a fixed even ``R`` never
changes the parity of the sum of the block) or, worse, practically trapped: on a nearly
deterministic posterior (5 sites, each with log-odds ~18) the tuning froze ``U`` near 2.2, every
step changed 2 or 3 sites, and a chain one site away from the mode (posterior mass ~1) needs a
path of length exactly 1 to reach it, so 0% of the draws were at the mode with R-hat 1.00.

Only path steps feed the adaptation, so ``U`` is tuned toward the target acceptance of the path
steps at their mean length ``U``, exactly as the optimal-scaling theory (acceptance 0.574 for a
path of length ``R``) prescribes, and the single-site steps are a separate component. This costs
at most a share ``s`` of the expected jump distance (EJD): a single-site step moves at most one
site where a tuned path step moves ``R * 0.574``. The alternative the PAS paper uses, ``R``
uniform on ``{1, ..., L}``, also keeps short paths, but it spends most steps far from the optimal
length: with the asymptotic acceptance ``a(R) = 2 Phi(-K R^(3/2))`` of the theory the best
uniform ``L`` reaches 75% of the EJD of the optimal fixed ``R``, and an independent simulation of
the 800-site Bernoulli product target gives 71-76% (``L`` tuned to a mean acceptance of 0.574, or
the best ``L``), against 90% for ``s = 0.1``. A chain in a trap that only a single-site move
leaves leaves it after ``1 / s`` steps on average (10 by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.basic import Variable

from pymc_lbp.samplers.common import register_jitable


def is_number(value) -> bool:
    """Whether ``value`` is a real number (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)


def check_fraction(name: str, value: float, why: str) -> float:
    """The option ``name``, checked: a number strictly between 0 and 1 (``why``: what the
    bounds mean, appended to the error)."""
    if not is_number(value):
        raise ValueError(f"{name} must be a float in (0, 1), got {value!r}")
    if not 0.0 < float(value) < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}{why}")
    return float(value)


def check_target_accept(target_accept: float) -> float:
    """Validate an acceptance-rate target: a float strictly between 0 and 1."""
    return check_fraction(
        "target_accept",
        target_accept,
        " (0.574 is the optimal rate for locally balanced proposals, 0.234 the random-walk one)",
    )


@register_jitable
def adapt_update(
    log_u, log_u_bar, count, accept, doubling, target, max_length, gamma0, t0, kappa, avg_kappa
):
    """:meth:`PathLengthAdaptation.update` with the adaptation's fields as arguments: the one
    copy of the rule, plain Python that the numba kernel compiles too
    (:mod:`pymc_lbp.samplers.pairwise.kernel`); its graph twin is
    :meth:`PathLengthAdaptation.update_graph`."""
    log_max = math.log(max_length)
    if doubling:
        if accept >= target and log_u < log_max:
            log_u = min(log_u + math.log(2.0), log_max)
            return log_u, log_u, 0, True
        doubling = False
    gain = gamma0 * (count + 1 + t0) ** (-kappa)
    log_u = min(max(log_u + gain * (accept - target), 0.0), log_max)
    eta = (count + 1) ** (-avg_kappa)
    log_u_bar = eta * log_u + (1.0 - eta) * log_u_bar
    return log_u, log_u_bar, count + 1, doubling


def tuning_inputs() -> tuple[Variable, Variable, tuple[Variable, Variable, Variable, Variable]]:
    """The symbolic inputs of a tuned path step
    (:func:`pymc_lbp.samplers.path.graph.tuned_path_step`): the fixed scale (float64), whether
    the step tunes (bool), and the adaptation's state ``(log U, log Ubar, count, doubling)``
    (float64, float64, int64, bool) that :meth:`PathLengthAdaptation.update_graph` updates."""
    adapt = (
        pt.scalar("log_u", dtype="float64"),
        pt.scalar("log_u_bar", dtype="float64"),
        pt.scalar("count", dtype="int64"),
        pt.scalar("doubling", dtype="bool"),
    )
    return pt.scalar("scale", dtype="float64"), pt.scalar("tuning", dtype="bool"), adapt


class AdaptState(NamedTuple):
    """The path-length adaptation's state, as the step keeps it."""

    log_u: float
    log_u_bar: float
    count: int
    doubling: bool


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
    ) -> AdaptState:
        """The new state after a step of acceptance probability ``accept`` (``min(1, MH
        ratio)``); ``count`` is the number of Robbins-Monro updates made so far (0 while
        ``doubling``)."""
        return AdaptState(*adapt_update(
            log_u, log_u_bar, count, accept, doubling, self.target, self.max_length,
            self.gamma0, self.t0, self.kappa, self.avg_kappa,
        ))  # fmt: skip

    def update_graph(
        self,
        log_u: Variable,
        log_u_bar: Variable,
        count: Variable,
        accept: Variable,
        doubling: Variable,
    ) -> tuple[Variable, Variable, Variable, Variable]:
        """:meth:`update` as a pytensor graph (the same arithmetic, branch for branch), for the
        compiled kernels that tune inside their loop. ``count`` is int64, ``doubling`` bool."""
        log_max = float(np.log(self.max_length))
        double = doubling & pt.ge(accept, self.target) & pt.lt(log_u, log_max)
        doubled = pt.minimum(log_u + float(np.log(2.0)), log_max)
        t = pt.cast(count, "float64")
        gain = self.gamma0 * (t + 1.0 + self.t0) ** (-self.kappa)
        moved = pt.clip(log_u + gain * (accept - self.target), 0.0, log_max)
        eta = (t + 1.0) ** (-self.avg_kappa)
        averaged = eta * moved + (1.0 - eta) * log_u_bar
        return (
            pt.switch(double, doubled, moved),
            pt.switch(double, doubled, averaged),
            pt.switch(double, pt.zeros_like(count), count + 1),
            double,
        )

    def frozen_scale(self, log_u_bar, xp=np):
        """The scale ``U`` used after tuning: ``exp(log Ubar)`` within ``[1, max_length]``
        (``xp`` the array module: ``jax.numpy`` in the whole-model program).

        No integer needs avoiding: the single-site component of the mixture (module docs)
        keeps the chain irreducible whatever ``U`` is.
        """
        return xp.clip(xp.exp(log_u_bar), 1.0, float(self.max_length))


__all__ = [
    "AdaptState",
    "PathLengthAdaptation",
    "adapt_update",
    "check_fraction",
    "check_target_accept",
    "is_number",
    "tuning_inputs",
]
