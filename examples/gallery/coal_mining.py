"""Coal-mining disasters: a switch point as a DiscreteUniform, sampled next to NUTS.

The classic change-point model of PyMC's getting-started guide: yearly counts of British
coal-mining disasters are Poisson with one rate before an unknown year and another after it.
The switch point is a ``DiscreteUniform`` used inside ``pm.math.switch``; the rates go to NUTS.

Data: the 111 yearly counts 1851-1961 of Jarrett, R. G. (1979), "A note on the intervals between
coal-mining disasters", Biometrika 66(1), 191-193, as distributed with PyMC 2
(``pymc/examples/DisasterModel.py``; PyMC 3's getting-started notebook masks two of them, the
years 1890 and 1935, which are kept here).

Reference (exact): with Exponential(1) priors the rates are conjugate (Gamma-Poisson), so the
rates integrate out in closed form and the switch point's posterior is enumerated over its
111 values; the rates' posterior means follow from it.

Run: ``python examples/gallery/coal_mining.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
from scipy.special import gammaln, logsumexp  # noqa: E402

from examples.gallery._gallery import Reference, main  # noqa: E402
from pymc_lbp import LocallyBalanced  # noqa: E402

NAME = "coal_mining"
TITLE = "Coal-mining switch point"

# fmt: off
DISASTERS = np.array([
    4, 5, 4, 0, 1, 4, 3, 4, 0, 6, 3, 3, 4, 0, 2, 6, 3, 3, 5, 4, 5, 3, 1, 4, 4, 1, 5, 5, 3, 4,
    2, 5, 2, 2, 3, 4, 2, 1, 3, 2, 2, 1, 1, 1, 1, 3, 0, 0, 1, 0, 1, 1, 0, 0, 3, 1, 0, 3, 2, 2,
    0, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 2, 1, 0, 0, 0, 1, 1, 0, 2, 3, 3, 1, 1, 2, 1, 1, 1, 1, 2,
    4, 2, 0, 0, 1, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1,
])
# fmt: on
YEARS = np.arange(1851, 1962)

CONTINUOUS = ["early_rate", "late_rate"]
DISCRETE_SUMMARY = "switchpoint"
SUMMARY_VARS = ["switchpoint", "early_rate", "late_rate"]


def build_model() -> pm.Model:
    """The switch-point model as in PyMC's getting-started guide."""
    with pm.Model() as model:
        switchpoint = pm.DiscreteUniform("switchpoint", lower=YEARS.min(), upper=YEARS.max())
        early_rate = pm.Exponential("early_rate", 1.0)
        late_rate = pm.Exponential("late_rate", 1.0)
        rate = pm.math.switch(switchpoint >= YEARS, early_rate, late_rate)
        pm.Poisson("disasters", rate, observed=DISASTERS)
    return model


def make_step(model: pm.Model):
    """LocallyBalanced with its defaults on the switch point (one site, so one step per draw)."""
    return LocallyBalanced([model["switchpoint"]])


def quantities(posterior) -> dict:
    """The key scalar quantities, each a (chain, draw) DataArray."""
    return {
        "switchpoint": posterior["switchpoint"].astype(float),
        "early_rate": posterior["early_rate"],
        "late_rate": posterior["late_rate"],
    }


def switchpoint_posterior() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact p(tau | y) over every year, and the Gamma posteriors' (shape, rate) given tau.

    Given tau, early ~ Gamma(1 + sum_{t <= tau} y_t, 1 + #{t <= tau}) and similarly late; the
    marginal likelihood of each segment is Gamma(a) / b^a / prod y_t!, the factorials common to
    every tau.
    """
    taus = YEARS
    early = YEARS[None, :] <= taus[:, None]
    a_early = 1.0 + (early * DISASTERS).sum(1)
    b_early = 1.0 + early.sum(1)
    a_late = 1.0 + (~early * DISASTERS).sum(1)
    b_late = 1.0 + (~early).sum(1)
    log_w = gammaln(a_early) - a_early * np.log(b_early) + gammaln(a_late) - a_late * np.log(b_late)
    p = np.exp(log_w - logsumexp(log_w))
    return p, np.stack([a_early, b_early]), np.stack([a_late, b_late]), taus


def reference() -> Reference:
    """Exact posterior means of the switch point and both rates."""
    p, (a_e, b_e), (a_l, b_l), taus = switchpoint_posterior()
    mean = {
        "switchpoint": float(p @ taus),
        "early_rate": float(p @ (a_e / b_e)),
        "late_rate": float(p @ (a_l / b_l)),
    }
    return Reference(mean, dict.fromkeys(mean, 0.0), "exact: rates integrated out, tau enumerated")


def plot(model, idata_ours, idata_pymc, reference, path) -> None:
    """Data with the posterior switch point; exact vs sampled posterior of the switch point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p, *_ = switchpoint_posterior()
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
    ax0.plot(YEARS, DISASTERS, "o", ms=4, color="k", label="disasters")
    ax0.axvline(reference.mean["switchpoint"], color="C3", label="posterior mean switch point")
    ax0.set(xlabel="year", ylabel="count", title="Coal-mining disasters")
    ax0.legend()
    sel = p > 1e-4
    ax1.bar(YEARS[sel], p[sel], color="0.8", label="exact")
    for idata, label, marker in ((idata_ours, "LocallyBalanced", "o"), (idata_pymc, "PyMC", "x")):
        s = idata.posterior["switchpoint"].values.ravel()
        freq = np.array([(s == t).mean() for t in YEARS[sel]])
        ax1.plot(YEARS[sel], freq, marker, label=label)
    ax1.set(xlabel="switch point", ylabel="posterior probability", title="p(switch point | y)")
    ax1.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main(sys.modules[__name__], plot)
