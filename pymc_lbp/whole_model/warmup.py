"""Stan's windowed warmup for NUTS whose target changes each draw, on BlackJAX's pieces.

BlackJAX's ``window_adaptation`` runs its own loop on a fixed log density; ours changes after
every discrete move, so the warmup runs inside our scan, one :func:`update` per draw. The pieces
are BlackJAX's public ones: ``build_schedule`` (Stan's fast / slow windows),
``dual_averaging_adaptation`` (step size toward the target acceptance) and
``mass_matrix_adaptation`` (Welford's diagonal variance, regularised as Stan does); what is here
is only their composition, as in Stan: the step size adapts every draw, the variance estimate
accumulates in slow windows and becomes the inverse mass matrix at a slow window's end, where
the step size's dual averaging restarts from its averaged value.

**Chains batched in one program share one adaptation.** With ``chains`` given, the step size
adapts toward the target on the chains' mean acceptance and the variance estimate accumulates
every chain's position, so after the warmup every chain runs the same kernel. Adapted chain by
chain, each chain's step size followed its own warmup's luck (on a spike-and-slab regression
the four chains ended at 0.14-0.33, on a mixture at different modes' scales), and batched NUTS
runs every chain as long as the longest trajectory: pooling made the warmup about half as long
and the draws' longest trajectory shorter (docs/benchmarks.md, "Mixed models against the
alternatives"). The adaptation stops at the warmup's end as before, so each chain's draws
follow a fixed kernel that leaves the posterior invariant.

**Values a flag multiplies get a mass by the flag's state** (``gated``): their variance is
also estimated over the draws where their flag is on (:class:`OnRegime`, Welford's sums per
entry, regularised as Stan's), and NUTS uses it where the flag is on
(:mod:`pymc_lbp.samplers.laplace_pairs`, docs/whole_model.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class WarmupState(NamedTuple):
    """The adaptation's state: the step size's and the mass matrix's, and with ``gated``
    coordinates the variances of their "on" regime (:func:`warmup`)."""

    step_size_state: tuple
    mass_matrix_state: tuple
    step_size: object
    inverse_mass_matrix: object


class OnRegime(NamedTuple):
    """Welford's sums over the draws where each coordinate's flag is on (per coordinate:
    count, mean, sum of squared deviations) and the variances they gave at the last slow
    window's end."""

    count: object
    mean: object
    m2: object
    inverse_mass_matrix: object


def regularised(count, variance):
    """Stan's (and BlackJAX's) regularised variance: ``n / (n + 5) var + 1e-3 * 5 / (n + 5)``."""
    return (count / (count + 5.0)) * variance + 1e-3 * (5.0 / (count + 5.0))


def on_init(n: int) -> OnRegime:
    import jax.numpy as jnp

    zeros = jnp.zeros(n, dtype=jnp.float64)
    return OnRegime(zeros, zeros, zeros, jnp.ones(n, dtype=jnp.float64))


def on_update(state: OnRegime, x, on) -> OnRegime:
    """Welford's step for the coordinates whose flag is ``on`` (a bool vector)."""
    import jax.numpy as jnp

    count = state.count + on
    delta = x - state.mean
    mean = state.mean + jnp.where(on, delta / jnp.maximum(count, 1.0), 0.0)
    m2 = state.m2 + jnp.where(on, delta * (x - mean), 0.0)
    return OnRegime(count, mean, m2, state.inverse_mass_matrix)


def on_final(state: OnRegime) -> OnRegime:
    """The window's regularised variances become the regime's inverse masses; sums reset."""
    import jax.numpy as jnp

    variance = state.m2 / jnp.maximum(state.count - 1.0, 1.0)
    fresh = on_init(state.count.size)
    return fresh._replace(inverse_mass_matrix=regularised(state.count, variance))


def schedule(tune: int) -> np.ndarray:
    """``(tune, 2)`` int array: each warmup draw's window kind (0 fast, 1 slow) and whether it
    ends a slow window (Stan's schedule, BlackJAX's ``build_schedule``)."""
    import jax
    from blackjax.adaptation.window_adaptation import build_schedule

    with jax.ensure_compile_time_eval():  # a constant of the program, never traced
        return np.array(build_schedule(tune), dtype=np.int64).reshape(tune, 2)


def warmup(target_accept: float, chains: int | None = None, gated: bool = False):
    """``(init, update, final)`` of the windowed adaptation (see the module docs).

    ``init(position, step_size) -> WarmupState``;
    ``update(state, stage, position, acceptance_rate, on) -> WarmupState`` with ``stage`` a row
    of :func:`schedule`; ``final(state) -> (step_size, inverse_mass_matrix)``. With ``chains``
    given, ``update``'s position (each array), acceptance rate and ``on`` have a leading axis of
    that many chains and one state adapts to all of them; ``init`` takes one chain's position.

    With ``gated``, ``on`` is a bool vector over the flattened position: coordinates whose flag
    is on (values a flag multiplies, :mod:`pymc_lbp.samplers.laplace_pairs`). Their variance is
    estimated apart over the draws where their flag is on, and the inverse mass matrix is the
    pair ``(all draws', on draws')``: NUTS uses the second where the flag is on
    (:class:`~pymc_lbp.whole_model.program.Program`). Without ``gated``, ``on`` is ignored.
    """
    import jax
    import jax.numpy as jnp
    from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
    from blackjax.adaptation.step_size import dual_averaging_adaptation
    from jax.flatten_util import ravel_pytree

    da_init, da_update, da_final = dual_averaging_adaptation(target_accept)
    mm_init, mm_update, mm_final = mass_matrix_adaptation(is_diagonal_matrix=True)

    def init(position, step_size) -> WarmupState:
        n = ravel_pytree(position)[0].size
        mm = mm_init(n)
        if gated:
            mm = (mm, on_init(n))
        return WarmupState(da_init(step_size), mm, jnp.asarray(step_size), _imm(mm))

    def _imm(mm):
        if gated:
            return mm[0].inverse_mass_matrix, mm[1].inverse_mass_matrix
        return mm.inverse_mass_matrix

    def accumulate_one(mm, position, on):
        if not gated:
            return mm_update(mm, position)
        return mm_update(mm[0], position), on_update(mm[1], ravel_pytree(position)[0], on)

    def update(state: WarmupState, stage, position, acceptance_rate, on=None) -> WarmupState:
        kind, window_end = stage[0], stage[1].astype(bool)
        ss = da_update(state.step_size_state, jnp.mean(acceptance_rate))

        def accumulate(m):
            if chains is None:
                return accumulate_one(m, position, on)
            return jax.lax.scan(lambda m, xs: (accumulate_one(m, *xs), None), m, (position, on))[0]

        mm = jax.lax.cond(kind == 1, accumulate, lambda m: m, state.mass_matrix_state)

        def end_window(args):
            ss, mm = args
            mm = (mm_final(mm[0]), on_final(mm[1])) if gated else mm_final(mm)
            return da_init(da_final(ss)), mm

        ss, mm = jax.lax.cond(window_end, end_window, lambda args: args, (ss, mm))
        return WarmupState(ss, mm, jnp.exp(ss.log_step_size), _imm(mm))

    def final(state: WarmupState):
        return jnp.exp(state.step_size_state.log_step_size_avg), state.inverse_mass_matrix

    return init, update, final
