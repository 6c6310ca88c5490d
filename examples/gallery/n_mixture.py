"""An N-mixture abundance model: Poisson site abundances seen through Binomial counts.

Royle (2004): site ``i`` holds ``N_i ~ Poisson(lam)`` animals; each of 3 visits counts
``y_ij ~ Binomial(N_i, p)``. The abundances are integer latents (``LocallyBalanced``, +-1 moves);
``lam`` and ``p`` go to NUTS. The abundances start at the largest count of their site (the
Poisson mode would be below it at some sites, where the likelihood is zero).

Data: 20 sites simulated with a fixed seed, lam = 6, p = 0.5.

Reference (exact up to quadrature and truncation): each N_i summed out up to 150 (the Poisson
tail beyond it is below 1e-60 on the grid), the posterior of (log lam, logit p) integrated on a
300 x 300 grid over the box where it lives; E[sum N_i | y] from the same sums.

Run: ``python examples/gallery/n_mixture.py``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
from scipy.special import gammaln, logsumexp  # noqa: E402
from scipy.stats import binom  # noqa: E402

from examples.gallery._gallery import Reference, main, plot_summary  # noqa: E402
from pymc_lbp import LocallyBalanced  # noqa: E402

NAME = "n_mixture"
TITLE = "N-mixture abundance (Poisson N, Binomial counts)"
SITES, VISITS = 20, 3
CONTINUOUS = ["lam", "p"]
DISCRETE_SUMMARY = "N_total"
SUMMARY_VARS = ["lam", "p"]
LAM_RATE = 0.1  # Exponential prior on lam (mean 10)
CAP = 150


def simulate(seed: int = 5) -> np.ndarray:
    """Counts (sites x visits) with lam = 6, p = 0.5."""
    rng = np.random.default_rng(seed)
    n = rng.poisson(6.0, SITES)
    return rng.binomial(n[:, None], 0.5, (SITES, VISITS))


Y = simulate()


def build_model() -> pm.Model:
    """The N-mixture model with explicit abundances."""
    with pm.Model() as model:
        lam = pm.Exponential("lam", LAM_RATE)
        p = pm.Beta("p", 1.0, 1.0)
        N = pm.Poisson("N", lam, shape=SITES, initval=Y.max(axis=1))
        pm.Binomial("y", n=N[:, None], p=p, observed=Y)
    return model


def make_step(model: pm.Model):
    """LocallyBalanced (exact differences, +-1 moves) on the abundances."""
    return LocallyBalanced([model["N"]])


def quantities(posterior) -> dict:
    """Abundance rate, detection probability and total abundance over the sites."""
    return {
        "lam": posterior["lam"],
        "p": posterior["p"],
        "N_total": posterior["N"].sum("N_dim_0").astype(float),
    }


@functools.cache
def reference(grid: int = 300) -> Reference:
    """Quadrature over (log lam, logit p) with each N_i summed out up to CAP."""
    a = np.linspace(np.log(1.0), np.log(60.0), grid)  # log lam
    b = np.linspace(-4.0, 4.0, grid)  # logit p
    lam, p = np.exp(a), 1.0 / (1.0 + np.exp(-b))
    n = np.arange(CAP + 1)
    # log prod_j Binom(y_ij | n, p): sites x n x p
    lb = binom.logpmf(Y[:, None, None, :], n[None, :, None, None], p[None, None, :, None]).sum(-1)
    lpois = n[:, None] * a[None, :] - lam[None, :] - gammaln(n + 1)[:, None]  # n x lam
    logpost = np.zeros((grid, grid))  # lam x p
    en_total = np.zeros((grid, grid))
    for i in range(SITES):
        t = lpois[None, :, :] + lb[i].T[:, :, None]  # p x n x lam
        site = logsumexp(t, axis=1)  # p x lam
        en = np.exp(logsumexp(t, axis=1, b=n[None, :, None]) - site)
        logpost += site.T
        en_total += en.T
    # priors (Exponential on lam, Beta(1, 1) on p) and the Jacobians of log and logit
    logpost += np.log(LAM_RATE) - LAM_RATE * lam[:, None] + a[:, None]
    logpost += np.log(p * (1 - p))[None, :]
    w = np.exp(logpost - logsumexp(logpost))
    mean = {
        "lam": float((w * lam[:, None]).sum()),
        "p": float((w * p[None, :]).sum()),
        "N_total": float((w * en_total).sum()),
    }
    edge = w[[0, -1], :].sum() + w[:, [0, -1]].sum()
    assert edge < 1e-6, f"reference grid too small: {edge:.2e} of the mass on its edges"
    return Reference(
        mean, dict.fromkeys(mean, 0.0), f"exact: N summed out to {CAP}, {grid}^2 quadrature"
    )


def plot(model, idata_ours, idata_pymc, reference, path) -> None:
    """Counts per site and the posterior mean abundance of each site."""

    def panel(ax, idata):
        en = idata.posterior["N"].mean(("chain", "draw")).values
        ax.plot(np.arange(SITES), Y.max(1), "s", color="0.6", label="largest count")
        ax.plot(np.arange(SITES), en, "o", label="E[N_i | y], pymc_lbp")
        ax.set(xlabel="site", ylabel="animals", title="Counts and posterior abundance")
        ax.legend(fontsize=8)

    plot_summary(sys.modules[__name__], idata_ours, idata_pymc, reference, path, panel)


if __name__ == "__main__":
    main(sys.modules[__name__], plot)
