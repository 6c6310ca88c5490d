"""pymc_lbp.sample against the alternatives a PyMC user has on mixed models (issue #58).

Models: the four of :mod:`benchmarks.compiled_mixed_models` (spike-and-slab in the prior form
n=200 p=30, Gaussian mixture N=500, the gallery's HMM and coal-mining switch point) and three
held-out instances (data from seeds no default was tuned on):

* ``spike_slab_product``: ``y ~ N(X @ (g * b), s)``, ``g ~ Bernoulli(0.2)``, ``b ~ N(0, 2)``,
  ``s ~ HalfNormal(2)`` (n=150, p=20): the common way to write it;
* ``spike_slab_prior``: ``b ~ N(0, 0.05 + 1.95 g)`` (n=200, p=24);
* ``gmm_400``: the mixture of the benchmark with N=400 points of another draw.

Samplers, one process, the same seed on a model:

* ``lbp_sample``: ``pymc_lbp.sample`` with its defaults (4 chains, vectorised), which sum
  conditionally independent discrete sites out of NUTS's target where pymc-extras can
  (``marginalize="auto"``; the column ``marginalized`` says what was summed);
* ``lbp_sample_joint``: the same with ``marginalize=False`` (NUTS on the joint model);
* ``numpyro_dhmcg`` / ``numpyro_dhmcg_modified``: NumPyro's ``DiscreteHMCGibbs(NUTS)`` plain and
  ``modified=True`` (2 chains, sequential), on each model's NumPyro twin (the same log density,
  checked at random states first);
* ``marginal_nutpie`` / ``marginal_numpyro``: ``pymc_extras.marginalize(model, discrete)`` then
  NUTS by nutpie (4 chains, its own threads) or by NumPyro through
  ``pymc.sampling.jax.sample_numpyro_nuts`` (4 chains, vectorised), the discrete posterior
  recovered by ``pymc_extras.recover_marginals`` (its time counted in the sampling time and
  shown apart); where
  pymc-extras refuses the model the reason is recorded.

Measured per (model, sampler) as :func:`benchmarks.compiled_mixed.measure`: min bulk ESS over
every element of the continuous variables, bulk ESS of the discrete summary, min ESS/s (the
headline: the smaller of the two per sampling second, compilation excluded), ESS per NUTS
leapfrog step, divergences; ``build_s`` is what the first call in this process spent before
sampling (disk caches as found). ``vs_best_numpyro`` and ``vs_best_marginal``: ``lbp_sample``'s
min ESS/s over the better of the two.

Writes docs/results/vs_alternatives.{json,md,png} (or ``--out``).

Usage: python -m benchmarks.vs_alternatives [--quick] [--models ...] [--samplers ...]
       [--tune 1000] [--draws 1000] [--out DIR]
(needs the ``bench`` extra: numpyro, nutpie, pymc-extras).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pymc as pm

from benchmarks.common import (
    add_out,
    benchmark_parser,
    compact_cell,
    load_info,
    machine_info,
    markdown_table,
    pyplot,
    save_figure,
    write_results,
)
from benchmarks.compiled_mixed import measure, run_lbp, run_numpyro
from benchmarks.compiled_mixed_models import (
    GMM_K,
    MODELS,
    MixedModel,
    check_same_density,
    gmm_numpyro,
    gmm_pymc,
    gmm_state,
)
from benchmarks.vs_numpyro import PRIOR_INCLUSION, SLAB_SD, SPIKE_SD

SAMPLERS = (
    "lbp_sample",
    "lbp_sample_joint",
    "numpyro_dhmcg",
    "numpyro_dhmcg_modified",
    "marginal_nutpie",
    "marginal_numpyro",
)
MARGINAL_CHAINS = LBP_CHAINS = 4


def regression_data(n: int, p: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal design, 5 non-zero coefficients (2, -1.5, 1, -0.75, 0.5), noise sd 1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    beta = np.zeros(p)
    beta[:5] = [2.0, -1.5, 1.0, -0.75, 0.5]
    return X, X @ beta + rng.normal(size=n)


PRODUCT_DATA = regression_data(150, 20, seed=58)
PRIOR_DATA = regression_data(200, 24, seed=59)
GMM400_Y = np.random.default_rng(60).normal(
    np.array([-3.0, 0.0, 3.0])[np.random.default_rng(61).integers(GMM_K, size=400)], 1.0
)


def spike_slab(name: str, X: np.ndarray, y: np.ndarray, *, product: bool) -> MixedModel:
    """The spike-and-slab regression on ``(X, y)`` with ``g ~ Bernoulli(0.2)``,
    ``s ~ HalfNormal(2)``: ``product`` ``y ~ N(X @ (g * b), s)`` with ``b ~ N(0, 2)``, else the
    prior form ``y ~ N(X b, s)`` with ``b ~ N(0, 0.05 + 1.95 g)``; and its NumPyro twin."""
    p = X.shape[1]

    def b_sd(g):
        return SLAB_SD if product else SPIKE_SD + (SLAB_SD - SPIKE_SD) * g

    def build() -> pm.Model:
        with pm.Model() as model:
            g = pm.Bernoulli("g", p=PRIOR_INCLUSION, shape=p)
            b = pm.Normal("b", 0.0, b_sd(g), shape=p)
            s = pm.HalfNormal("s", 2.0)
            pm.Normal("y", X @ (g * b) if product else X @ b, s, observed=y)
        return model

    def twin():
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        Xj, yj = jnp.asarray(X), jnp.asarray(y)

        def model():
            with numpyro.plate("p", p):
                g = numpyro.sample("g", dist.Bernoulli(PRIOR_INCLUSION))
                b = numpyro.sample("b", dist.Normal(0.0, b_sd(g)))
            s = numpyro.sample("s", dist.HalfNormal(2.0))
            numpyro.sample("y", dist.Normal(Xj @ (g * b) if product else Xj @ b, s), obs=yj)

        return model

    def state(rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {
            "g": rng.integers(0, 2, size=p),
            "b": rng.normal(size=p),
            "s": np.array(rng.uniform(0.5, 2.0)),
        }

    def n_included(post):
        return post["g"].sum(-1).astype(float)

    return MixedModel(name, build, twin, ["g"], ["b", "s"], "n_included", n_included, state)


HELD_OUT: dict[str, MixedModel] = {
    "spike_slab_product": spike_slab("spike_slab_product", *PRODUCT_DATA, product=True),
    "spike_slab_prior": spike_slab("spike_slab_prior", *PRIOR_DATA, product=False),
    "gmm_400": MixedModel(
        "gmm_400",
        lambda: gmm_pymc(GMM400_Y),
        lambda: gmm_numpyro(GMM400_Y),
        ["z"],
        ["w", "mu", "sigma"],
        "mean_assignment",
        lambda post: post["z"].mean(-1).astype(float),
        gmm_state(GMM400_Y.size),
    ),
}
ALL_MODELS: dict[str, MixedModel] = {**MODELS, **HELD_OUT}


def marginal_model(spec: MixedModel) -> tuple[pm.Model, dict[str, np.ndarray]]:
    """``pymc_extras.marginalize`` of the model over its discrete variables, and the start the
    model's own initial values give (pymc-extras refuses initial values inside the model, so
    they are passed to the samplers instead).

    Raises
    ------
    NotImplementedError, ValueError, ...
        pymc-extras' own refusal (for example "cannot be marginalized efficiently").
    """
    import pymc_extras as pmx

    model = spec.build()
    initvals = {
        rv.name: np.asarray(model.rvs_to_initial_values[rv])
        for rv in model.free_RVs
        if model.rvs_to_initial_values.get(rv) is not None and rv.name not in spec.discrete
    }
    for rv in list(model.rvs_to_initial_values):
        model.rvs_to_initial_values[rv] = None
    return pmx.marginalize(model, spec.discrete), initvals


def run_marginal(spec: MixedModel, backend: str, *, tune: int, draws: int, seed: int) -> dict:
    """The marginalized model by nutpie or NumPyro, its discrete posterior recovered."""
    import pymc_extras as pmx

    t0 = time.perf_counter()
    try:
        model, initvals = marginal_model(spec)
    except Exception as err:  # noqa: BLE001 - pymc-extras' refusal is the result
        reason = str(err).splitlines()[0].split(". ")[0]
        return {"skipped": f"pymc-extras: {type(err).__name__}: {reason}"}
    if backend == "nutpie":
        import nutpie

        compiled = nutpie.compile_pymc_model(model, initial_points=initvals or None)
        build = time.perf_counter() - t0
        t1 = time.perf_counter()
        idata = nutpie.sample(
            compiled, draws=draws, tune=tune, chains=MARGINAL_CHAINS, seed=seed, progress_bar=False
        )
    else:
        from pymc.sampling.jax import sample_numpyro_nuts

        from benchmarks.vs_numpyro import CompileTimer

        with CompileTimer() as ct:
            t1 = time.perf_counter()
            idata = sample_numpyro_nuts(
                draws=draws,
                tune=tune,
                chains=MARGINAL_CHAINS,
                random_seed=seed,
                initvals=initvals or None,
                model=model,
                progressbar=False,
                chain_method="vectorized",
                idata_kwargs={"log_likelihood": False},
            )
        build = t1 - t0 + ct.seconds  # marginalizing, then JAX's compile events
        t1 += ct.seconds  # the compile events are not sampling time
    t2 = time.perf_counter()
    with model:
        idata = pmx.recover_marginals(idata, model=model, random_seed=seed)
    seconds, recover = time.perf_counter() - t1, time.perf_counter() - t2
    post = {k: idata.posterior[k].values for k in idata.posterior.data_vars}
    res = measure(spec, post, float(idata.sample_stats["n_steps"].sum()))
    div = int(idata.sample_stats["diverging"].sum())
    return {**res, "seconds": seconds, "recover_s": recover, "build_s": build,
            "chains": MARGINAL_CHAINS, "divergences": div}  # fmt: skip


def run(spec: MixedModel, sampler: str, *, tune: int, draws: int, seed: int) -> dict:
    """One (model, sampler) run."""
    if sampler.startswith("lbp_sample"):
        marginalize = "auto" if sampler == "lbp_sample" else False
        res = run_lbp(spec, LBP_CHAINS, tune=tune, draws=draws, seed=seed, marginalize=marginalize)
        res.pop("chain_method", None)
        return res
    if sampler.startswith("numpyro_"):
        return run_numpyro(spec, sampler, tune=tune, draws=draws, seed=seed, mixedhmc_max_sites=0)
    return run_marginal(spec, sampler.removeprefix("marginal_"), tune=tune, draws=draws, seed=seed)


def summarize(runs: list[dict], draws: int) -> list[dict]:
    """Per run: min ESS/s, the share of divergent draws (``draws`` kept per chain), and on
    ``lbp_sample``'s rows the ratios to the best alternatives."""
    rows = []
    for r in runs:
        row = dict(r)
        if "min_ess" in r:
            row["min_ess_per_s"] = r["min_ess"] / r["seconds"]
            row["continuous_ess_per_s"] = r["min_ess_continuous"] / r["seconds"]
            # the continuous posterior alone, without recovering the discrete one
            row["continuous_ess_per_nuts_s"] = r["min_ess_continuous"] / (
                r["seconds"] - r.get("recover_s", 0.0)
            )
            row["discrete_ess_per_s"] = r["ess_discrete"] / r["seconds"]
            row["divergent_share"] = r["divergences"] / (r["chains"] * draws)
        rows.append(row)
    by_model: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_model.setdefault(row["model"], {})[row["sampler"]] = row
    for runs_of in by_model.values():
        ours = runs_of.get("lbp_sample")
        if ours is None or "min_ess_per_s" not in ours:
            continue
        for label, prefix in (("vs_best_numpyro", "numpyro_"), ("vs_best_marginal", "marginal_")):
            best = [
                v["min_ess_per_s"]
                for k, v in runs_of.items()
                if k.startswith(prefix) and "min_ess_per_s" in v
            ]
            if best:
                ours[label] = ours["min_ess_per_s"] / max(best)
    return rows


