"""NeuralMixedBlock on a Gaussian mixture whose number of components is unknown.

The model, a sparse finite mixture as a PyMC user writes it: ``K = 8`` candidate components with
an active flag each (``Bernoulli(0.3)``), means ``Normal(0, 10)`` and unnormalised weights
``Gamma(2, 1)``; the data come from the active ones (an inactive component keeps a weight of
1e-12: with exact zeros the gradient of ``log w`` is NaN and NUTS diverges).
``NeuralMixedBlock([active, mu])`` proposes a component's flag and mean together (the shipped
``flag-value-g32`` proposal reads the pair's conditional on a grid from the model), so
components are born where data are unexplained and die where they are not needed; NUTS refines
the means and weights. The chain starts with one active component.

Prints the ArviZ summary of the means of active components and the posterior of the number of
active components, writes ``gmm_neural_mixed_block.png`` (the data with the posterior density of
active means, and the trace of the number of active components).

Run: ``python examples/gmm_neural_mixed_block.py [--quick]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import arviz as az  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
import pytensor.tensor as pt  # noqa: E402

import pymc_lbp  # noqa: E402

K = 8
CENTRES = np.array([-6.0, 0.0, 4.0])
SD = 0.6


def build_model(data: np.ndarray) -> pm.Model:
    with pm.Model(coords={"component": np.arange(K)}) as model:
        active = pm.Bernoulli(
            "active", 0.3, dims="component", initval=np.r_[1, np.zeros(K - 1, dtype=np.int64)]
        )
        mu = pm.Normal("mu", 0.0, 10.0, dims="component", initval=np.zeros(K))
        wt = pm.Gamma("wt", 2.0, 1.0, dims="component")
        w = active * wt + 1e-12  # inactive: zero weight for the data, finite gradients
        pm.Potential("some_active", pt.switch(pt.gt(active.sum(), 0), 0.0, -np.inf))
        pm.NormalMixture("x", w=w / w.sum(), mu=mu, sigma=SD, observed=data)
        pm.Deterministic("n_active", active.sum())
    return model


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("gmm_neural_mixed_block.png"))
    args = ap.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.WARNING)
    rng = np.random.default_rng(4)
    per = 30 if args.quick else 80
    data = np.concatenate([rng.normal(c, SD, per) for c in CENTRES])
    draws, tune = (150, 150) if args.quick else (1000, 500)
    model = build_model(data)
    with model:
        step = pymc_lbp.NeuralMixedBlock([model["active"], model["mu"]])
        idata = pm.sample(
            draws,
            tune=tune,
            chains=2,
            cores=1,
            step=[step, pm.NUTS([model["mu"], model["wt"]])],
            random_seed=5,
            progressbar=False,
        )
    post = idata.posterior
    counts = post["n_active"].values.ravel()
    freq = {int(k): float(np.mean(counts == k)) for k in np.unique(counts)}
    print("posterior of the number of active components:", freq)
    print(az.summary(idata, var_names=["n_active"], kind="stats"))
    # active means, pooled over components (labels switch, so no per-component summary)
    act = post["active"].values.astype(bool)
    means = post["mu"].values[act]
    print(f"active means: {np.percentile(means, [5, 50, 95]).round(2)} (5/50/95 %)")
    accept = float(idata.sample_stats["accept"].values.mean())
    print(f"NeuralMixedBlock mean acceptance {accept:.3f}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    axes[0].hist(data, bins=60, density=True, color="0.75", label="data")
    axes[0].hist(
        means,
        bins=300,
        density=True,
        histtype="step",
        color="C0",
        label="means of active components",
    )
    for c in CENTRES:
        axes[0].axvline(c, color="k", lw=0.6, ls=":")
    axes[0].set_xlim(data.min() - 1, data.max() + 1)
    axes[0].legend(fontsize=8)
    az.plot_trace(idata, var_names=["n_active"], axes=np.array([[axes[1], axes[1]]]), compact=True)
    axes[1].set_title("number of active components (both chains)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    print(f"wrote {args.out}")
    return {"counts": freq, "accept": accept, "median_mean_error": _median_error(means)}


def _median_error(means: np.ndarray) -> float:
    """Median distance of active means to the nearest true centre."""
    return float(np.median(np.min(np.abs(means[:, None] - CENTRES[None]), axis=1)))


if __name__ == "__main__":
    main()
