"""What pymc_lbp.sample is given (issue #55): data changed by ``pm.set_data`` between runs, steps
built on another model, ``idata_kwargs`` as ``pm.sample`` takes them, truncated discrete
latents. Exact posteriors by enumeration; fixed seeds."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from scipy import stats

pytest.importorskip("blackjax", reason="pymc_lbp[jax] extra (jax, blackjax) not installed")

import pymc_lbp  # noqa: E402
from pymc_lbp.whole_model import jaxify  # noqa: E402
from tests.helpers.ess import checked_mcse  # noqa: E402

Z_BOUND = 5.0  # |mean - exact| / MCSE; P(|N(0,1)| > 5) = 6e-7 per quantity


def run(model, **kwargs):
    options = dict(draws=1000, tune=300, chains=2, model=model, random_seed=3, progressbar=False)
    options.update(kwargs)
    options.setdefault("compute_convergence_checks", False)
    return pymc_lbp.sample(**options)


def shift_model(y) -> pm.Model:
    """``mu ~ N(0, 1)``, ``z_i ~ Bernoulli(1/2)``, ``y_i ~ N(mu + 2 z_i, 1)``, ``y`` in
    ``pm.Data`` (its length is that of ``z``)."""
    with pm.Model() as model:
        data = pm.Data("y", np.asarray(y, dtype=float))
        mu = pm.Normal("mu", 0.0, 1.0)
        z = pm.Bernoulli("z", 0.5, shape=data.shape)
        pm.Normal("obs", mu + 2 * z, 1.0, observed=data, shape=z.shape)
    return model


def shift_posterior(y) -> tuple[np.ndarray, float]:
    """Exact ``E[z | y]`` and ``E[mu | y]`` of :func:`shift_model`: every ``z`` enumerated, ``mu``
    integrated (``y - 2 z ~ N(0, I + 11')``, ``mu | z, y ~ N(sum(y - 2 z) / (n + 1), .)``)."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    zs = np.array(list(itertools.product((0, 1), repeat=n)))
    marginal = stats.multivariate_normal(np.zeros(n), np.eye(n) + np.ones((n, n)))
    logw = np.array([marginal.logpdf(y - 2 * z) for z in zs])
    w = np.exp(logw - logw.max())
    w /= w.sum()
    return w @ zs, float(w @ ((y - 2 * zs).sum(axis=1) / (n + 1)))


def check_shift_posterior(idata, y):
    exact_z, exact_mu = shift_posterior(y)
    post = idata.posterior
    assert post["z"].shape[-1] == len(y)
    for i, p in enumerate(exact_z):
        draws = post["z"].values[..., i]
        z = (draws.mean() - p) / checked_mcse(draws, f"z[{i}]")
        assert abs(z) < Z_BOUND, (i, draws.mean(), p, z)
    draws = post["mu"].values
    z = (draws.mean() - exact_mu) / checked_mcse(draws, "mu")
    assert abs(z) < Z_BOUND, (draws.mean(), exact_mu, z)


def test_set_data_between_runs_is_seen(monkeypatch):
    """The second and third runs sample the posterior of the data set since the first (before
    the fix they drew the first run's posterior, bit for bit: the converted graphs held the first
    data as constants and were cached by the shared variable); new values of the same length
    reuse the converted graphs (the data are their inputs), a new length converts them again."""
    first, second, longer = [2.5, -0.3, 1.9], [-1.0, 0.4, 1.2], [0.5, 2.5, -0.4, 1.1, 0.9]
    model = shift_model(first)
    check_shift_posterior(run(model), first)

    converted = []
    real = jaxify.jaxified_graph
    monkeypatch.setattr(jaxify, "jaxified_graph", lambda *a: converted.append(a) or real(*a))
    with model:
        pm.set_data({"y": np.array(second)})
    idata = run(model)
    assert converted == []  # the same shape: the functions converted for the first run
    np.testing.assert_array_equal(idata.observed_data["obs"], second)
    check_shift_posterior(idata, second)

    with model:
        pm.set_data({"y": np.array(longer)})
    check_shift_posterior(run(model, random_seed=4), longer)
    assert converted


def test_a_step_built_on_another_model_is_refused(monkeypatch):
    """As pm.sample refuses it: a step on another model's variables (the same names, other
    data) ran that model's graphs (z never moved: P(z = 1) = 0 where the model sampled gives
    0.86); refused, step and variable named, before anything is built."""
    import pymc_lbp.whole_model.sampling as sampling

    other, model = shift_model([2.5, -0.3, 1.9]), shift_model([-1.0, 0.4, 1.2])
    with other:
        step = pymc_lbp.LocallyBalanced([other["z"]])
    monkeypatch.setattr(sampling, "block_draw", None)  # nothing is built
    message = r"step LocallyBalanced samples 'z', which is not a value variable of the model"
    with pytest.raises(ValueError, match=message):
        run(model, step=[step])
    with pytest.raises(ValueError, match=message):
        sampling.assign_steps(model, step)


def test_idata_kwargs_as_pm_sample_takes_them(monkeypatch):
    """``log_likelihood`` and ``log_prior`` give pm.sample's groups (PyMC's pointwise values at
    the draws, here checked against scipy's), ``include_transformed`` the transformed values;
    before, arviz.from_dict failed on them after the draws. Keys pm.sample does not take and
    names that are not the model's variables are refused before anything is sampled."""
    import pymc_lbp.whole_model.sampling as sampling

    y = np.array([-1.0, 0.4, 1.2])
    model = shift_model(y)
    with model:
        pm.HalfNormal("s", 1.0)  # a transformed variable (s_log__)
    idata = run(
        model,
        draws=20,
        tune=10,
        idata_kwargs={"log_likelihood": True, "log_prior": ["mu"], "include_transformed": True},
    )
    post = idata.posterior
    log_lik = idata.log_likelihood["obs"]
    assert log_lik.dims == ("chain", "draw", "obs_dim_0") and log_lik.shape == (2, 20, 3)
    mu, z = post["mu"].values[..., None], post["z"].values
    np.testing.assert_allclose(log_lik.values, stats.norm.logpdf(y, mu + 2 * z, 1.0), rtol=1e-10)
    assert list(idata.log_prior.data_vars) == ["mu"]
    np.testing.assert_allclose(idata.log_prior["mu"], stats.norm.logpdf(post["mu"]), rtol=1e-10)
    np.testing.assert_allclose(post["s_log__"], np.log(post["s"]), rtol=1e-12)

    monkeypatch.setattr(sampling, "block_draw", None)  # nothing is built
    with pytest.raises(TypeError, match=r"idata_kwargs \['posterior'\] are not taken"):
        run(model, idata_kwargs={"posterior": {}})
    with pytest.raises(ValueError, match=r"'log_likelihood'\] names \['mu'\]"):
        run(model, idata_kwargs={"log_likelihood": ["mu"]})


def truncated_model(base) -> pm.Model:
    """``lam ~ Gamma(3, 1/2)``, ``N ~ base(lam)`` truncated to 2..12, ``3 ~ Binomial(N, 0.4)``."""
    with pm.Model() as model:
        lam = pm.Gamma("lam", 3.0, 0.5)
        n = pm.Truncated("N", base(lam), lower=2, upper=12)
        pm.Binomial("y", n, 0.4, observed=3)
    return model


def truncated_posterior_mean() -> float:
    """Exact ``E[N | y = 3]`` of :func:`truncated_model` (Poisson): each N in 2..12 weighed by
    the integral over ``lam`` of prior x truncated Poisson x Binomial."""
    from scipy import integrate

    n = np.arange(2, 13)

    def weight(k):
        def f(lam):
            poisson = stats.poisson(lam)
            truncated = poisson.pmf(k) / (poisson.cdf(12) - poisson.cdf(1))
            return stats.gamma(3.0, scale=2.0).pdf(lam) * truncated * stats.binom(k, 0.4).pmf(3)

        return integrate.quad(f, 0.0, 200.0, limit=200)[0]

    w = np.array([weight(k) for k in n])
    return float(w @ n / w.sum())


@pytest.mark.parametrize("sampler", ["pymc_lbp.sample", "pm.sample"])
def test_a_truncated_integer_variable_samples_its_posterior(sampler):
    """pm.Truncated(Poisson) is an integer variable with the truncation's bounds (before, PyMC's
    "extended_signature must be provided" from building the step); its posterior mean within
    Z_BOUND MCSE of the exact one."""
    model = truncated_model(lambda lam: pm.Poisson.dist(lam))
    if sampler == "pm.sample":
        with model:
            step = pymc_lbp.LocallyBalanced([model["N"]])
            idata = pm.sample(
                1000,
                tune=300,
                chains=2,
                step=[step],
                random_seed=3,
                progressbar=False,
                compute_convergence_checks=False,
            )
    else:
        idata = run(model)
    draws = idata.posterior["N"].values
    assert draws.min() >= 2 and draws.max() <= 12
    exact = truncated_posterior_mean()
    z = (draws.mean() - exact) / checked_mcse(draws, "N")
    assert abs(z) < Z_BOUND, (draws.mean(), exact, z)


def test_a_truncated_distribution_not_ours_is_named():
    model = truncated_model(lambda lam: pm.Bernoulli.dist(0.3))
    with pytest.raises(ValueError, match=r"'N' has distribution pm.Truncated\(BernoulliRV\)"):
        with model:
            pymc_lbp.LocallyBalanced([model["N"]])
