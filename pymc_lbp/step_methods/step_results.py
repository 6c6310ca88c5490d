"""The outcome records of the step methods' transitions (:class:`StepResult`, one MH step;
:class:`DrawResult`, one draw's steps) and the steps-per-draw rules
(:func:`steps_for_a_sweep`, :func:`check_steps_per_draw`).

Used by :class:`pymc_lbp.step_methods.base.DiscreteStep` and every sampler built on it; all of
them are importable from :mod:`pymc_lbp.step_methods.base` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_STEPS_PER_DRAW = 1_000_000
"""Largest ``steps_per_draw`` accepted, unless the block has more than a tenth of it in sites
(then ten sweeps, ``10 * n_sites``). One MH step costs at least tens of microseconds (a compiled
logp call plus the proposal), so this bound is already tens of seconds per recorded draw: take
more draws instead."""


def steps_for_a_sweep(n_sites: int, sites_per_step=1.0, xp=np):
    """MH steps per draw that propose about one change per site: ``ceil(n_sites / sites_per_step)``.

    ``sites_per_step`` is the expected number of sites one step proposes to change (1 for the
    single-site samplers, ``E[R]`` for a path of length ``R``); ``xp`` the array module (numpy:
    an ``int``; ``jax.numpy`` in the whole-model program, where ``sites_per_step`` may be traced).
    """
    if n_sites <= 0:
        return 0  # nothing to sweep (a block whose sites all move by their own jumps)
    steps = xp.maximum(1, xp.ceil(n_sites / xp.maximum(sites_per_step, 1.0)))
    return int(steps) if xp is np else steps.astype(xp.int64)


def check_steps_per_draw(value, n_sites: int) -> int | None:
    """Validate ``steps_per_draw``: None (one sweep, see the samplers) or a positive int within
    :data:`MAX_STEPS_PER_DRAW` (or ten sweeps on huge blocks)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(
            f"steps_per_draw must be None (one sweep per draw) or a positive int, got {value!r}"
        )
    if value < 1:
        raise ValueError(f"steps_per_draw must be >= 1, got {value}")
    bound = max(MAX_STEPS_PER_DRAW, 10 * n_sites)
    if value > bound:
        raise ValueError(
            f"steps_per_draw={value} is out of range: at most {bound} MH steps per recorded draw "
            f"(max({MAX_STEPS_PER_DRAW}, 10 x the block's {n_sites} sites)); each step costs at "
            "least tens of microseconds, so this draw alone would take hours. Use "
            "steps_per_draw=None (one sweep per draw) and more draws."
        )
    return int(value)


@dataclass
class StepResult:
    """Outcome of one MH transition (returned by :meth:`DiscreteStep.mh_step`)."""

    x: np.ndarray
    logp: float
    deltas: np.ndarray
    accept: float
    accepted: bool
    evaluated: bool = True  # whether the differences were evaluated at a proposal
    extra: dict[str, Any] | None = None


@dataclass
class DrawResult:
    """Outcome of the ``steps_per_draw`` transitions of one draw (see
    :meth:`DiscreteStep.run_steps`)."""

    x: np.ndarray
    logp: float
    deltas: np.ndarray
    sum_accept: float
    n_accepted: int
    logp_evals: int
    grad_evals: int
    extras: dict[str, list]
