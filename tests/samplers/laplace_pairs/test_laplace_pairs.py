"""Joint flag-value updates from Laplace proposals (pymc_lbp.samplers.laplace_pairs).

The update is checked the way a kernel is judged here: exact posterior draws (closed form for
a linear-Gaussian pair model, quadrature for a logistic one, where the Laplace proposal is only
approximate and the MH correction matters) stay distributed as they were after one sweep, and
the same check fails when the proposal's terms are dropped from the acceptance ratio; the JAX
sweep makes the numpy reference's moves from the same uniforms; the right variables are paired.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy.special import expit, log_expit, logsumexp

from pymc_lbp.samplers.laplace_pairs import reference
from pymc_lbp.samplers.laplace_pairs.finding import find_pairs
from tests.helpers.gated_regression import gated_posterior

N_DRAWS = 4000
Z_BOUND = 4.0  # |estimate - exact| / standard error, per quantity

# linear-Gaussian: y ~ N(X (g * b), 1), b_j ~ N(0, 2^2), g_j ~ Bernoulli(0.3)
X = np.random.default_rng(3).normal(size=(10, 2))
Y = X @ np.array([1.2, 0.0]) + np.random.default_rng(4).normal(size=10)
P_ON, PRIOR_SD = 0.3, 2.0


def gaussian_logp_and_gradient(f, v):
    eta = X @ (f * v)
    r = Y - eta
    lp = (
        -0.5 * r @ r
        - 0.5 * np.sum((v / PRIOR_SD) ** 2)
        + np.sum(np.where(f == 1, np.log(P_ON), np.log(1 - P_ON)))
    )
    return lp, f * (X.T @ r) - v / PRIOR_SD**2


GATED = gated_posterior(X, Y, P_ON, PRIOR_SD)


# logistic: y_i ~ Bernoulli(sigmoid(x_i g b)), b ~ N(0, 1.5^2), g ~ Bernoulli(0.4); one pair
XL = np.array([-1.5, -0.7, 0.2, 0.9, 1.4, 2.0])
YL = np.array([0, 0, 1, 1, 1, 0])
P_L, SD_L = 0.4, 1.5
GRID = np.linspace(-10, 10, 40001)


def logistic_logp_and_gradient(f, v):
    eta = XL * f[0] * v[0]
    lp = (
        np.sum(YL * log_expit(eta) + (1 - YL) * log_expit(-eta))
        - 0.5 * (v[0] / SD_L) ** 2
        + (np.log(P_L) if f[0] == 1 else np.log(1 - P_L))
    )
    return lp, np.array([f[0] * XL @ (YL - expit(eta)) - v[0] / SD_L**2])


def logistic_exact_draws(rng, n):
    """Exact draws by quadrature: P(g = 1) from the integrated likelihood, b | g = 1 by
    inverse CDF on a fine grid, b | g = 0 its prior."""
    lp_on = np.array([logistic_logp_and_gradient(np.array([1]), np.array([b]))[0] for b in GRID])
    log_z1 = logsumexp(lp_on) + np.log(GRID[1] - GRID[0])
    # g = 0: the likelihood is 2^-n whatever b, and the prior's unnormalised mass sqrt(2 pi) sd
    log_z0 = np.log(1 - P_L) + YL.size * np.log(0.5) + 0.5 * np.log(2 * np.pi * SD_L**2)
    p1 = np.exp(log_z1 - np.logaddexp(log_z0, log_z1))
    cdf = np.cumsum(np.exp(lp_on - lp_on.max()))
    cdf /= cdf[-1]
    g = (rng.random(n) < p1).astype(np.int64)
    b = np.where(g == 1, np.interp(rng.random(n), cdf, GRID), rng.normal(0, SD_L, n))
    return g[:, None], b[:, None], p1


def one_sweep_each(lg, flags, values, rng):
    """Every draw moved by one sweep over its pairs (random order, fresh uniforms); the mean
    acceptance probability."""
    out_f, out_v, probs = [], [], []
    n_pairs = flags.shape[1]
    for f, v in zip(flags, values, strict=True):
        u = np.column_stack([rng.random(n_pairs), rng.normal(size=n_pairs), rng.random(n_pairs)])
        f2, v2, p = reference.sweep(lg, f, v, rng.permutation(n_pairs), u)
        out_f.append(f2)
        out_v.append(v2)
        probs.extend(p)
    return np.array(out_f), np.array(out_v), float(np.mean(probs))


def z_scores(before_f, before_v, after_f, after_v):
    """Two-sample z-scores of the flags' means, the values' means and their squares' means
    (before and after are independent samples of the same law if the update keeps it)."""
    out = []
    for a, b in ((before_f, after_f), (before_v, after_v), (before_v**2, after_v**2)):
        a, b = a.astype(float), b.astype(float)
        se = np.sqrt(a.var(axis=0) / len(a) + b.var(axis=0) / len(b))
        out.extend(np.abs(a.mean(axis=0) - b.mean(axis=0)) / se)
    return np.array(out)


@pytest.fixture
def drop_proposal_terms(monkeypatch):
    """The acceptance ratio without ``log q`` (a wrong kernel the checks must catch)."""
    monkeypatch.setattr(reference, "log_q", lambda *args: 0.0)


def check_gaussian(seed):
    rng = np.random.default_rng(seed)
    f, v = GATED.draws(rng, N_DRAWS)
    f_ref, v_ref = GATED.draws(rng, N_DRAWS)  # an independent exact sample
    f2, v2, accept = one_sweep_each(gaussian_logp_and_gradient, f, v, rng)
    return z_scores(f_ref, v_ref, f2, v2), accept, (f2 != f).mean()


def test_gaussian_pairs_stay_exact_and_every_update_is_accepted():
    """With a Gaussian conditional the proposal is that conditional: every update accepted
    (a Gibbs draw of the pair), and the swept draws have the exact law's flag and value
    moments; flags do change."""
    z, accept, switched = check_gaussian(7)
    assert accept > 1 - 1e-9
    assert z.max() < Z_BOUND, z
    assert switched > 0.05


def test_gaussian_check_fails_without_the_proposal_terms(drop_proposal_terms):
    z, accept, _ = check_gaussian(7)
    assert accept < 0.9
    assert z.max() > Z_BOUND, z


def check_logistic(seed):
    rng = np.random.default_rng(seed)
    g, b, p1 = logistic_exact_draws(rng, N_DRAWS)
    g_ref, b_ref, _ = logistic_exact_draws(rng, N_DRAWS)
    g2, b2, accept = one_sweep_each(logistic_logp_and_gradient, g, b, rng)
    # the update's law against an independent exact sample, and P(g = 1) against quadrature
    z = z_scores(g_ref, b_ref, g2, b2)
    z_p1 = abs(g2.mean() - p1) / np.sqrt(p1 * (1 - p1) / N_DRAWS)
    return np.append(z, z_p1), accept


def test_logistic_pair_stays_exact_where_the_proposal_is_approximate():
    z, accept = check_logistic(8)
    assert 0.3 < accept < 0.999  # the Laplace proposal is not the conditional: MH corrects
    assert z.max() < Z_BOUND, z


def test_logistic_check_fails_without_the_proposal_terms(drop_proposal_terms):
    z, _ = check_logistic(8)
    assert z.max() > Z_BOUND, z


def test_jax_sweep_makes_the_reference_moves():
    """From the same uniforms the JAX sweep (a JAX logp and gradient of the same model) and
    the numpy reference make the same flag decisions and values to rounding, twenty sweeps
    from exact draws."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from pymc_lbp.samplers.laplace_pairs.jax_steps import pair_sweep

    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)

    def lg_jax(f, v):
        r = Yj - Xj @ (f * v)
        lp = (
            -0.5 * r @ r
            - 0.5 * jnp.sum((v / PRIOR_SD) ** 2)
            + jnp.sum(jnp.where(f == 1, np.log(P_ON), np.log(1 - P_ON)))
        )
        return lp, f * (Xj.T @ r) - v / PRIOR_SD**2

    run = jax.jit(pair_sweep(lg_jax))
    rng = np.random.default_rng(9)
    flags, values = GATED.draws(rng, 20)
    switched = 0
    for f, v in zip(flags, values, strict=True):
        order = rng.permutation(2)
        u = np.column_stack([rng.random(2), rng.normal(size=2), rng.random(2)])
        f_ref, v_ref, p_ref = reference.sweep(gaussian_logp_and_gradient, f, v, order, u)
        f_jax, v_jax, p_jax = run(
            jnp.asarray(f), jnp.asarray(v), jnp.asarray(order), jnp.asarray(u)
        )
        np.testing.assert_array_equal(np.asarray(f_jax), f_ref)
        np.testing.assert_allclose(np.asarray(v_jax), v_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.asarray(p_jax), p_ref, rtol=1e-10)
        switched += int((f_ref != f).any())
    assert switched > 0


