"""pymc_lbp.sample against exact posteriors of small mixed models (issue #25).

Each model's posterior is computed exactly by enumerating the discrete variables and
integrating the continuous ones in closed form (conjugate Normal means, a Gamma rate); the
sampled means and standard deviations must lie within 4 Monte Carlo standard errors (ArviZ's
``mcse``, from the draws' own ESS) of the exact values. Fixed seeds.
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats
from scipy.special import gammaln, logsumexp

pytest.importorskip("blackjax", reason="pymc_lbp[jax] extra (jax, blackjax) not installed")

import pymc_lbp  # noqa: E402
from tests.helpers.ess import checked_mcse  # noqa: E402
from tests.helpers.gated_regression import gated_posterior  # noqa: E402

Z_BOUND = 4.0  # |estimate - exact| / MCSE; P(|N(0,1)| > 4) = 6e-5 per quantity
DRAWS, TUNE = 1000, 300  # per chain, 4 chains


def _check(idata, var, exact_mean, exact_sd, index=()):
    """Sampled mean and sd of ``var[index]`` within Z_BOUND MCSE of the exact ones (each MCSE
    from an ESS of at least MIN_ESS).

    A 0/1 quantity's sd is ``sqrt(m (1 - m))`` of its mean: the mean's check is the whole test,
    and the delta-method standard error below is wrong for it (its slope ``1 - 2m`` vanishes
    near ``m = 1/2``, so a mean 3.7 MCSE off, inside the bound, failed the sd check once on a
    GPU). Only the mean is checked there.
    """
    draws = idata.posterior[var].values[(slice(None), slice(None), *index)].astype(float)
    mean, sd = draws.mean(), draws.std()
    se_mean = checked_mcse(draws, f"{var}{list(index)}")
    assert abs(mean - exact_mean) <= Z_BOUND * se_mean, (var, index, mean, exact_mean, se_mean)
    if np.isin(draws, (0.0, 1.0)).all():
        assert np.isclose(exact_sd, np.sqrt(exact_mean * (1 - exact_mean)))
        return
    # the sd's standard error by the delta method from that of the squared deviations' mean
    se_sd = checked_mcse((draws - mean) ** 2, f"{var}{list(index)} squared deviations") / (2 * sd)
    assert abs(sd - exact_sd) <= Z_BOUND * se_sd, (var, index, sd, exact_sd, se_sd)


def test_indicator_with_conjugate_normal_coefficient():
    """z ~ Bernoulli(0.3), beta ~ N(0, 1.5^2), y_i ~ N(z beta x_i, 1): P(z = 1 | y) from the
    two marginal likelihoods, beta | z = 1 conjugate, beta | z = 0 its prior."""
    x = np.array([-1.0, -0.5, 0.3, 0.8, 1.2])
    y = np.array([-0.9, -0.1, -0.2, 0.9, 0.6])
    prior, tau = 0.3, 1.5
    (p1,), (e_beta,), (e_beta2,) = gated_posterior(x[:, None], y, prior, tau).moments()
    with pm.Model() as model:
        z = pm.Bernoulli("z", prior)
        beta = pm.Normal("beta", 0.0, tau)
        pm.Normal("y", z * beta * x, 1.0, observed=y)
    idata = pymc_lbp.sample(
        DRAWS, tune=TUNE, chains=4, model=model, random_seed=11, progressbar=False
    )
    _check(idata, "z", p1, np.sqrt(p1 * (1 - p1)))
    _check(idata, "beta", e_beta, np.sqrt(e_beta2 - e_beta**2))


def _mixture_on_six_points():
    """z_i ~ Bernoulli(0.5) assigns y_i to mu_0 ~ N(-1, 1) or mu_1 ~ N(1, 1), y_i ~ N(mu, 1):
    the model and its exact P(z_i = 1), E[mu_k], E[mu_k^2] and E[z_i mu_k], all 64 assignments
    enumerated, the means integrated in closed form."""
    y = np.array([-1.5, -0.8, -0.2, 0.4, 1.1, 1.7])
    prior_mean = np.array([-1.0, 1.0])
    logw, post_means, post_m2 = [], [], []
    zs = np.array(list(itertools.product((0, 1), repeat=6)))
    for z in zs:
        total, m, m2 = np.log(0.5) * 6, [], []
        for k in (0, 1):
            yk = y[z == k]
            n = yk.size
            total += (
                stats.multivariate_normal(
                    np.full(n, prior_mean[k]), np.eye(n) + np.ones((n, n))
                ).logpdf(yk)
                if n
                else 0.0
            )
            var = 1 / (1 + n)
            mean = var * (prior_mean[k] + yk.sum())
            m.append(mean)
            m2.append(var + mean**2)
        logw.append(total)
        post_means.append(m)
        post_m2.append(m2)
    w = np.exp(np.array(logw) - logsumexp(logw))
    exact = {
        "p_z": w @ zs,
        "e_mu": w @ np.array(post_means),
        "e_mu2": w @ np.array(post_m2),
        "e_z_mu": (w[:, None] * zs).T @ np.array(post_means),  # (site, component)
    }
    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.5, shape=6)
        mu = pm.Normal("mu", prior_mean, 1.0, shape=2)
        pm.Normal("y", mu[z], 1.0, observed=y)
    return model, exact


@pytest.mark.parametrize("marginalize", ["auto", False])
def test_two_component_mixture_on_six_points_enumerated(marginalize):
    """The mixture of :func:`_mixture_on_six_points` against its enumerated posterior, with
    NUTS on the joint model (``marginalize=False``) and, by default, on the model with z summed
    out by pymc-extras and z drawn from its full conditional after each NUTS transition: the
    marginals and the joint moments E[z_i mu_k], which only the draws' pairing of z with mu
    gets right."""
    model, exact = _mixture_on_six_points()
    idata = pymc_lbp.sample(
        DRAWS,
        tune=TUNE,
        chains=4,
        model=model,
        random_seed=12,
        progressbar=False,
        marginalize=marginalize,
    )
    assert idata.posterior.attrs.get("marginalized") == ("z" if marginalize else None)
    p_z, e_mu, e_mu2 = exact["p_z"], exact["e_mu"], exact["e_mu2"]
    for i in range(6):
        _check(idata, "z", p_z[i], np.sqrt(p_z[i] * (1 - p_z[i])), (i,))
    for k in (0, 1):
        _check(idata, "mu", e_mu[k], np.sqrt(e_mu2[k] - e_mu[k] ** 2), (k,))


@pytest.mark.parametrize("order", ["nuts_first", "draws_first"])
def test_summed_sites_are_drawn_given_the_new_continuous_values(order, monkeypatch):
    """theta ~ N(0, 1), z_1, z_2 ~ Bernoulli(sigmoid(4 theta)), y_i ~ N(z_i, 1) observed at 1/2
    (the same likelihood for both values of z_i): summed over z, theta's posterior
    is its prior and NUTS's draws are nearly independent, while z follows theta closely.
    E[z_i theta] = E[theta sigmoid(4 theta)] (quadrature) holds for the draws only where z is
    drawn after the NUTS transition, given the new theta (the program's order); the negative
    control draws z first, given the old theta (recorded beside the new one), and its joint
    moment is far off while the marginals stay right."""
    from scipy.integrate import quad

    from pymc_lbp.whole_model import sampling

    if order == "draws_first":

        class DrawsFirst(sampling.Program):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.nuts_first = False

        monkeypatch.setattr(sampling, "Program", DrawsFirst)
    e_z_theta = quad(lambda t: t * special.expit(4 * t) * stats.norm.pdf(t), -12, 12)[0]
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, 1.0)
        z = pm.Bernoulli("z", logit_p=4 * theta, shape=2)
        # N(1/2 | z, 1) is the same for z = 0 and 1: a dependent for pymc-extras to sum over
        # that leaves the posterior as it was
        pm.Normal("y", z, 1.0, observed=np.full(2, 0.5))
    idata = pymc_lbp.sample(
        DRAWS, tune=TUNE, chains=4, model=model, random_seed=16, progressbar=False
    )
    assert idata.posterior.attrs["marginalized"] == "z"
    _check(idata, "theta", 0.0, 1.0)
    for i in (0, 1):
        _check(idata, "z", 0.5, 0.5, (i,))
    draws = idata.posterior["z"].values[..., 0] * idata.posterior["theta"].values
    z_score = abs(draws.mean() - e_z_theta) / checked_mcse(draws, "z[0] theta")
    assert (z_score <= Z_BOUND) == (order == "nuts_first"), (z_score, e_z_theta)


def test_poisson_count_with_gamma_rate():
    """lam ~ Gamma(3, 0.5), N ~ Poisson(lam), y ~ Binomial(N, 0.6) observed 5: N's posterior by
    enumeration of its negative-binomial marginal, E[lam | N] = (3 + N) / 1.5."""
    a, b, p, y_obs = 3.0, 0.5, 0.6, 5
    n = np.arange(y_obs, 400)
    log_nb = (
        gammaln(a + n) - gammaln(a) - gammaln(n + 1) + a * np.log(b / (b + 1)) - n * np.log(b + 1)
    )
    logw = log_nb + stats.binom.logpmf(y_obs, n, p)
    w = np.exp(logw - logsumexp(logw))
    e_n, e_n2 = w @ n, w @ n**2
    lam_mean = (a + n) / (b + 1)
    lam_var = (a + n) / (b + 1) ** 2
    e_lam, e_lam2 = w @ lam_mean, w @ (lam_var + lam_mean**2)
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=a, beta=b)
        count = pm.Poisson("N", lam)
        pm.Binomial("y", count, p, observed=y_obs)
    idata = pymc_lbp.sample(
        DRAWS,
        tune=TUNE,
        chains=4,
        model=model,
        random_seed=13,
        progressbar=False,
        initvals={"N": 10},
    )
    _check(idata, "N", e_n, np.sqrt(e_n2 - e_n**2))
    _check(idata, "lam", e_lam, np.sqrt(e_lam2 - e_lam**2))


@pytest.mark.parametrize(
    "cls",
    ["LocallyBalanced", "GibbsWithGradients", "PathAuxiliaryLBP", "SelfBalancing", "BlockGibbs"],
)
def test_coupled_binary_chain_with_a_continuous_field(cls):
    """Six coupled binary sites and a Normal field: the single-site and path kernels in the
    program (the sites interact, so no full-conditional shortcut), and BlockGibbs' random scan
    (its default cluster is the whole chain, 64 joint states). logp(z, h) = 0.6 agree(z) +
    0.4 h S(z) - h^2 / 2 + prior; integrating h gives p(z) proportional to
    exp(0.6 agree + 0.08 S^2 + prior), h | z ~ N(0.4 S, 1)."""
    coupling, scale, logit = 0.6, 0.4, -0.3
    zs = np.array(list(itertools.product((0, 1), repeat=6)))
    s = zs.sum(1)
    agree = (zs[:, 1:] == zs[:, :-1]).sum(1)
    logw = coupling * agree + (scale * s) ** 2 / 2 + logit * s
    w = np.exp(logw - logsumexp(logw))
    p_z = w @ zs
    e_h = w @ (scale * s)
    e_h2 = w @ (1 + (scale * s) ** 2)
    with pm.Model() as model:
        z = pm.Bernoulli("z", logit_p=logit, shape=6)
        h = pm.Normal("h", 0.0, 1.0)
        pm.Potential("agree", coupling * pm.math.sum(pm.math.eq(z[1:], z[:-1])))
        pm.Potential("field", scale * h * pm.math.sum(z))
        step = getattr(pymc_lbp, cls)([z])
    idata = pymc_lbp.sample(
        DRAWS, tune=TUNE, chains=4, model=model, step=[step], random_seed=14, progressbar=False
    )
    for i in range(6):
        _check(idata, "z", p_z[i], np.sqrt(p_z[i] * (1 - p_z[i])), (i,))
    _check(idata, "h", e_h, np.sqrt(e_h2 - e_h**2))


def test_neural_mixed_block_pairs_with_nuts_on_their_values():
    """Two (flag, value) pairs, b_k ~ Bernoulli(0.4), v_k ~ N(0, 2^2), y_i ~ N(b_1 v_1 + b_2 v_2,
    1): NeuralMixedBlock's pair updates in the program, NUTS on v as well. Given b the values
    are Gaussian (precision I / 4 + n b b^T), so the four configurations' marginal likelihoods
    and the values' moments are closed form."""
    y = np.array([1.3, 0.7, 1.9])
    p_on, prior_sd = 0.4, 2.0
    p_b, e_v, e_v2 = gated_posterior(np.ones((3, 2)), y, p_on, prior_sd).moments()
    with pm.Model() as model:
        b = pm.Bernoulli("b", p_on, shape=2)
        v = pm.Normal("v", 0.0, prior_sd, shape=2)
        pm.Normal("y", b[0] * v[0] + b[1] * v[1], 1.0, observed=y)
        step = pymc_lbp.NeuralMixedBlock([b, v])
    idata = pymc_lbp.sample(
        DRAWS, tune=TUNE, chains=4, model=model, step=[step], random_seed=15, progressbar=False
    )
    for k in (0, 1):
        _check(idata, "b", p_b[k], np.sqrt(p_b[k] * (1 - p_b[k])), (k,))
        _check(idata, "v", e_v[k], np.sqrt(e_v2[k] - e_v[k] ** 2), (k,))
    stats_ = idata.sample_stats
    assert 0.3 < float(stats_["accept"].mean()) <= 1  # the shipped proposal's pair updates
    assert int(stats_["flags_on"].max()) == 2 and int(stats_["flags_on"].min()) == 0
    assert float(stats_["step_size"].mean()) > 0  # NUTS ran beside it


def test_product_form_spike_and_slab_with_pair_updates():
    """y ~ N(X (g * b), 1), g_j ~ Bernoulli(0.3), b_j ~ N(0, 2^2), three predictors: the
    defaults add the joint flag-value updates (the value's scale is 2 with the flag off, about
    0.3 on); given g the values are Gaussian, so the eight configurations' marginal likelihoods
    and the values' moments are closed form. Every pair update is accepted (Gaussian
    conditionals), flags switch by them, and no NUTS trajectory diverges."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(12, 3))
    y = x @ np.array([1.0, 0.0, -0.6]) + rng.normal(size=12)
    p_on, prior_sd = 0.3, 2.0
    p_g, e_b, e_b2 = gated_posterior(x, y, p_on, prior_sd).moments()
    with pm.Model() as model:
        g = pm.Bernoulli("g", p_on, shape=3)
        b = pm.Normal("b", 0.0, prior_sd, shape=3)
        pm.Normal("y", x @ (g * b), 1.0, observed=y)
    idata = pymc_lbp.sample(
        DRAWS, tune=TUNE, chains=4, model=model, random_seed=17, progressbar=False
    )
    assert idata.posterior.attrs["discrete_steps"] == ["LaplacePairs"]
    for k in range(3):
        _check(idata, "g", p_g[k], np.sqrt(p_g[k] * (1 - p_g[k])), (k,))
        _check(idata, "b", e_b[k], np.sqrt(e_b2[k] - e_b[k] ** 2), (k,))
    stats_ = idata.sample_stats
    assert float(stats_["pair_accept"].min()) > 1 - 1e-9
    assert int(stats_["pairs_switched"].sum()) > 100
    assert int(stats_["diverging"].sum()) == 0  # NUTS's mass of b follows g


def test_neural_block_chain_sweeps_with_a_continuous_shift():
    """An HMM of 8 binary states (fixed sticky transitions) whose emissions share a continuous
    shift c ~ N(0, 1): y_t ~ N(mu[z_t] + c, 1). NeuralBlock's default chain blocks swept by
    colour classes in the program, NUTS on c. Integrating c, y | z ~ N(mu_z, I + 1 1^T), so the
    256 state paths are enumerated exactly, and c | z, y is Gaussian."""
    T = 8
    trans = np.array([[0.8, 0.2], [0.3, 0.7]])
    mu = np.array([0.0, 2.0])
    y = np.array([-0.3, 0.4, 2.1, 2.6, 1.7, 0.2, -0.5, 2.2])
    paths = np.array(list(itertools.product((0, 1), repeat=T)))
    cov = np.eye(T) + np.ones((T, T))
    logw = np.array(
        [
            np.log(0.5)
            + np.log(trans[z[:-1], z[1:]]).sum()
            + stats.multivariate_normal(mu[z], cov).logpdf(y)
            for z in paths
        ]
    )
    w = np.exp(logw - logsumexp(logw))
    c_mean = (y[None, :] - mu[paths]).sum(1) / (T + 1)
    p_z, e_c = w @ paths, w @ c_mean
    e_c2 = w @ (1 / (T + 1) + c_mean**2)
    with pm.Model() as model:
        z = pm.Categorical("z", np.ones(2) / 2, shape=T)
        c = pm.Normal("c", 0.0, 1.0)
        pm.Potential("transitions", pm.math.log(pm.math.constant(trans)[z[:-1], z[1:]]).sum())
        pm.Normal("y", pm.math.constant(mu)[z] + c, 1.0, observed=y)
        step = pymc_lbp.NeuralBlock([z])
    assert step.colours is not None and not step.scan_compilable  # swept by colour classes
    idata = pymc_lbp.sample(
        DRAWS, tune=TUNE, chains=4, model=model, step=[step], random_seed=16, progressbar=False
    )
    for t in range(T):
        _check(idata, "z", p_z[t], np.sqrt(p_z[t] * (1 - p_z[t])), (t,))
    _check(idata, "c", e_c, np.sqrt(e_c2 - e_c**2))
    assert 0.3 < float(idata.sample_stats["accept"].mean()) <= 1
