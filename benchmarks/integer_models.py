"""Integer latents that must travel: pymc_lbp with defaults vs PyMC's default steps (issue #13).

Models (each with an exact or quadrature reference):

* ``population``: Lincoln-Petersen population size ``N ~ DiscreteUniform(0, 1000)``, 50 marked,
  5 of a second sample of 60 recaptured, ``m ~ HyperGeometric(N, 50, 60)`` (reference:
  enumeration over the support; the posterior is wide and skewed, mean ~ 520);
* ``poisson_counts``: eight latent counts ``k_i ~ Poisson(lam)`` in the thousands, thinned
  observations ``y_i ~ Binomial(k_i, 0.3)``, ``lam ~ Gamma(2, 0.001)`` (reference: conjugacy,
  ``lam | y ~ Gamma(2 + sum y, 0.001 + 0.3 n)`` and ``E[k_i | y] = y_i + 0.7 E[lam | y]``);
* ``poisson_prior``: PyMC's own step-method check of a Poisson, ``k ~ Poisson(10^4)`` and no
  data (reference: mean ``10^4``, sd ``100``);
* the gallery's N-mixture abundance model and spike-and-slab regression (their references).

Ours: ``LocallyBalanced`` on the discrete variables with every option at its default (since
#13.1 each draw gives every integer site an informed multiscale jump); on the two models of the
issue's goal (population size, Poisson prior) also ``GibbsWithGradients``,
``PathAuxiliaryLBP`` and ``SelfBalancing`` with defaults. PyMC: the steps
``pm.sample`` assigns by default (Metropolis for integers, BinaryGibbsMetropolis for
Bernoulli). NUTS takes the continuous parameters in both. Measured: the discrete steps'
construction (compilation included: ours compiles its jumps there, PyMC its Metropolis logp),
``pm.sample`` wall time (tuning and NUTS's compilation included, chains one after another), min
bulk ESS/s over the continuous parameters and the ESS/s of the discrete summary (both per
``pm.sample`` second), the largest |z| against the reference, R-hat.

Writes docs/results/integer_models.{json,md,png}.

Usage: python -m benchmarks.integer_models [--quick] [--repeats N] [--draws N] [--tune N]
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pymc as pm
from scipy.special import gammaln

from benchmarks.common import (
    add_out,
    benchmark_parser,
    load_info,
    machine_info,
    markdown_table,
    pyplot,
    save_figure,
    write_results,
)
from examples.gallery import n_mixture, spike_and_slab
from examples.gallery._gallery import Reference, evaluate, sample
from pymc_lbp import (
    GibbsWithGradients,
    LocallyBalanced,
    PathAuxiliaryLBP,
    SelfBalancing,
)

MARKED, SECOND, RECAPTURED, N_MAX = 50, 60, 5, 1000


def _population_model() -> pm.Model:
    with pm.Model() as model:
        n = pm.DiscreteUniform("N", 0, N_MAX, initval=300)
        pm.HyperGeometric("m", N=n, k=MARKED, n=SECOND, observed=RECAPTURED)
    return model


def _population_reference() -> Reference:
    n = np.arange(MARKED + SECOND - RECAPTURED, N_MAX + 1)
    # log C(K, m) C(N - K, n - m) / C(N, n), terms free of N dropped
    lp = (
        gammaln(n - MARKED + 1)
        - gammaln(n - MARKED - SECOND + RECAPTURED + 1)
        - gammaln(n + 1)
        + gammaln(n - SECOND + 1)
    )
    w = np.exp(lp - lp.max())
    w /= w.sum()
    return Reference({"N": float(w @ n)}, {"N": 0.0}, "enumeration over the support")


POPULATION = SimpleNamespace(
    NAME="population",
    CONTINUOUS=[],
    DISCRETE_SUMMARY="N",
    build_model=_population_model,
    make_step=lambda model: LocallyBalanced([model["N"]]),
    quantities=lambda post: {"N": post["N"].astype(float)},
    reference=_population_reference,
)

THINNED = np.array([611, 584, 640, 598, 575, 622, 603, 590])
THIN = 0.3
GAMMA_A, GAMMA_B = 2.0, 0.001


def _counts_model() -> pm.Model:
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=GAMMA_A, beta=GAMMA_B)
        k = pm.Poisson("k", mu=lam, shape=THINNED.size, initval=THINNED * 3)
        pm.Binomial("y", n=k, p=THIN, observed=THINNED)
    return model


def _counts_reference() -> Reference:
    mean_lam = (GAMMA_A + THINNED.sum()) / (GAMMA_B + THIN * THINNED.size)
    return Reference(
        {"lam": float(mean_lam), "k_mean": float(THINNED.mean() + (1 - THIN) * mean_lam)},
        {"lam": 0.0, "k_mean": 0.0},
        "conjugacy (y_i ~ Poisson(0.3 lam) with k summed out)",
    )


POISSON_COUNTS = SimpleNamespace(
    NAME="poisson_counts",
    CONTINUOUS=["lam"],
    DISCRETE_SUMMARY="k_mean",
    build_model=_counts_model,
    make_step=lambda model: LocallyBalanced([model["k"]]),
    quantities=lambda post: {
        "lam": post["lam"],
        "k_mean": post["k"].mean("k_dim_0").astype(float),
    },
    reference=_counts_reference,
)

PRIOR_MU = 1e4


def _prior_model() -> pm.Model:
    with pm.Model() as model:
        pm.Poisson("k", mu=PRIOR_MU)
    return model


POISSON_PRIOR = SimpleNamespace(
    NAME="poisson_prior",
    CONTINUOUS=[],
    DISCRETE_SUMMARY="k",
    build_model=_prior_model,
    make_step=lambda model: LocallyBalanced([model["k"]]),
    quantities=lambda post: {
        "k": post["k"].astype(float),
        "k_sd": np.abs(post["k"].astype(float) - PRIOR_MU),
    },
    reference=lambda: Reference(
        {"k": PRIOR_MU, "k_sd": float(np.sqrt(2 * PRIOR_MU / np.pi))},
        {"k": 0.0, "k_sd": 0.0},
        "closed form: mean 10^4; E|k - mu| = sd sqrt(2/pi) (normal limit, error < 1e-3 sd)",
    ),
)

ALL_OURS = {
    "LocallyBalanced": LocallyBalanced,
    "GibbsWithGradients": GibbsWithGradients,
    "PathAuxiliaryLBP": PathAuxiliaryLBP,
    "SelfBalancing": SelfBalancing,
}
"""Every sampler of ours (defaults) on the models of the issue's integer goal."""
GOAL_MODELS = {"population": "N", "poisson_prior": "k"}

