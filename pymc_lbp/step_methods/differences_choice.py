"""``differences="auto"``: measure whether first-order differences track the exact ones; choose.

First-order differences (Grathwohl et al. 2021) cost one logp and one gradient evaluation per
step whatever the block's size, and they equal the exact neighbour differences where the logp is
multilinear in the block (Ising and Potts lattices, factor tables, mixtures, hidden Markov
chains). Elsewhere (an indicator that sets a prior variance, a count inside a ``log``, a
comparison of an integer) they can be poor enough that the chain never moves, while the MH
correction keeps it exact: a correct but useless sampler. ``differences="auto"`` therefore looks
before it chooses (:func:`probe_first_order`, with a private random generator so the choice is
reproducible and the sampler's own stream is untouched):

1. a short single-site MH chain with first-order proposals runs from the start point
   (:data:`PROBE_STEPS` steps), and the mean acceptance of its moves is recorded;
2. at :data:`PROBE_STATES` states along it (the start included), the first-order differences of up
   to :data:`PROBE_SLOTS` random moves are compared with the exact ones (the logp at the
   neighbour, from the same compiled call).

The rule (:func:`choose`):

======================================================  ============  =========================
measured                                                 chosen        why
======================================================  ============  =========================
first-order == exact at every probed move                gradient      same proposals, O(1) cost
they differ, block of at most :data:`SMALL_BLOCK_SLOTS`  exact         exact is one vectorised
moves                                                                  call of that many rows
they differ, first-order acceptance >=                   gradient      at most ~2x the steps per
:data:`MIN_ACCEPTANCE`                                                 accepted move
they differ, acceptance below it                         exact         first-order proposals are
                                                                       rejected
the model has no differentiable extension                exact         (see
:mod:`pymc_lbp.logp.relax`)
======================================================  ============  =========================

**Checked again where the chain is.** A start point can hide what first-order differences miss:
in a spike-and-slab regression written ``dot(X, g * b)`` the logp is quadratic in the indicators
``g`` (``g_j^2 b_j^2 |X_j|^2``), yet at the start, where ``b`` sits at 0, no difference depends on
``g`` and first-order differences equal the exact ones at every move. Once NUTS moves ``b`` they
are useless (acceptance near 0). Nothing about the logp's form is claimed from a probe, so a
first-order choice is measured again (:class:`TuningRecheck`) during tuning, at the tuning draws
``1, 2, 4, 8, ...`` (:func:`recheck_due`: after the other steps have moved their variables), by the
same probe run from the chain's current state with the other variables where they are now, and
the same rule: a step whose first-order proposals stop tracking the exact ones switches to exact
differences for good (an INFO log line says when and why; ``step.differences_choice`` then holds
the new choice). A start of probability zero (measured nothing) is measured at the first draw,
tuning or not. Exact differences, once chosen, are never replaced: they are right everywhere.

The decision and its reason are logged (logger ``"pymc_lbp"``, INFO), kept as
``step.differences_choice`` (a :class:`DifferencesChoice`), ``step.differences_kind`` and
``step.differences_reason``, and every draw records the stat ``exact_differences``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pytensor

from pymc_lbp.samplers.balancing import balanced_log_weights
from pymc_lbp.samplers.common import prepare_weights
from pymc_lbp.samplers.single_site.reference import single_site_step

PROBE_STEPS = 48
"""Steps of the first-order single-site chain run from the start point."""

PROBE_STATES = 4
"""States along that chain (the start included) where first-order and exact differences are
compared."""

PROBE_SLOTS = 32
"""Moves compared at each probed state (all of them on smaller blocks)."""

SMALL_BLOCK_SLOTS = 64
"""Blocks with at most this many moves take exact differences when first-order ones differ:
exact differences are then one vectorised logp call of at most this many rows."""

MIN_ACCEPTANCE = 0.5
"""First-order differences that differ from the exact ones are kept on larger blocks only if the
probe chain accepts at least this share of their proposals: each step costs about two logp
evaluations, so at most about four per accepted move, against one per neighbour (batched) or a
few (local) for exact differences, whose proposals are accepted almost always."""

PROBE_SEED = 20_220_517
"""Seed of the probe's private generator: the same model and start give the same choice."""


