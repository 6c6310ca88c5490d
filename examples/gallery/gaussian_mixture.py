"""A two-component Gaussian mixture with explicit Categorical assignments.

The way a user first writes a mixture: one ``Categorical`` assignment per observation, the
component means indexed by it (``mu[z]``). Weights, means (ordered, against label switching) and
the common sd go to NUTS; the 100 assignments to ``GibbsWithGradients``. Given the weights,
means and sd the assignments share no term of the logp, so with its defaults the step gives every
assignment a draw from its full conditional, all at once, each draw (``step.independent_sites``).

Data: 100 points simulated with a fixed seed from 0.5 N(-2, 1) + 0.5 N(2, 1).

Reference: the same model with the assignments summed out (``pm.NormalMixture``), sampled by
NUTS for 4 x 2000 draws; the mean assignment is Rao-Blackwellised (the average over those draws
of P(z_i = 1 | w, mu, sigma, y_i)), so it has no assignment noise.

Run: ``python examples/gallery/gaussian_mixture.py``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import xarray as xr  # noqa: E402
from pymc.distributions.transforms import ordered  # noqa: E402
from scipy.special import expit  # noqa: E402
from scipy.stats import norm  # noqa: E402

from examples.gallery._gallery import Reference, main, plot_summary  # noqa: E402
from pymc_lbp import GibbsWithGradients  # noqa: E402

NAME = "gaussian_mixture"
TITLE = "Gaussian mixture with explicit assignments"
N = 100
CONTINUOUS = ["w", "mu", "sigma"]
DISCRETE_SUMMARY = "z_mean"
SUMMARY_VARS = ["w", "mu", "sigma"]


def simulate(seed: int = 20261122) -> np.ndarray:
    """The data: N draws of 0.5 N(-2, 1) + 0.5 N(2, 1)."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, N)
    return rng.normal(np.where(z == 1, 2.0, -2.0), 1.0)


Y = simulate()


def _priors():
    w = pm.Dirichlet("w", a=np.ones(2))
    mu = pm.Normal("mu", 0.0, 5.0, shape=2, transform=ordered, initval=np.array([-1.0, 1.0]))
    sigma = pm.HalfNormal("sigma", 2.0)
    return w, mu, sigma


def build_model() -> pm.Model:
    """The mixture with one Categorical assignment per point."""
    with pm.Model() as model:
        w, mu, sigma = _priors()
        z = pm.Categorical("z", p=w, shape=N)
        pm.Normal("y", mu=mu[z], sigma=sigma, observed=Y)
    return model


def make_step(model: pm.Model):
    """GibbsWithGradients on the assignments."""
    return GibbsWithGradients([model["z"]])


def quantities(posterior) -> dict:
    """Weight of component 0, both means, the sd and the fraction of points in component 1."""
    return {
        "w[0]": posterior["w"].isel(w_dim_0=0, drop=True),
        "mu[0]": posterior["mu"].isel(mu_dim_0=0, drop=True),
        "mu[1]": posterior["mu"].isel(mu_dim_0=1, drop=True),
        "sigma": posterior["sigma"],
        "z_mean": posterior["z"].mean("z_dim_0"),
    }


def marginal_model() -> pm.Model:
    """The same model with the assignments summed out."""
    with pm.Model() as model:
        w, mu, sigma = _priors()
        pm.NormalMixture("y", w=w, mu=mu, sigma=sigma, observed=Y)
    return model


def _p_component1(w0, mu, sigma, y):
    """P(z_i = 1 | parameters, y_i) for parameter draws (leading axis) and all points."""
    l0 = np.log(w0)[:, None] + norm.logpdf(y[None, :], mu[:, 0:1], sigma[:, None])
    l1 = np.log1p(-w0)[:, None] + norm.logpdf(y[None, :], mu[:, 1:2], sigma[:, None])
    return expit(l1 - l0)


@functools.cache
def reference() -> Reference:
    """NUTS on the marginalised model; the mean assignment Rao-Blackwellised."""
    with marginal_model():
        idata = pm.sample(
            2000,
            tune=1000,
            chains=4,
            cores=1,
            random_seed=7,
            progressbar=False,
            compute_convergence_checks=False,
        )
    post = idata.posterior
    w0 = post["w"].values[..., 0]
    mu = post["mu"].values
    sigma = post["sigma"].values
    zbar = np.stack([_p_component1(w0[c], mu[c], sigma[c], Y).mean(1) for c in range(w0.shape[0])])
    post = post.assign(z_mean=(("chain", "draw"), zbar))
    q = {
        "w[0]": post["w"].isel(w_dim_0=0, drop=True),
        "mu[0]": post["mu"].isel(mu_dim_0=0, drop=True),
        "mu[1]": post["mu"].isel(mu_dim_0=1, drop=True),
        "sigma": post["sigma"],
        "z_mean": post["z_mean"],
    }
    mean = {k: float(v.mean()) for k, v in q.items()}
    mcse = az.mcse(xr.Dataset(q), method="mean")
    se = {k: float(mcse[k]) for k in q}
    return Reference(mean, se, "NUTS on pm.NormalMixture (4 x 2000 draws), z Rao-Blackwellised")


def plot(model, idata_ours, idata_pymc, reference, path) -> None:
    """Histogram of the data coloured by the posterior probability of component 1."""

    def panel(ax, idata):
        p1 = idata.posterior["z"].mean(("chain", "draw")).values
        ax.scatter(Y, np.zeros_like(Y), c=p1, cmap="coolwarm", vmin=0, vmax=1, s=25, marker="|")
        ax.hist(Y, bins=30, color="0.85")
        ax.set(xlabel="y", ylabel="count", title="Data; ticks coloured by P(z = 1), pymc_lbp")

    plot_summary(sys.modules[__name__], idata_ours, idata_pymc, reference, path, panel)


if __name__ == "__main__":
    main(sys.modules[__name__], plot)
