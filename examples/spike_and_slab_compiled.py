"""A spike-and-slab regression sampled two ways: ``pm.sample`` with our step next to PyMC's
NUTS, and ``pymc_lbp.sample`` (the discrete step and BlackJAX's NUTS compiled into one JAX
program, chains vectorised). Prints both ArviZ summaries of the first coefficients and
inclusion probabilities, and the seconds each took.

Run: ``python examples/spike_and_slab_compiled.py`` (needs ``pymc_lbp[jax]``).
"""

from __future__ import annotations

import time

import arviz as az
import numpy as np
import pymc as pm

import pymc_lbp


def build_model(n: int = 200, p: int = 30, seed: int = 0) -> pm.Model:
    """Bernoulli(0.2) inclusion indicators, Normal coefficients with a spike (sd 0.05) or slab
    (sd 2) prior, HalfNormal noise sd; three true non-zero coefficients."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, :3] @ np.array([2.0, -1.5, 1.0]) + rng.normal(size=n)
    with pm.Model() as model:
        gamma = pm.Bernoulli("gamma", 0.2, shape=p)
        beta = pm.Normal("beta", 0.0, 0.05 + 1.95 * gamma)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", X @ beta, sigma, observed=y)
    return model


def main() -> None:
    model = build_model()
    start = time.perf_counter()
    with model:
        step = pymc_lbp.LocallyBalanced([model["gamma"]])
        pm_idata = pm.sample(1000, tune=1000, chains=4, cores=1, step=[step], random_seed=1)
    pm_seconds = time.perf_counter() - start
    start = time.perf_counter()
    idata = pymc_lbp.sample(1000, tune=1000, chains=4, model=model, random_seed=1)
    seconds = time.perf_counter() - start
    coords = {"gamma_dim_0": [0, 1, 2, 3], "beta_dim_0": [0, 1, 2, 3]}
    for label, data, took in (
        ("pm.sample", pm_idata, pm_seconds),
        ("pymc_lbp.sample", idata, seconds),
    ):
        print(f"\n{label}: {took:.1f} s")
        print(az.summary(data, var_names=["gamma", "beta", "sigma"], coords=coords))
    attrs = idata.posterior.attrs
    print(
        f"\npymc_lbp.sample: build (steps, tracing, XLA) {attrs['build_time']:.1f} s, "
        f"sampling {attrs['sampling_time']:.2f} s"
    )


if __name__ == "__main__":
    main()
