"""Spike-and-slab variable selection: Bernoulli inclusion indicators setting the prior scale.

George & McCulloch's (1993) stochastic search variable selection as users write it: each of 8
coefficients has a Bernoulli(0.5) inclusion indicator that switches its prior sd between a slab
(2.0) and a spike (0.05), ``pm.math.switch(gamma, 2.0, 0.05)``. The coefficients go to NUTS, the
indicators to ``LocallyBalanced`` with its defaults: the indicators share no term of the logp,
so each draw gives every one a draw from its full conditional (exact; first-order differences
would be poor here: the indicator is not multilinear in the logp, issue #13).

Data: n = 60, X standard normal, beta = (1.5, 0, 0, -1, 0, 0.5, 0, 0), noise sd 1 (known), a
fixed seed.

Reference (exact): with a known noise sd, y | gamma ~ N(0, X D_gamma X' + I); the 2^8 = 256
indicator vectors are enumerated, and E[beta | gamma, y] = D X' (X D X' + I)^-1 y is averaged
over them.

Run: ``python examples/gallery/spike_and_slab.py``.
"""

from __future__ import annotations

import functools
import itertools
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
from scipy.special import logsumexp  # noqa: E402
from scipy.stats import multivariate_normal  # noqa: E402

from examples.gallery._gallery import Reference, main, plot_summary  # noqa: E402
from pymc_lbp import LocallyBalanced  # noqa: E402

NAME = "spike_and_slab"
TITLE = "Spike-and-slab variable selection (SSVS)"
N_OBS, P = 60, 8
SLAB, SPIKE = 2.0, 0.05
BETA_TRUE = np.array([1.5, 0.0, 0.0, -1.0, 0.0, 0.5, 0.0, 0.0])
CONTINUOUS = ["beta"]
DISCRETE_SUMMARY = "n_included"
SUMMARY_VARS = ["gamma", "beta"]


def simulate(seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Design matrix and response."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_OBS, P))
    return X, X @ BETA_TRUE + rng.normal(size=N_OBS)


X, Y = simulate()


def build_model() -> pm.Model:
    """SSVS with the indicator in the coefficient's prior sd."""
    with pm.Model() as model:
        gamma = pm.Bernoulli("gamma", 0.5, shape=P)
        beta = pm.Normal("beta", 0.0, pm.math.switch(gamma, SLAB, SPIKE), shape=P)
        pm.Normal("y", pm.math.dot(X, beta), 1.0, observed=Y)
    return model


def make_step(model: pm.Model):
    """LocallyBalanced with defaults on the indicators: they share no term of the logp, so each
    draw gives every indicator a draw from its full conditional, all at once."""
    return LocallyBalanced([model["gamma"]])


def quantities(posterior) -> dict:
    """Three coefficients (large, null, small), one null indicator and the model size."""
    return {
        "beta[0]": posterior["beta"].isel(beta_dim_0=0, drop=True),
        "beta[1]": posterior["beta"].isel(beta_dim_0=1, drop=True),
        "beta[5]": posterior["beta"].isel(beta_dim_0=5, drop=True),
        "gamma[5]": posterior["gamma"].isel(gamma_dim_0=5, drop=True).astype(float),
        "n_included": posterior["gamma"].sum("gamma_dim_0").astype(float),
    }


@functools.cache
def exact_posterior() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every indicator vector, its posterior probability and E[beta | gamma, y]."""
    gammas = np.array(list(itertools.product([0, 1], repeat=P)))
    logw, means = [], []
    for g in gammas:
        d = np.where(g == 1, SLAB, SPIKE) ** 2
        cov = (X * d) @ X.T + np.eye(N_OBS)
        logw.append(multivariate_normal.logpdf(Y, np.zeros(N_OBS), cov))
        means.append(d * (X.T @ np.linalg.solve(cov, Y)))
    logw = np.array(logw)
    return gammas, np.exp(logw - logsumexp(logw)), np.array(means)


def reference() -> Reference:
    """Exact posterior means by enumeration of the 256 indicator vectors."""
    gammas, w, means = exact_posterior()
    beta = w @ means
    incl = w @ gammas
    mean = {
        "beta[0]": float(beta[0]),
        "beta[1]": float(beta[1]),
        "beta[5]": float(beta[5]),
        "gamma[5]": float(incl[5]),
        "n_included": float(w @ gammas.sum(1)),
    }
    return Reference(mean, dict.fromkeys(mean, 0.0), "exact: 2^8 indicator vectors enumerated")


def plot(model, idata_ours, idata_pymc, reference, path) -> None:
    """Posterior inclusion probabilities: exact and by both samplers."""
    gammas, w, _ = exact_posterior()

    def panel(ax, idata):
        ax.bar(np.arange(P), w @ gammas, color="0.8", label="exact")
        for idata_, label, marker in ((idata_ours, "pymc_lbp", "o"), (idata_pymc, "PyMC", "x")):
            pi = idata_.posterior["gamma"].mean(("chain", "draw")).values
            ax.plot(np.arange(P), pi, marker, label=label)
        ax.set(xlabel="coefficient", ylabel="P(included | y)", title="Inclusion probabilities")
        ax.legend(fontsize=8)

    plot_summary(sys.modules[__name__], idata_ours, idata_pymc, reference, path, panel)


if __name__ == "__main__":
    main(sys.modules[__name__], plot)
