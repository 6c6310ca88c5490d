"""The pair updates in the compiled whole-model program.

The JAX version of :mod:`pymc_lbp.samplers.laplace_pairs.reference`, operation for operation:
a draw updates every pair once, in a random order, with the model's logp and its gradient with
respect to the values (PyTensor's graph, converted by
:func:`pymc_lbp.whole_model.jaxify.jax_function`), the other variables read from the chain's
values. The MH rule is :func:`pymc_lbp.samplers.common.mh_log_ratios` on ``jax.numpy``.
"""

from __future__ import annotations

from collections.abc import Callable

from pymc_lbp.samplers.common import mh_accept_probs, mh_log_ratios
from pymc_lbp.samplers.laplace_pairs.reference import DELTA

STAT_NAMES = ("pair_accept", "pairs_switched")
"""The stats of a draw's pair updates (:data:`pymc_lbp.step_methods.stats.STATS`)."""


def pair_sweep(logp_and_gradient: Callable) -> Callable:
    """``run(flags, values, order, uniforms) -> (flags, values, probs)``: the reference's
    :func:`~pymc_lbp.samplers.laplace_pairs.reference.sweep` in JAX, for
    ``logp_and_gradient(flags, values) -> (logp, gradient)`` (JAX-traceable)."""
    import jax
    import jax.numpy as jnp

    def lg(f, v):
        lp, g = logp_and_gradient(f, v)
        return jnp.asarray(lp, jnp.float64), jnp.asarray(g, jnp.float64)

    def conditional(f, v, j, r):
        f = f.at[j].set(r)
        lp0, g0 = lg(f, v.at[j].set(-DELTA))
        lp1, g1 = lg(f, v.at[j].set(DELTA))
        h = (g1[j] - g0[j]) / (2 * DELTA)
        slope = 0.5 * (g0[j] + g1[j])
        logp0 = 0.5 * (lp0 + lp1) - 0.5 * h * DELTA**2
        ok = jnp.isfinite(h) & (h < 0) & jnp.isfinite(slope) & jnp.isfinite(logp0)
        hs = jnp.where(ok, h, -1.0)
        sd = jnp.sqrt(-1.0 / hs)
        return -slope / hs, sd, logp0 - 0.5 * slope**2 / hs + jnp.log(sd), ok

    def update(carry, xs):
        f, v, lp = carry
        j, u = xs
        m0, s0, w0, ok0 = conditional(f, v, j, 0)
        m1, s1, w1, ok1 = conditional(f, v, j, 1)
        ok = ok0 & ok1 & jnp.isfinite(w0) & jnp.isfinite(w1)
        log_p1 = w1 - jnp.logaddexp(w0, w1)

        def log_q(r, x):
            m, s = jnp.where(r == 1, m1, m0), jnp.where(r == 1, s1, s0)
            log_pr = jnp.where(r == 1, log_p1, jnp.log1p(-jnp.exp(log_p1)))
            return log_pr - 0.5 * ((x - m) / s) ** 2 - jnp.log(s)

        # without an approximation: the flag flipped, the value kept (a symmetric proposal)
        r = jnp.where(ok, (u[0] < jnp.exp(log_p1)).astype(f.dtype), 1 - f[j])
        fy = f.at[j].set(r)
        vy = v.at[j].set(
            jnp.where(ok, jnp.where(r == 1, m1, m0) + jnp.where(r == 1, s1, s0) * u[1], v[j])
        )
        lp_y = lg(fy, vy)[0]
        fwd = jnp.where(ok, log_q(r, vy[j]), 0.0)
        rev = jnp.where(ok, log_q(f[j], v[j]), 0.0)
        prob = mh_accept_probs(mh_log_ratios(lp, lp_y, fwd, rev, xp=jnp), xp=jnp)
        accepted = u[2] < prob
        f, v, lp = (jnp.where(accepted, y, x) for x, y in ((f, fy), (v, vy), (lp, lp_y)))
        return (f, v, lp), prob

    def run(flags, values, order, uniforms):
        lp = lg(flags, values)[0]
        (flags, values, _), probs = jax.lax.scan(update, (flags, values, lp), (order, uniforms))
        return flags, values, probs

    return run


def pair_draw(positions: tuple[int, int], logp_and_gradient: Callable) -> Callable:
    """``draw(key, values, state, tuning) -> (values, state, stats)`` of the program's block
    for the pairs of the variables at ``positions`` (flag, value) in ``model.value_vars``:
    one sweep over the pairs in a random order; ``logp_and_gradient(*values) -> [logp,
    gradient with respect to the value variable]`` on the model's values. Stats:
    ``pair_accept`` (the sweep's mean acceptance probability) and ``pairs_switched`` (flags
    changed)."""
    import jax
    import jax.numpy as jnp

    fi, vi = positions

    def put(values, f, v):
        out = list(values)
        out[fi] = f.reshape(values[fi].shape).astype(values[fi].dtype)
        out[vi] = v.reshape(values[vi].shape).astype(values[vi].dtype)
        return tuple(out)

    def draw(key, values, state, tuning):
        f0 = jnp.ravel(values[fi]).astype(jnp.int64)
        v0 = jnp.ravel(values[vi]).astype(jnp.float64)

        def lg(f, v):
            lp, g = logp_and_gradient(*put(values, f, v))
            return lp, jnp.ravel(g)

        k_order, k_uniform, k_normal = jax.random.split(key, 3)
        n = f0.size
        order = jax.random.permutation(k_order, n)
        u = jax.random.uniform(k_uniform, (n, 2), dtype=jnp.float64)
        z = jax.random.normal(k_normal, (n,), dtype=jnp.float64)
        uniforms = jnp.column_stack([u[:, 0], z, u[:, 1]])
        f, v, probs = pair_sweep(lg)(f0, v0, order, uniforms)
        stats = {
            "pair_accept": jnp.mean(probs),
            "pairs_switched": jnp.count_nonzero(f != f0).astype(jnp.int64),
        }
        return put(values, f, v), state, stats

    return draw


__all__ = ["STAT_NAMES", "pair_draw", "pair_sweep"]
