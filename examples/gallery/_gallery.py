"""Plumbing shared by the gallery scripts and ``benchmarks/user_models.py``.

Sampling with our step or with PyMC's default step assignment, the key quantities' accuracy
against a reference in Monte Carlo standard errors, ESS per second, and the per-model script's
``main`` (ArviZ summaries and a plot under ``output/``).
"""

from __future__ import annotations

import argparse
import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr
from pymc.sampling.mcmc import assign_step_methods

OUTPUT = Path(__file__).resolve().parents[2] / "output"


@dataclass
class Reference:
    """Reference posterior means of a model's key quantities.

    ``se`` is the standard error of each mean: 0 for an exact answer (enumeration, quadrature),
    the MCSE for a reference Monte Carlo run on a marginalised model.
    """

    mean: dict[str, float]
    se: dict[str, float]
    how: str


@dataclass
class Result:
    """One sampling run of one model and what it measured."""

    model: str
    sampler: str
    construction_seconds: float
    sample_seconds: float
    min_ess_continuous: float
    ess_discrete: float
    max_abs_z: float
    z: dict[str, float] = field(default_factory=dict)
    mean: dict[str, float] = field(default_factory=dict)
    mcse: dict[str, float] = field(default_factory=dict)
    max_rhat: float = float("nan")

    @property
    def ess_per_second_continuous(self) -> float:
        return self.min_ess_continuous / self.sample_seconds

    @property
    def ess_per_second_discrete(self) -> float:
        return self.ess_discrete / self.sample_seconds


def pymc_default_steps(model: pm.Model) -> list:
    """The steps ``pm.sample()`` would assign to the model's non-gradient variables.

    NUTS is left to ``pm.sample`` (as when it is called without ``step``); the discrete steps are
    built here, with PyMC's default options, so their construction can be timed.
    """
    _, selected = assign_step_methods(model, None, methods=pm.STEP_METHODS)
    steps = []
    with model:
        for cls, value_vars in selected.items():
            if cls is pm.NUTS or not value_vars:
                continue
            steps.append(cls(value_vars))
    return steps


def sample(
    module: ModuleType,
    sampler: str,
    *,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 2,
    seed: int = 1,
    progressbar: bool = False,
    model: pm.Model | None = None,
):
    """Sample ``module``'s model with ``sampler`` ("ours" or "pymc"); return (idata, timings).

    Our step (``module.make_step``) or PyMC's default discrete steps are built and timed, then
    ``pm.sample`` assigns NUTS to the continuous parameters as usual. One core, so the seconds are
    the cost of one chain after another. The construction's time includes collecting the
    garbage it left (``gc.collect``).
    """
    model = module.build_model() if model is None else model
    start = time.perf_counter()
    if sampler == "ours":
        with model:
            steps = [module.make_step(model)]
    elif sampler == "pymc":
        steps = pymc_default_steps(model)
    else:
        raise ValueError(f"sampler must be 'ours' or 'pymc', got {sampler!r}")
    # the garbage a construction leaves is collected with it (timed): otherwise a full
    # collection it provokes (~1 s with a million live objects) lands in whichever run comes
    # next, by chance ours or PyMC's
    gc.collect()
    construction = time.perf_counter() - start
    with model:
        start = time.perf_counter()
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=1,
            step=steps,
            random_seed=seed,
            progressbar=progressbar,
            compute_convergence_checks=False,
        )
        seconds = time.perf_counter() - start
    return idata, construction, seconds


def evaluate(
    module: ModuleType,
    sampler: str,
    idata,
    construction: float,
    seconds: float,
    reference: Reference,
) -> Result:
    """ESS of the named continuous parameters and the discrete summary; accuracy in MCSE units."""
    post = idata.posterior
    q = module.quantities(post)
    ds = xr.Dataset(q)
    ess_q = az.ess(ds, method="bulk")
    if module.CONTINUOUS:
        cont = az.ess(post[module.CONTINUOUS], method="bulk")
        min_ess = float(min(float(cont[v].min()) for v in module.CONTINUOUS))
    else:  # a model without continuous parameters: its discrete summary stands in
        min_ess = float(ess_q[module.DISCRETE_SUMMARY])
    mcse = az.mcse(ds, method="mean")
    rhat = az.rhat(xr.merge([post[module.CONTINUOUS], ds]) if module.CONTINUOUS else ds)
    z, mean, se = {}, {}, {}
    for k in q:
        mean[k] = float(ds[k].mean())
        se[k] = float(mcse[k])
        denom = np.hypot(se[k], reference.se[k])
        z[k] = (mean[k] - reference.mean[k]) / denom if denom > 0 else float("inf")
    return Result(
        model=module.NAME,
        sampler=sampler,
        construction_seconds=construction,
        sample_seconds=seconds,
        min_ess_continuous=min_ess,
        ess_discrete=float(ess_q[module.DISCRETE_SUMMARY]),
        max_abs_z=float(max(abs(v) for v in z.values())),
        z=z,
        mean=mean,
        mcse=se,
        max_rhat=float(max(float(rhat[v].max()) for v in rhat.data_vars)),
    )