COLUMNS = [
    ("model", "model"),
    ("sampler", "sampler"),
    ("chains", "chains"),
    ("marginalized", "summed out"),
    ("min_ess_per_s", "min ESS/s"),
    ("continuous_ess_per_s", "continuous min ESS/s"),
    ("continuous_ess_per_nuts_s", "continuous min ESS/s, recovery not counted"),
    ("discrete_ess_per_s", "discrete ESS/s"),
    ("vs_best_numpyro", "vs best NumPyro DHMCGibbs"),
    ("vs_best_marginal", "vs best marginalized"),
    ("divergences", "divergences"),
    ("divergent_share", "divergent share of kept draws"),
    ("ess_per_grad", "ESS per gradient"),
    ("seconds", "sampling s"),
    ("recover_s", "of which recovering s"),
    ("build_s", "build s (first call)"),
    ("skipped", "skipped"),
]


SHOWN = ("min_ess_continuous", "ess_discrete", "seconds", "build_s", "divergences", "skipped")


def cell(v) -> str:
    """A table cell: numbers to three digits, None as "-"."""
    return "-" if v is None else compact_cell(v)


def plot(rows: list[dict], path: Path) -> None:
    """Min ESS/s per model and sampler (log scale)."""
    plt = pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(models)), 4.0))
    width = 0.8 / len(SAMPLERS)
    value = {(r["model"], r["sampler"]): r.get("min_ess_per_s", 0.0) for r in rows}
    for i, sampler in enumerate(SAMPLERS):
        vals = [value.get((m, sampler), 0.0) for m in models]
        ax.bar(np.arange(len(models)) + i * width, np.maximum(vals, 1e-3), width, label=sampler)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(models)) + 0.4 - width / 2, models, rotation=20)
    ax.set_ylabel("min ESS per sampling second")
    ax.set_title("pymc_lbp.sample and the alternatives on mixed models")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> dict:
    parser = benchmark_parser(__doc__, quick="two models, 200 + 200 draws", draws=1000, tune=1000)
    parser.add_argument("--models", nargs="*", default=list(ALL_MODELS), choices=list(ALL_MODELS))
    parser.add_argument("--samplers", nargs="*", default=list(SAMPLERS), choices=list(SAMPLERS))
    parser.add_argument("--seed", type=int, default=2026)
    add_out(parser)
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)  # as pymc_lbp.sample and compiled_mixed sample
    models = ["spike_slab_product", "spike_slab_prior"] if args.quick else args.models
    tune, draws = (200, 200) if args.quick else (args.tune, args.draws)
    checks = {m: check_same_density(ALL_MODELS[m]) for m in models}
    runs = []
    for m in models:
        for sampler in args.samplers:
            res = run(ALL_MODELS[m], sampler, tune=tune, draws=draws, seed=args.seed)
            runs.append({"model": m, "sampler": sampler, **res})
            shown = {k: compact_cell(v) for k, v in res.items() if k in SHOWN}
            print(m, sampler, shown, flush=True)
    rows = summarize(runs, draws)
    table = markdown_table(rows, COLUMNS, cell=cell)
    meta = {"machine": machine_info(), "load": load_info(), "tune": tune, "draws": draws,
            "seed": args.seed, "density_checks": checks}  # fmt: skip
    result = {"meta": meta, "rows": rows}
    if args.out is not None:
        write_results("vs_alternatives", result, table, args.out)
        plot(rows, args.out / "vs_alternatives.png")
    print(table)
    return result


if __name__ == "__main__":
    main()
