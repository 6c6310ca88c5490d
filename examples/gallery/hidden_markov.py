"""A two-state hidden Markov model with Categorical states and batched transition indexing.

As users write an HMM without a forward algorithm: one ``Categorical`` state per time step, the
Markov chain added as ``pm.Potential`` of ``log(P[z[:-1], z[1:]])`` (batched indexing of the
transition matrix), Gaussian emissions ``Normal(mu[z], sigma)`` around known levels 0 and 2.
The transition matrix (Dirichlet rows) and the emission sd go to NUTS, the 80 states to
``NeuralBlock([z])``, which finds the chain in the model graph and proposes blocks of 4 states
with the shipped ``chain-k2-b4`` proposal (docs/neural_block.md). The states'
Categorical(1/2, 1/2) prior is a constant: the first state is uniform and the rest follow the
chain.

Data: 80 steps simulated with a fixed seed, P = [[0.9, 0.1], [0.15, 0.85]], sigma = 1.

Reference (exact up to quadrature): for each (P[0,0], P[1,1], sigma) on a 50 x 50 x 40 midpoint
grid the forward algorithm sums the states out, the backward pass gives each state's smoothed
marginal, and the grid integrates the posterior.

Run: ``python examples/gallery/hidden_markov.py``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor.tensor as pt  # noqa: E402
from scipy.special import logsumexp  # noqa: E402
from scipy.stats import halfnorm, norm  # noqa: E402

from examples.gallery._gallery import Reference, main, plot_summary  # noqa: E402
from pymc_lbp import NeuralBlock  # noqa: E402

NAME = "hidden_markov"
TITLE = "Hidden Markov model, P[z[:-1], z[1:]]"
T = 80
MU = np.array([0.0, 2.0])
P_TRUE = np.array([[0.9, 0.1], [0.15, 0.85]])
CONTINUOUS = ["P", "sigma"]
DISCRETE_SUMMARY = "z_mean"
SUMMARY_VARS = ["P", "sigma"]


def simulate(seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Hidden states and observations."""
    rng = np.random.default_rng(seed)
    z = np.zeros(T, dtype=int)
    z[0] = rng.integers(2)
    for t in range(1, T):
        z[t] = rng.choice(2, p=P_TRUE[z[t - 1]])
    return z, rng.normal(MU[z], 1.0)


Z_TRUE, Y = simulate()


def build_model() -> pm.Model:
    """The HMM with explicit states."""
    with pm.Model() as model:
        P = pm.Dirichlet("P", a=np.ones((2, 2)))
        sigma = pm.HalfNormal("sigma", 1.0)
        z = pm.Categorical("z", p=np.full(2, 0.5), shape=T)
        pm.Potential("transitions", pm.math.log(P[z[:-1], z[1:]]).sum())
        pm.Normal("y", mu=pt.as_tensor(MU)[z], sigma=sigma, observed=Y)
    return model


def make_step(model: pm.Model):
    """NeuralBlock with its defaults on the states: chain blocks and the shipped proposal."""
    return NeuralBlock([model["z"]])


def quantities(posterior) -> dict:
    """Both stay probabilities, the emission sd and the fraction of time in state 1."""
    return {
        "P[0,0]": posterior["P"].isel(P_dim_0=0, P_dim_1=0, drop=True),
        "P[1,1]": posterior["P"].isel(P_dim_0=1, P_dim_1=1, drop=True),
        "sigma": posterior["sigma"],
        "z_mean": posterior["z"].mean("z_dim_0").astype(float),
    }


@functools.cache
def exact_posterior(n_p: int = 50, n_s: int = 40):
    """Grid posterior weights, the grid, and E[z_t = 1 | theta, y] on it."""
    u = (np.arange(n_p) + 0.5) / n_p
    ls = np.linspace(np.log(0.4), np.log(2.5), n_s)
    p00, p11, s = np.meshgrid(u, u, np.exp(ls), indexing="ij")
    p00, p11, s = p00.ravel(), p11.ravel(), s.ravel()
    logP = np.log(np.stack([np.stack([p00, 1 - p00], -1), np.stack([1 - p11, p11], -1)], 1))
    le = norm.logpdf(Y[:, None, None], MU[None, None, :], s[None, :, None])  # T x grid x 2
    la = np.empty((T, s.size, 2))
    la[0] = np.log(0.5) + le[0]
    for t in range(1, T):
        la[t] = logsumexp(la[t - 1][:, :, None] + logP, axis=1) + le[t]
    loglik = logsumexp(la[-1], axis=1)
    lb = np.zeros((s.size, 2))
    zsum = np.exp(la[-1][:, 1] + lb[:, 1] - loglik)
    for t in range(T - 2, -1, -1):
        lb = logsumexp(logP + (le[t + 1] + lb)[:, None, :], axis=2)
        zsum += np.exp(la[t][:, 1] + lb[:, 1] - loglik)
    # Dirichlet(1, 1) rows are uniform in P[i,i]; HalfNormal(1) on sigma, log-grid Jacobian s
    logpost = loglik + halfnorm.logpdf(s) + np.log(s)
    w = np.exp(logpost - logsumexp(logpost))
    return w, p00, p11, s, zsum / T


def reference() -> Reference:
    """Exact posterior means by the forward-backward algorithm on a grid."""
    w, p00, p11, s, zbar = exact_posterior()
    mean = {"P[0,0]": w @ p00, "P[1,1]": w @ p11, "sigma": w @ s, "z_mean": w @ zbar}
    mean = {k: float(v) for k, v in mean.items()}
    return Reference(mean, dict.fromkeys(mean, 0.0), "exact: forward-backward, 50^2 x 40 grid")


def plot(model, idata_ours, idata_pymc, reference, path) -> None:
    """Observations, true states and the posterior probability of state 1."""

    def panel(ax, idata):
        pz = idata.posterior["z"].mean(("chain", "draw")).values
        ax.plot(Y, ".", color="0.5", label="y")
        ax.step(np.arange(T), 2 * Z_TRUE, where="mid", color="k", lw=1, label="2 x true state")
        ax.plot(2 * pz, color="C0", label="2 x P(z = 1 | y), pymc_lbp")
        ax.set(xlabel="t", title="Observations and posterior states")
        ax.legend(fontsize=8)

    plot_summary(sys.modules[__name__], idata_ours, idata_pymc, reference, path, panel)


if __name__ == "__main__":
    main(sys.modules[__name__], plot)
