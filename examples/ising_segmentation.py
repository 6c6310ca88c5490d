"""Demo: the LSB image-segmentation posterior (case 3) with pymc_lbp and with PyMC's Gibbs.

A 30x30 binary image is observed through heavy noise (alpha = +-mu + U(-sigma, sigma)); the
posterior over pixels is an Ising model with coupling lambda = 1 (Sansone 2022, case 3). We sample
it with GibbsWithGradients and with PyMC's BinaryGibbsMetropolis in the same run, print an ArviZ
summary of a few pixels and the ESS per second of each sampler (Hamming-distance statistic), and
write the posterior mean image next to the noisy observation.

Run: ``make demo`` (or ``python examples/ising_segmentation.py --help``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import arviz as az
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pymc as pm  # noqa: E402
import xarray as xr  # noqa: E402

from pymc_lbp import GibbsWithGradients  # noqa: E402
from pymc_lbp.diagnostics import ess, hamming_trace  # noqa: E402
from pymc_lbp.models import segmentation_model  # noqa: E402


def run(sampler: str, model, draws: int, tune: int, chains: int, seed: int, sweeps: float):
    n_sites = int(np.prod(model.initial_point()["x"].shape))
    with model:
        if sampler == "gibbs_with_gradients":
            step = GibbsWithGradients([model["x"]], steps_per_draw=max(1, int(sweeps * n_sites)))
        else:
            step = pm.BinaryGibbsMetropolis([model["x"]])
        start = time.perf_counter()
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=1,
            step=[step],
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        seconds = time.perf_counter() - start
    return idata, seconds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", type=int, default=3)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--tune", type=int, default=50)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sweeps",
        type=float,
        default=0.5,
        help="GibbsWithGradients MH steps per draw, in units of the number of pixels",
    )
    parser.add_argument("--out", type=Path, default=Path("demo_segmentation.png"))
    args = parser.parse_args(argv)

    model = segmentation_model(args.case)
    results = {}
    for sampler in ("gibbs_with_gradients", "binary_gibbs_metropolis"):
        idata, seconds = run(
            sampler, model, args.draws, args.tune, args.chains, args.seed, args.sweeps
        )
        e = ess(hamming_trace(idata, ["x"], seed=0))
        results[sampler] = (idata, seconds, e)
        print(f"{sampler:>24}: {seconds:6.1f} s, ESS(Hamming) {e:7.1f}, ESS/s {e / seconds:6.2f}")

    idata = results["gibbs_with_gradients"][0]
    # the four most uncertain pixels (posterior mean closest to 1/2): the object's boundary
    x = idata.posterior["x"]
    mean = x.mean(("chain", "draw")).values
    flat = np.argsort(np.abs(mean - 0.5), axis=None)[:4]
    rows, cols = np.unravel_index(flat, mean.shape)
    pixels = x.isel(
        x_dim_0=xr.DataArray(rows, dims="pixel"), x_dim_1=xr.DataArray(cols, dims="pixel")
    ).assign_coords(pixel=[f"{r},{c}" for r, c in zip(rows, cols, strict=True)])
    print("\nArviZ summary of the four most uncertain pixels (GibbsWithGradients):")
    with pd.option_context("display.width", 120, "display.max_columns", 20):
        print(az.summary(pixels.to_dataset(name="x")))
    stats = idata.sample_stats
    print(
        f"\nmean acceptance {float(stats['accept'].mean()):.3f}, "
        f"sites changed per draw {float(stats['jump_distance'].mean()):.1f}"
    )
    ratio = (results["gibbs_with_gradients"][2] / results["gibbs_with_gradients"][1]) / max(
        results["binary_gibbs_metropolis"][2] / results["binary_gibbs_metropolis"][1], 1e-12
    )
    print(f"ESS/s ratio GibbsWithGradients / BinaryGibbsMetropolis: {ratio:.2f}")

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8))
    axes[0].imshow(model.alpha, cmap="gray")
    axes[0].set_title("noisy observation alpha")
    for ax, name in zip(axes[1:], ("gibbs_with_gradients", "binary_gibbs_metropolis"), strict=True):
        mean = results[name][0].posterior["x"].mean(("chain", "draw"))
        ax.imshow(mean, cmap="gray", vmin=0, vmax=1)
        ax.set_title(f"posterior mean ({name})")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