MODELS = {
    "population": POPULATION,
    "poisson_prior": POISSON_PRIOR,
    "poisson_counts": POISSON_COUNTS,
    "n_mixture": n_mixture,
    "spike_and_slab": spike_and_slab,
}


def main(argv=None) -> dict:
    parser = benchmark_parser(
        __doc__, quick="smoke run: few draws", repeats=1, draws=1000, tune=500, chains=2
    )
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    add_out(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.draws, args.tune, args.repeats = 20, 10, 1
    results = []
    for name in args.models:
        module = MODELS[name]
        start = time.perf_counter()
        ref = module.reference()
        print(f"{name}: reference in {time.perf_counter() - start:.1f} s ({ref.how})", flush=True)
        variants = {"LocallyBalanced": module}
        if name in GOAL_MODELS:
            variants = {
                label: SimpleNamespace(
                    **{**vars(module), "make_step": _maker(cls, GOAL_MODELS[name])}
                )
                for label, cls in ALL_OURS.items()
            }
        runs = [(label, "ours", mod) for label, mod in variants.items()]
        runs.append(("PyMC default", "pymc", module))
        for rep in range(args.repeats):
            for label, sampler, mod in runs:
                idata, build, seconds = sample(
                    mod,
                    sampler,
                    draws=args.draws,
                    tune=args.tune,
                    chains=args.chains,
                    seed=100 * rep + 7,
                )
                res = evaluate(mod, sampler, idata, build, seconds, ref)
                row = asdict(res)
                row["label"] = label
                row["repeat"] = rep
                row["ess_s_continuous"] = res.ess_per_second_continuous
                row["ess_s_discrete"] = res.ess_per_second_discrete
                results.append(row)
                print(
                    f"  {label:>18} rep {rep}: {seconds:6.1f} s, ESS/s cont "
                    f"{res.ess_per_second_continuous:7.2f}, disc {res.ess_per_second_discrete:7.2f}"
                    f", max|z| {res.max_abs_z:5.2f}, R-hat {res.max_rhat:.3f}",
                    flush=True,
                )
    rows = _summarize(results)
    columns = [
        ("model", "model"),
        ("sampler", "sampler"),
        ("build_s", "step build s"),
        ("sample_s", "sample s"),
        ("ess_s_continuous", "min ESS/s (continuous)"),
        ("ess_s_discrete", "ESS/s (discrete summary)"),
        ("ratio_continuous", "ours/PyMC (cont.)"),
        ("ratio_discrete", "ours/PyMC (disc.)"),
        ("max_abs_z", "max abs z"),
        ("max_rhat", "max R-hat"),
    ]
    info = machine_info()
    md = (
        "# Integer latents: pymc_lbp (defaults) vs PyMC's default steps\n\n"
        f"{args.chains} chains x {args.draws} draws (+{args.tune} tune), median of "
        f"{args.repeats} repeat(s), chains one after another on one core; NUTS takes the "
        f"continuous parameters in both. Machine: {info['cpus']} CPUs, pymc {info['pymc']}, "
        f"{info['date']}, load {load_info()}.\n\n" + markdown_table(rows, columns) + "\n"
    )
    name = "integer_models_quick" if args.quick else "integer_models"
    payload = {"args": {**vars(args), "out": str(args.out)}, "machine": info, "rows": rows}
    write_results(name, {**payload, "runs": results}, md, args.out)
    _plot(rows, Path(args.out) / f"{name}.png")
    print(md)
    return payload


def _maker(cls, var: str):
    return lambda model: cls([model[var]])


def _summarize(results: list[dict]) -> list[dict]:
    """Medians over repeats per model and sampler; ratios against PyMC's default steps."""
    keys = ("construction_seconds", "sample_seconds", "ess_s_continuous", "ess_s_discrete")
    rows = []
    for model in dict.fromkeys(r["model"] for r in results):
        med = {}
        for label in dict.fromkeys(r["label"] for r in results if r["model"] == model):
            rs = [r for r in results if r["model"] == model and r["label"] == label]
            med[label] = {k: float(np.median([r[k] for r in rs])) for k in (*keys, "max_abs_z")}
            med[label]["max_rhat"] = float(max(r["max_rhat"] for r in rs))
        base = med["PyMC default"]
        for label, m in med.items():
            rows.append(
                {
                    "model": model,
                    "sampler": label if label == "PyMC default" else f"pymc_lbp {label}",
                    "build_s": m["construction_seconds"],
                    "sample_s": m["sample_seconds"],
                    "ess_s_continuous": m["ess_s_continuous"],
                    "ess_s_discrete": m["ess_s_discrete"],
                    "ratio_continuous": m["ess_s_continuous"]
                    / max(base["ess_s_continuous"], 1e-12),
                    "ratio_discrete": m["ess_s_discrete"] / max(base["ess_s_discrete"], 1e-12),
                    "max_abs_z": m["max_abs_z"],
                    "max_rhat": m["max_rhat"],
                }
            )
    return rows


def _plot(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    samplers = [s for s in dict.fromkeys(r["sampler"] for r in rows) if s != "PyMC default"]
    width = 0.8 / len(samplers)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for ax, key, label in zip(
        axes,
        ("ratio_continuous", "ratio_discrete"),
        ("min ESS/s, continuous (discrete summary where none)", "ESS/s, discrete summary"),
        strict=True,
    ):
        for j, sampler in enumerate(samplers):
            xs, vals = [], []
            for i, m in enumerate(models):
                row = next((r for r in rows if r["model"] == m and r["sampler"] == sampler), None)
                if row is not None:
                    xs.append(i + width * j)
                    vals.append(row[key])
            ax.bar(xs, vals, width=width, label=sampler.removeprefix("pymc_lbp "))
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(np.arange(len(models)) + 0.4 - width / 2, models, rotation=15)
        ax.set_yscale("log")
        ax.set_ylabel("ours / PyMC default")
        ax.set_title(label)
    axes[0].legend(fontsize=8)
    fig.suptitle("Integer latents: defaults vs PyMC's default steps (higher is better)")
    save_figure(fig, path, dpi=120)


if __name__ == "__main__":
    main()
