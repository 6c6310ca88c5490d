"""The pair update in numpy (the test oracle of :mod:`pymc_lbp.samplers.laplace_pairs.jax_steps`).

``logp_and_gradient(flags, values) -> (logp, gradient)`` is the model's logp with the pairs'
flags and values (1-D, entry ``j`` the pair ``j``) and the other variables held, and its
gradient with respect to the values. The arithmetic is the JAX version's, operation for
operation, so the two make the same moves from the same uniforms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_lbp.samplers.common import mh_accept, mh_log_ratio

DELTA = 1e-2
"""Half the distance between the two values at which the curvature is measured (value units);
the Laplace approximation is exact for any ``DELTA`` where the conditional is Gaussian."""


class Laplace(NamedTuple):
    """The Laplace approximation ``N(mean, sd^2)`` of one value's conditional given a flag
    state, its log mass ``log_mass`` (up to a constant shared by both states) and whether it
    could be formed (``ok``)."""

    mean: float
    sd: float
    log_mass: float
    ok: bool


def laplace(h: float, slope: float, logp0: float) -> Laplace:
    """The approximation from the curvature ``h``, the slope and the logp at value 0."""
    ok = bool(np.isfinite(h) and h < 0 and np.isfinite(slope) and np.isfinite(logp0))
    hs = h if ok else -1.0
    sd = np.sqrt(-1.0 / hs)
    return Laplace(-slope / hs, sd, logp0 - 0.5 * slope**2 / hs + np.log(sd), ok)


def conditional(
    logp_and_gradient: Callable, flags: np.ndarray, values: np.ndarray, j: int, r: int
) -> Laplace:
    """:class:`Laplace` of value ``j``'s conditional with flag ``j`` set to ``r``."""
    f = flags.copy()
    f[j] = r
    below, above = values.copy(), values.copy()
    below[j], above[j] = -DELTA, DELTA
    lp0, g0 = logp_and_gradient(f, below)
    lp1, g1 = logp_and_gradient(f, above)
    h = (g1[j] - g0[j]) / (2 * DELTA)
    slope = 0.5 * (g0[j] + g1[j])
    return laplace(h, slope, 0.5 * (lp0 + lp1) - 0.5 * h * DELTA**2)


class Update(NamedTuple):
    """One pair update's outcome."""

    flags: np.ndarray
    values: np.ndarray
    logp: float
    prob: float
    accepted: bool


def log_q(a: Laplace, b: Laplace, log_p1: float, r: int, v: float) -> float:
    """Log density (up to a constant) of proposing flag ``r`` and value ``v`` (``a``, ``b``:
    the flag's states 0 and 1; ``log_p1`` the log probability of proposing 1)."""
    c = b if r == 1 else a
    log_pr = log_p1 if r == 1 else np.log1p(-np.exp(log_p1))
    return log_pr - 0.5 * ((v - c.mean) / c.sd) ** 2 - np.log(c.sd)


def pair_update(
    logp_and_gradient: Callable,
    flags: np.ndarray,
    values: np.ndarray,
    logp: float,
    j: int,
    u: np.ndarray,
) -> Update:
    """Update pair ``j`` from ``(flags, values)`` of log density ``logp`` with
    ``u = (u_flag, z, u_accept)`` (``z`` a standard normal draw)."""
    a = conditional(logp_and_gradient, flags, values, j, 0)
    b = conditional(logp_and_gradient, flags, values, j, 1)
    ok = a.ok and b.ok and np.isfinite(a.log_mass) and np.isfinite(b.log_mass)
    log_p1 = b.log_mass - np.logaddexp(a.log_mass, b.log_mass)
    f, v = flags.copy(), values.copy()
    if ok:
        r = int(u[0] < np.exp(log_p1))
        c = b if r == 1 else a
        f[j], v[j] = r, c.mean + c.sd * u[1]
        fwd = log_q(a, b, log_p1, r, v[j])
        rev = log_q(a, b, log_p1, int(flags[j]), values[j])
    else:  # no approximation: the flag flipped, the value kept (a symmetric proposal)
        f[j] = 1 - flags[j]
        fwd = rev = 0.0
    logp_y = float(logp_and_gradient(f, v)[0])
    ratio = mh_log_ratio(logp, logp_y, fwd, rev)
    prob, accepted = mh_accept(ratio, u[2])
    if accepted:
        return Update(f, v, logp_y, prob, True)
    return Update(flags, values, logp, prob, False)


def sweep(
    logp_and_gradient: Callable,
    flags: np.ndarray,
    values: np.ndarray,
    order: np.ndarray,
    uniforms: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``order[i]`` updated with ``uniforms[i]`` in turn; the final flags and values and
    each update's acceptance probability."""
    logp = float(logp_and_gradient(flags, values)[0])
    probs = []
    for j, u in zip(order, uniforms, strict=True):
        out = pair_update(logp_and_gradient, flags, values, logp, int(j), u)
        flags, values, logp = out.flags, out.values, out.logp
        probs.append(out.prob)
    return flags, values, np.asarray(probs)


__all__ = ["DELTA", "Laplace", "conditional", "laplace", "log_q", "pair_update", "sweep"]