class DifferencesChoice(NamedTuple):
    """What ``differences="auto"`` chose and what it measured.

    Attributes
    ----------
    kind : {"gradient", "exact"}
    reason : str
        One sentence, also logged.
    max_error : float
        Largest ``|first-order - exact|`` (nats) over the probed moves; ``inf`` when one of them
        is impossible for one and possible for the other; NaN when nothing was measured.
    acceptance : float
        Mean MH acceptance of the probe chain's first-order proposals (NaN: not measured).
    n_compared : int
        Moves compared.
    """

    kind: str
    reason: str
    max_error: float = math.nan
    acceptance: float = math.nan
    n_compared: int = 0


class Probe(NamedTuple):
    """What :func:`probe_first_order` measured."""

    max_error: float
    exact_match: bool
    acceptance: float
    n_compared: int


def _tolerance(logp_x: float) -> float:
    """Agreement tolerance of one difference: rounding of two logps of this size in floatX."""
    eps = float(np.finfo(pytensor.config.floatX).eps)
    return math.sqrt(eps) * (1.0 + abs(logp_x))


def compare_at(diffs, x: np.ndarray, logp_x: float, deltas: np.ndarray, n_slots: int, rng):
    """``(max |first-order - exact|, all within rounding, moves compared)`` at ``x``.

    ``diffs`` is a :class:`~pymc_lbp.logp.differences.GradientDifferences`; the exact difference
    of a move is ``logp(y) - logp(x)``, with ``logp(y)`` from the same compiled call at the
    neighbour.
    """
    layout = diffs.layout
    diffs.refresh_bounds(x)
    _, valid = layout.candidates(x)
    slots = np.flatnonzero(valid)
    if slots.size > n_slots:
        slots = rng.choice(slots, size=n_slots, replace=False)
    worst, match, tol = 0.0, True, _tolerance(logp_x)
    for slot in slots:
        y = x.copy()
        y[layout.slot_site[slot]] = layout.new_value(x, slot)
        exact = diffs(y)[0] - logp_x
        first = deltas[slot]
        if not np.isfinite(exact) or not np.isfinite(first):
            err = 0.0 if (np.isneginf(exact) or np.isnan(exact)) and np.isneginf(first) else np.inf
        else:
            err = abs(first - exact)
        worst = max(worst, err)
        match = match and err <= tol
    return worst, match, int(slots.size)