def test_without_an_approximation_the_flag_is_flipped_alone():
    """Where the value's logp is not concave for a flag state the update proposes the other
    flag with the value kept; the JAX sweep makes the reference's moves there too (flags
    change, values never), and the flip is accepted by the symmetric MH rule."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from pymc_lbp.samplers.laplace_pairs.jax_steps import pair_sweep

    def lg(f, v, xp=np):  # convex in the value while the flag is on: no Laplace approximation
        curvature = xp.where(f == 1, 0.1, -1.0)
        return xp.sum(0.5 * curvature * v**2 - 0.3 * f), curvature * v

    run = jax.jit(pair_sweep(lambda f, v: lg(f, v, jnp)))
    rng = np.random.default_rng(10)
    flipped = 0
    for _ in range(20):
        f, v = rng.integers(0, 2, size=3), rng.normal(size=3)
        order = rng.permutation(3)
        u = np.column_stack([rng.random(3), rng.normal(size=3), rng.random(3)])
        f_ref, v_ref, p_ref = reference.sweep(lg, f, v, order, u)
        f_jax, v_jax, p_jax = run(*(jnp.asarray(a) for a in (f, v, order, u)))
        np.testing.assert_array_equal(np.asarray(f_jax), f_ref)
        np.testing.assert_array_equal(np.asarray(v_jax), v)
        np.testing.assert_array_equal(v_ref, v)
        np.testing.assert_allclose(np.asarray(p_jax), p_ref, rtol=1e-12)
        flipped += int((f_ref != f).sum())
    assert flipped > 0


def test_which_models_are_paired():
    """A flag multiplied entry by entry by a value of its shape is paired with it (a cast in
    between, a third factor, a deterministic); a same-shaped value the flag does not touch is
    not, nor the prior form (the flag among the value's prior's parameters), nor a flag the
    caller does not name."""
    with pm.Model() as product:
        g = pm.Bernoulli("g", P_ON, shape=2)
        pm.Normal("other", 0.0, 1.0, shape=2)
        b = pm.Normal("b", 0.0, PRIOR_SD, shape=2)
        coef = pm.Deterministic("coef", 2.0 * pt.cast(g, "float64") * b)
        pm.Normal("y", X @ coef, 1.0, observed=Y)
    with pm.Model() as prior_form:
        g = pm.Bernoulli("g", P_ON, shape=2)
        b = pm.Normal("b", 0.0, 0.05 + 1.95 * g, shape=2)
        pm.Normal("y", X @ b, 1.0, observed=Y)
    with pm.Model() as other_shape:
        g = pm.Bernoulli("g", P_ON, shape=2)
        b = pm.Normal("b", 0.0, PRIOR_SD)
        pm.Normal("y", X @ (g * b), 1.0, observed=Y)
    shapes = {"g": (2,), "b": (2,), "other": (2,)}
    assert find_pairs(product, ["g"], shapes) == [("g", "b")]
    assert find_pairs(product, [], shapes) == []
    assert find_pairs(prior_form, ["g"], shapes) == []
    assert find_pairs(other_shape, ["g"], {"g": (2,), "b": ()}) == []


def test_on_regime_variances_are_the_regularised_variances_of_the_on_draws():
    """The warmup's inverse mass for the draws where a value's flag is on: Stan's regularised
    variance (``n / (n + 5) var + 1e-3 * 5 / (n + 5)``) of exactly those draws, per entry, and
    ``1e-3`` for an entry whose flag was never on."""
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from pymc_lbp.whole_model.warmup import on_final, on_init, on_update

    rng = np.random.default_rng(12)
    x = rng.normal(size=(50, 3)) * np.array([0.1, 2.0, 1.0])
    on = rng.random((50, 3)) < np.array([0.3, 0.9, 0.0])
    state = on_init(3)
    for xi, oi in zip(x, on, strict=True):
        state = on_update(state, jnp.asarray(xi), jnp.asarray(oi))
    got = np.asarray(on_final(state).inverse_mass_matrix)
    for j in range(2):
        n = on[:, j].sum()
        want = n / (n + 5) * x[on[:, j], j].var(ddof=1) + 1e-3 * 5 / (n + 5)
        np.testing.assert_allclose(got[j], want, rtol=1e-10)
    np.testing.assert_allclose(got[2], 1e-3)