def print_comparison(results: list[Result], reference: Reference) -> None:
    """Reference against each run, quantity by quantity, and the ESS per second."""
    names = list(reference.mean)
    print(f"\nreference: {reference.how}")
    head = f"{'quantity':<16}{'reference':>12}" + "".join(
        f"{r.sampler + ' mean':>14}{'z':>7}" for r in results
    )
    print(head)
    for k in names:
        line = f"{k:<16}{reference.mean[k]:>12.4f}"
        for r in results:
            line += f"{r.mean[k]:>14.4f}{r.z[k]:>7.2f}"
        print(line)
    for r in results:
        print(
            f"{r.sampler}: build {r.construction_seconds:.1f} s, sample {r.sample_seconds:.1f} s, "
            f"min continuous ESS/s {r.ess_per_second_continuous:.1f}, "
            f"discrete-summary ESS/s {r.ess_per_second_discrete:.1f}, max |z| {r.max_abs_z:.2f}, "
            f"max R-hat {r.max_rhat:.3f}"
        )


def main(module: ModuleType, plot) -> None:
    """The gallery script: sample with our step and with PyMC's defaults, summarise, plot.

    ``plot(model, idata_ours, idata_pymc, reference, path)`` draws the model's figure.
    """
    parser = argparse.ArgumentParser(description=module.__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-progressbar", action="store_true")
    args = parser.parse_args()
    name = module.NAME
    reference = module.reference()
    model = module.build_model()
    runs, results = {}, []
    for sampler in ("ours", "pymc"):
        label = "pymc_lbp" if sampler == "ours" else "PyMC default steps"
        print(f"\n=== {name}: {label} ===")
        idata, construction, seconds = sample(
            module,
            sampler,
            draws=args.draws,
            tune=args.tune,
            chains=args.chains,
            seed=args.seed,
            progressbar=not args.no_progressbar,
            model=model,
        )
        print(az.summary(idata, var_names=module.SUMMARY_VARS, round_to=3))
        runs[sampler] = idata
        results.append(evaluate(module, sampler, idata, construction, seconds, reference))
    print_comparison(results, reference)
    OUTPUT.mkdir(exist_ok=True)
    path = OUTPUT / f"gallery_{name}.png"
    plot(model, runs["ours"], runs["pymc"], reference, path)
    print(f"\nwrote {path}")


def plot_summary(
    module: ModuleType, idata_ours, idata_pymc, reference: Reference, path, data_panel
):
    """Two panels: the model's data (``data_panel(ax, idata_ours)``) and each key quantity's
    estimate by both samplers, with +-2 MCSE bars, as a difference from the reference in units of
    the reference posterior's scale (the pooled posterior sd of the two runs).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8))
    data_panel(ax0, idata_ours)
    names = list(reference.mean)
    ypos = np.arange(len(names))
    for shift, idata, label in ((-0.15, idata_ours, "pymc_lbp"), (0.15, idata_pymc, "PyMC")):
        ds = xr.Dataset(module.quantities(idata.posterior))
        mcse = az.mcse(ds, method="mean")
        for i, k in enumerate(names):
            sd = float(
                np.std(
                    np.concatenate(
                        [
                            np.ravel(module.quantities(idata_ours.posterior)[k]),
                            np.ravel(module.quantities(idata_pymc.posterior)[k]),
                        ]
                    )
                )
            )
            sd = sd if sd > 0 else 1.0
            d = (float(ds[k].mean()) - reference.mean[k]) / sd
            err = 2 * np.hypot(float(mcse[k]), reference.se[k]) / sd
            ax1.errorbar(
                d,
                i + shift,
                xerr=err,
                fmt="o",
                color="C0" if shift < 0 else "C1",
                label=label if i == 0 else None,
            )
    ax1.axvline(0, color="k", lw=1)
    ax1.set_yticks(ypos, names)
    ax1.set(
        xlabel="(estimate - reference) / posterior sd, bars +-2 MCSE",
        title=f"Accuracy vs reference ({reference.how.split(':')[0]})",
    )
    ax1.legend()
    fig.suptitle(module.TITLE)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