def probe_first_order(
    diffs,
    x0: np.ndarray,
    log_g,
    *,
    n_steps: int = PROBE_STEPS,
    n_states: int = PROBE_STATES,
    n_slots: int = PROBE_SLOTS,
    seed: int = PROBE_SEED,
) -> Probe | None:
    """Run the first-order single-site chain from ``x0`` and compare with exact differences.

    Parameters
    ----------
    diffs : GradientDifferences
    x0 : ndarray
        Start (block vector).
    log_g : callable
        Balancing function in log space (``sqrt`` when the sampler learns its own).
    n_steps, n_states, n_slots : int
        Chain steps, states compared along it (evenly spaced, the start first), moves per state.
    seed : int
        Seed of the private generator.

    Returns
    -------
    Probe or None
        None when ``x0`` has probability zero (the sampler's start check reports it).
    """
    rng = np.random.default_rng(seed)
    layout = diffs.layout
    x = np.asarray(x0, dtype=np.int64).copy()
    diffs.refresh_bounds(x)
    logp, deltas = diffs(x)
    if not np.isfinite(logp):
        return None

    def evaluate(y: np.ndarray):
        logp_y, deltas_y = diffs(y)
        return logp_y, deltas_y, prepare_weights(balanced_log_weights(deltas_y, log_g))

    compare_every = max(1, n_steps // max(n_states - 1, 1))
    worst, match, compared, accept_sum = 0.0, True, 0, 0.0
    states = 0
    for step in range(n_steps + 1):
        if states < n_states and step % compare_every == 0:
            err, ok, n = compare_at(diffs, x, logp, deltas, n_slots, rng)
            worst, match, compared, states = max(worst, err), match and ok, compared + n, states + 1
        if step == n_steps:
            break
        prep = prepare_weights(balanced_log_weights(deltas, log_g))
        if prep is None:  # first-order differences propose nothing from here
            continue
        move = single_site_step(x, logp, prep, layout, evaluate, rng.random(), rng.random())
        accept_sum += move.accept_prob
        if move.accepted:
            x, logp, deltas = move.x, move.logp, move.deltas
    diffs.refresh_bounds(np.asarray(x0, dtype=np.int64))
    return Probe(worst, match, accept_sum / max(n_steps, 1), compared)


def choose(probe: Probe | None, n_slots: int) -> DifferencesChoice:
    """Apply the rule of this module to a probe on a block of ``n_slots`` moves."""
    if probe is None:
        return DifferencesChoice(
            "gradient", "the start point has probability zero: nothing to measure"
        )
    measured = (
        f"first-order differences differ from the exact ones by up to {probe.max_error:.3g} nats "
        f"over {probe.n_compared} probed moves"
    )
    args = (probe.max_error, probe.acceptance, probe.n_compared)
    if probe.exact_match:
        return DifferencesChoice(
            "gradient",
            f"first-order differences equal the exact ones at all {probe.n_compared} probed "
            "moves: one logp and one gradient evaluation per step (measured again during "
            "tuning, where the chain is)",
            *args,
        )
    if n_slots <= SMALL_BLOCK_SLOTS:
        return DifferencesChoice(
            "exact",
            f"{measured}, and exact differences are cheap on this block ({n_slots} moves, "
            f"at most {SMALL_BLOCK_SLOTS})",
            *args,
        )
    if probe.acceptance >= MIN_ACCEPTANCE:
        return DifferencesChoice(
            "gradient",
            f"{measured}, but their proposals are accepted at rate {probe.acceptance:.2f} "
            f"(at least {MIN_ACCEPTANCE})",
            *args,
        )
    return DifferencesChoice(
        "exact",
        f"{measured}, and their proposals are accepted at rate {probe.acceptance:.2f} only "
        f"(below {MIN_ACCEPTANCE})",
        *args,
    )


def recheck_due(tune_draws: int) -> bool:
    """Whether a first-order choice is measured again before tuning draw ``tune_draws``
    (counted from 0): at draws ``1, 2, 4, 8, ...``, so about ``log2(tune)`` probes in all, the
    first after every other step has moved its variables once."""
    return tune_draws >= 1 and tune_draws & (tune_draws - 1) == 0


class TuningRecheck:
    """A first-order choice of ``differences="auto"``, measured again while the chain runs.

    Parameters
    ----------
    gradient : GradientDifferences
        The step's first-order differences (their compiled call also gives the exact logp at a
        neighbour, the probe's reference).
    log_g : callable
        Balancing function of the probe chain.
    n_slots : int
        Moves of the block (the rule's small-block case).
    measured : bool
        Whether the construction probe measured anything (False: the start had probability
        zero, so the first draw is probed whether tuning or not).
    """

    def __init__(self, gradient, log_g, n_slots: int, *, measured: bool):
        self.gradient = gradient
        self.log_g = log_g
        self.n_slots = int(n_slots)
        self.measured = bool(measured)
        self.n_checks = 0

    def due(self, tune_draws: int, tuning: bool) -> bool:
        """Whether to probe before this draw (``tune_draws`` tuning draws made so far)."""
        return not self.measured or (tuning and recheck_due(tune_draws))

    def check(self, x: np.ndarray, draw: int, where: str | None = None) -> DifferencesChoice:
        """Probe from ``x`` (the other variables at their current values) and apply
        :func:`choose`; the reason says at which draw (or ``where``) the choice was made."""
        probe = probe_first_order(self.gradient, x, self.log_g, seed=PROBE_SEED + draw + 1)
        self.n_checks += 1
        if where is None:
            where = "at the first draw" if not self.measured else f"at tuning draw {draw}"
        self.measured = True
        choice = choose(probe, self.n_slots)
        return choice._replace(
            reason=f"{where}, from the chain's current state with the other variables where "
            f"they are now: {choice.reason}"
        )


__all__ = [
    "MIN_ACCEPTANCE",
    "PROBE_SLOTS",
    "PROBE_STATES",
    "PROBE_STEPS",
    "SMALL_BLOCK_SLOTS",
    "DifferencesChoice",
    "Probe",
    "TuningRecheck",
    "choose",
    "compare_at",
    "probe_first_order",
    "recheck_due",
]
