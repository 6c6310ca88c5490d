"""A site-occupancy model: latent Bernoulli occupancy and repeated detection histories.

MacKenzie et al. (2002): each of 40 sites is occupied with probability ``psi``; an occupied site
is detected on each of 4 visits with probability ``p``, an empty one never. Users write the
occupancy states ``z`` as Bernoulli and the detections as ``Bernoulli(z[:, None] * p)``; a site
with a detection is certainly occupied (``z = 0`` has probability zero there).

Data: simulated with a fixed seed, psi = 0.6, p = 0.35.

Reference (exact up to quadrature error): with uniform priors, summing out each z_i leaves a
two-parameter posterior, integrated on a 600 x 600 midpoint grid over (psi, p); the number of
occupied sites is the detected ones plus, for each undetected site, psi (1-p)^4 /
(psi (1-p)^4 + 1 - psi) averaged over that posterior.

Run: ``python examples/gallery/occupancy.py``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
from scipy.special import logsumexp  # noqa: E402

from examples.gallery._gallery import Reference, main, plot_summary  # noqa: E402
from pymc_lbp import LocallyBalanced  # noqa: E402

NAME = "occupancy"
TITLE = "Site occupancy (latent Bernoulli occupancy, detection histories)"
SITES, VISITS = 40, 4
CONTINUOUS = ["psi", "p"]
DISCRETE_SUMMARY = "n_occupied"
SUMMARY_VARS = ["psi", "p"]


def simulate(seed: int = 11) -> np.ndarray:
    """Detection histories (sites x visits) with psi = 0.6, p = 0.35."""
    rng = np.random.default_rng(seed)
    z = rng.random(SITES) < 0.6
    return (z[:, None] & (rng.random((SITES, VISITS)) < 0.35)).astype(int)


Y = simulate()


def build_model() -> pm.Model:
    """Occupancy with explicit latent states."""
    with pm.Model() as model:
        psi = pm.Beta("psi", 1.0, 1.0)
        p = pm.Beta("p", 1.0, 1.0)
        z = pm.Bernoulli("z", psi, shape=SITES, initval=np.ones(SITES, dtype=int))
        pm.Bernoulli("y", p=z[:, None] * p, observed=Y)
    return model


def make_step(model: pm.Model):
    """LocallyBalanced with defaults on the occupancy states.

    Given psi and p the sites share no term of the logp, so each draw gives every occupancy state
    a draw from its full conditional, all at once (``step.independent_sites``). With single-site
    steps (``steps_per_draw`` given) first-order differences would be poor here: the relaxation
    of ``Bernoulli(z[:, None] * p)`` gives a finite difference for emptying a site with
    detections (true difference -inf); ``differences="auto"`` measures that and takes exact
    differences (``step.differences_reason`` says why; docs/gallery.md).
    """
    return LocallyBalanced([model["z"]])


def quantities(posterior) -> dict:
    """Occupancy and detection probabilities and the number of occupied sites."""
    return {
        "psi": posterior["psi"],
        "p": posterior["p"],
        "n_occupied": posterior["z"].sum("z_dim_0").astype(float),
    }


@functools.cache
def reference(grid: int = 600) -> Reference:
    """Quadrature over (psi, p) with every z_i summed out."""
    u = (np.arange(grid) + 0.5) / grid
    psi, p = u[:, None], u[None, :]
    det = Y.sum(1)
    seen = det > 0
    logp = (
        seen.sum() * np.log(psi)
        + det.sum() * np.log(p)
        + (VISITS * seen.sum() - det.sum()) * np.log1p(-p)
    )
    miss = psi * (1 - p) ** VISITS
    logp = logp + (~seen).sum() * np.log(miss + 1 - psi)
    post = np.exp(logp - logsumexp(logp))
    occ = seen.sum() + (~seen).sum() * miss / (miss + 1 - psi)
    mean = {
        "psi": float((post * psi).sum()),
        "p": float((post * p).sum()),
        "n_occupied": float((post * occ).sum()),
    }
    return Reference(mean, dict.fromkeys(mean, 0.0), f"exact: z summed out, {grid}^2 quadrature")


def plot(model, idata_ours, idata_pymc, reference, path) -> None:
    """Detections per site and the posterior occupancy probability of each site."""

    def panel(ax, idata):
        pz = idata.posterior["z"].mean(("chain", "draw")).values
        order = np.argsort(Y.sum(1))
        ax.bar(np.arange(SITES), Y.sum(1)[order], color="0.8", label="detections (of 4)")
        ax.plot(np.arange(SITES), 4 * pz[order], "o", ms=4, label="4 x P(occupied), pymc_lbp")
        ax.set(xlabel="site (sorted)", title="Detections and posterior occupancy")
        ax.legend(fontsize=8)

    plot_summary(sys.modules[__name__], idata_ours, idata_pymc, reference, path, panel)


if __name__ == "__main__":
    main(sys.modules[__name__], plot)
