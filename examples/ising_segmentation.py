"""Demo: segmenting a noisy image with PathAuxiliaryLBP, next to PyMC's own binary Gibbs sampler.

A 30x30 black-and-white image (a white square on black) is observed through heavy noise
(alpha = +-mu + U(-sigma, sigma)); the posterior over its pixels is an Ising model with coupling
lambda = 1 (Sansone 2022, case 3). We sample that posterior with pymc_lbp's PathAuxiliaryLBP and
with PyMC's BinaryGibbsMetropolis, print ArviZ summaries (a few pixels, and the sampler's own
statistics) and the effective sample size per second of each sampler, and write two figures:

- ``output/ising_segmentation.png``: the true image, the noisy observation and each sampler's
  posterior probability that a pixel is white (1), with colour bars;
- ``output/ising_sampler_stats.png``: ArviZ trace plots of PathAuxiliaryLBP's acceptance
  probability, path length (sites flipped per proposal) and jump distance (sites changed per
  draw).

Run: ``make demo`` (or ``python examples/ising_segmentation.py --help``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import arviz as az
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pymc as pm  # noqa: E402
import xarray as xr  # noqa: E402

from pymc_lbp import PathAuxiliaryLBP  # noqa: E402
from pymc_lbp.diagnostics import ess, hamming_trace, sampling_seconds  # noqa: E402
from pymc_lbp.models import LSB_CASES, segmentation_field, segmentation_model  # noqa: E402

SAMPLERS = {
    "path_auxiliary_lbp": "PathAuxiliaryLBP (pymc_lbp)",
    "binary_gibbs_metropolis": "BinaryGibbsMetropolis (PyMC)",
}
STATS = ["accept", "mean_path_length", "sites_changed"]


def run(sampler: str, model, args):
    with model:
        if sampler == "path_auxiliary_lbp":
            step = PathAuxiliaryLBP([model["x"]], steps_per_draw=args.steps_per_draw)
        else:
            step = pm.BinaryGibbsMetropolis([model["x"]])
        # PyMC's Gibbs sweeps every pixel per draw (~3x slower per draw): fewer draws, so the
        # demo stays near a minute; ESS per second compares the two fairly anyway
        draws, tune = (args.draws, args.tune) if sampler == "path_auxiliary_lbp" else args.gibbs
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=args.chains,
            cores=args.cores,
            step=[step],
            random_seed=args.seed,
            progressbar=True,
            compute_convergence_checks=False,
        )
    return idata, sampling_seconds(idata)  # sampling only, as PyMC records it (no compilation)


def uncertain_pixels(idata, k: int = 4):
    """The ``k`` pixels whose posterior mean is closest to 1/2 (the square's boundary)."""
    x = idata.posterior["x"]
    mean = x.mean(("chain", "draw")).values
    flat = np.argsort(np.abs(mean - 0.5), axis=None)[:k]
    rows, cols = np.unravel_index(flat, mean.shape)
    pixels = x.isel(
        x_dim_0=xr.DataArray(rows, dims="pixel"), x_dim_1=xr.DataArray(cols, dims="pixel")
    ).assign_coords(pixel=[f"{r},{c}" for r, c in zip(rows, cols, strict=True)])
    return pixels.to_dataset(name="x")


def segmentation_figure(model, truth, results, case: int):
    lam, mu, sigma = LSB_CASES[case]
    fig, axes = plt.subplots(1, 4, figsize=(15, 4.2), layout="constrained")
    axes[0].imshow(truth, cmap="gray", vmin=0, vmax=1)
    axes[0].set_title("true image\n(white = 1, black = 0)")
    im = axes[1].imshow(model.alpha, cmap="gray")
    axes[1].set_title(f"noisy observation\nalpha = +-{mu:g} + U(-{sigma:g}, {sigma:g})")
    fig.colorbar(im, ax=axes[1], shrink=0.8, label="alpha")
    for ax, name in zip(axes[2:], SAMPLERS, strict=True):
        idata, seconds, _ = results[name]
        p = idata.posterior["x"].mean(("chain", "draw"))
        im = ax.imshow(p, cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"posterior P(pixel = 1)\n{SAMPLERS[name]}, {seconds:.0f} s")
    fig.colorbar(im, ax=axes[2:].tolist(), shrink=0.8, label="posterior P(pixel = 1)")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(
        f"Ising image segmentation (Sansone 2022, case {case}: coupling lambda = {lam:g}): "
        "where is the white square?",
        fontsize=13,
    )
    return fig


def stats_figure(idata):
    axes = az.plot_trace(
        idata.sample_stats[STATS],
        compact=False,
        figsize=(12, 7),
        backend_kwargs={"layout": "constrained"},
    )
    labels = {
        "accept": "MH acceptance probability",
        "mean_path_length": "path length (sites flipped per proposal, mean of the draw)",
        "sites_changed": "jump distance (sites changed per draw)",
    }
    for row, name in zip(axes, STATS, strict=True):
        row[0].set_title(f"{labels[name]}: distribution per chain")
        row[1].set_title(f"{labels[name]}: trace per chain")
    fig = axes[0, 0].figure
    fig.suptitle(
        "PathAuxiliaryLBP sampler statistics after tuning (ArviZ plot_trace of sample_stats); "
        "each chain tuned its own path length, then froze it"
    )
    return fig


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", type=int, default=3, choices=sorted(LSB_CASES))
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--tune", type=int, default=100)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--steps-per-draw",
        type=int,
        default=50,
        help="PathAuxiliaryLBP MH steps per recorded draw (each flips a tuned number of sites)",
    )
    parser.add_argument(
        "--gibbs",
        type=int,
        nargs=2,
        default=(150, 50),
        metavar=("DRAWS", "TUNE"),
        help="draws and tune of PyMC's BinaryGibbsMetropolis",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("output"), help="folder for the figures (created)"
    )
    args = parser.parse_args(argv)

    model = segmentation_model(args.case)
    n = model.alpha.shape[0]
    truth = (segmentation_field(n, mu=1.0, sigma=0.0) > 0).astype(int)  # the noise-free image
    results = {}
    for name in SAMPLERS:
        print(f"\n== {SAMPLERS[name]}")
        idata, seconds = run(name, model, args)
        e = ess(hamming_trace(idata, ["x"], seed=0))
        results[name] = (idata, seconds, e)

    idata = results["path_auxiliary_lbp"][0]
    with pd.option_context("display.width", 120, "display.max_columns", 20):
        print("\nArviZ summary of the four most uncertain pixels [row,col] (PathAuxiliaryLBP):")
        print(az.summary(uncertain_pixels(idata)))
        print("\nArviZ summary of PathAuxiliaryLBP's sampler statistics:")
        print(az.summary(idata.sample_stats[STATS], kind="stats"))

    print("\nEffective sample size of the Hamming-distance statistic, per second of sampling:")
    for name, (post, seconds, e) in results.items():
        p = post.posterior["x"].mean(("chain", "draw")).values
        accuracy = float(np.mean((p > 0.5) == truth))
        print(
            f"  {SAMPLERS[name]:>30}: {seconds:5.1f} s, ESS {e:6.1f}, ESS/s {e / seconds:6.2f}, "
            f"pixels right (P > 1/2 vs truth) {accuracy:.1%}"
        )

    args.out.mkdir(parents=True, exist_ok=True)
    paths = {
        args.out / "ising_segmentation.png": segmentation_figure(model, truth, results, args.case),
        args.out / "ising_sampler_stats.png": stats_figure(idata),
    }
    for path, fig in paths.items():
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
