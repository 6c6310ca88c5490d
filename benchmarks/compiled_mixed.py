"""pymc_lbp.sample (discrete steps and BlackJAX NUTS in one JAX program) on mixed models.

Models (:mod:`benchmarks.compiled_mixed_models`): spike-and-slab regression (n=200, p=30), a
3-component Gaussian mixture with explicit assignments (N=500), the gallery's hidden Markov
model and coal-mining switch point. Each NumPyro twin's log density is checked against PyMC's
at random states (equal up to a constant) before anything is sampled.

Samplers, one process, the same seed for all on a model:

* ``pymc_default``: ``pm.sample()``'s default step assignment (2 chains, ``cores=1``);
* ``pymc_ours``: ``pm.sample()`` with ``LocallyBalanced(discrete vars)`` next to NUTS (same),
  measured after a short warm-up run that compiles what the step defers;
* ``lbp_sample_{1,4,32}``: ``pymc_lbp.sample(chains=1/4/32, chain_method="vectorized")``;
  ``lbp_sample_seq_N`` (not run by default): ``chain_method="sequential"``, N chains one after
  another in the same compiled function;
* ``numpyro_dhmcg`` / ``numpyro_dhmcg_modified``: ``DiscreteHMCGibbs(NUTS(model))``, plain and
  ``modified=True`` (2 chains, sequential);
* ``numpyro_mixedhmc``: ``MixedHMC(HMC(model, trajectory_length=1.2), num_discrete_updates=20)``
  where every discrete site has a finite support (else skipped, with the reason recorded).

Measured per (model, sampler): min bulk ESS over every element of the key continuous variables
and the bulk ESS of a discrete summary; sampling seconds (warmup and draws, compilation
excluded: PyMC from per-draw callback stamps, pymc_lbp.sample from
``posterior.attrs["sampling_time"]``, NumPyro wall minus JAX's compile events); min ESS/s over
both (the headline); ESS per gradient evaluation (NUTS leapfrog steps of the kept draws);
for pymc_lbp.sample, NUTS's leapfrog steps per draw on average and, with several chains, the
average over draws of the most any chain took (vectorised chains all run that long: ``jax.vmap``
of NUTS's trajectory loop stops when the last chain's trajectory ends);
build/compile seconds; and, for pymc_lbp.sample with 4 chains, the build time of a cold
subprocess (empty JAX cache and pytensor compile directory) and of a warm one (a second new
process on the caches the cold one filled: what a user's next session pays; ``--no-cold`` skips
both).

Writes docs/results/compiled_mixed.{json,md,png} (or ``--out``).

Usage: python -m benchmarks.compiled_mixed [--quick] [--models spike_slab gmm hidden_markov
       coal_mining] [--tune 1000] [--draws 1000] [--no-cold] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pymc as pm

from benchmarks.common import (
    ROOT,
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
from benchmarks.compiled_mixed_models import MODELS, MixedModel, check_same_density
from benchmarks.vs_numpyro import CompileTimer, numpyro_available
from examples.gallery._gallery import pymc_default_steps

PYMC_CHAINS = NUMPYRO_CHAINS = 2
LBP_CHAINS = (1, 4, 32)
QUICK_LBP_CHAINS = (1, 4)
NUMPYRO_SAMPLERS = ("numpyro_dhmcg", "numpyro_dhmcg_modified", "numpyro_mixedhmc")
SAMPLERS = ("pymc_default", "pymc_ours", *(f"lbp_sample_{c}" for c in LBP_CHAINS))
SAMPLERS += NUMPYRO_SAMPLERS


def sampler_name(name: str) -> str:
    """An argparse type: a known sampler, or ``lbp_sample_N`` / ``lbp_sample_seq_N`` with any
    positive N chains."""
    prefix, _, n = name.rpartition("_")
    if name in SAMPLERS or (
        prefix in ("lbp_sample", "lbp_sample_seq") and n.isdigit() and int(n) > 0
    ):
        return name
    raise argparse.ArgumentTypeError(f"unknown sampler {name!r}; choose from {', '.join(SAMPLERS)}")


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


def measure(spec: MixedModel, post: dict[str, np.ndarray], leapfrog: float) -> dict:
    """ESS of the key quantities from ``(chain, draw, ...)`` arrays of the kept draws.

    Parameters
    ----------
    spec : MixedModel
    post : dict of str to ndarray
        Draws of every variable, chains first.
    leapfrog : float
        NUTS (HMC) leapfrog steps over the kept draws, all chains.

    Returns
    -------
    dict
        ``min_ess_continuous``, ``ess_discrete``, ``min_ess`` (the smaller; a NaN ESS of a
        constant summary is left out) and ``ess_per_grad`` (``min_ess / leapfrog``).
    """
    import arviz as az

    cont = {k: np.asarray(post[k], dtype=float) for k in spec.continuous}
    ess_c = az.ess(az.convert_to_dataset(cont), method="bulk")
    min_c = float(min(float(ess_c[k].min()) for k in spec.continuous))
    summary = spec.summary({k: np.asarray(v) for k, v in post.items()})
    ess_d = float(az.ess(az.convert_to_dataset({"s": summary}), method="bulk")["s"])
    min_ess = float(np.nanmin([min_c, ess_d]))
    return {
        "min_ess_continuous": min_c,
        "ess_discrete": ess_d,
        "min_ess": min_ess,
        "leapfrog_steps": float(leapfrog),
        "ess_per_grad": min_ess / leapfrog if leapfrog else None,
    }


def warm_up_ours(spec: MixedModel, seed: int) -> None:
    """A short ``pm.sample`` with our step, which compiles its kernels at their first use: the
    measured run then finds its graphs compiled, as a user's runs after the first on a model do
    (a first run on a new model compiles them)."""
    from pymc_lbp import LocallyBalanced

    model = spec.build()
    with model:
        pm.sample(
            draws=20,
            tune=20,
            chains=1,
            cores=1,
            step=[LocallyBalanced([model[n] for n in spec.discrete])],
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )


def run_pymc(spec: MixedModel, sampler: str, *, tune: int, draws: int, seed: int) -> dict:
    """``pm.sample`` (2 chains one after the other) with PyMC's default steps or ours.

    The sampling seconds run from each chain's first draw to its last (callback stamps), scaled
    by ``n / (n - 1)`` for the first draw's share: compilation (pytensor, in the steps'
    construction and ``pm.sample``'s set-up) is left out and reported as ``build_s`` (wall time
    of the call minus the sampling seconds). Ours is measured after :func:`warm_up_ours`.
    """
    from pymc_lbp import LocallyBalanced

    if sampler == "pymc_ours":
        warm_up_ours(spec, seed)
    model = spec.build()
    stamps: dict[int, list[float]] = {}

    def callback(trace, draw):
        stamps.setdefault(draw.chain, []).append(time.perf_counter())

    t0 = time.perf_counter()
    with model:
        if sampler == "pymc_default":
            steps = pymc_default_steps(model)
        else:
            steps = [LocallyBalanced([model[n] for n in spec.discrete])]
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=PYMC_CHAINS,
            cores=1,
            step=steps,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            callback=callback,
        )
    total = time.perf_counter() - t0
    seconds = sum((s[-1] - s[0]) * len(s) / max(len(s) - 1, 1) for s in stamps.values())
    post = {k: idata.posterior[k].values for k in idata.posterior.data_vars}
    res = measure(spec, post, float(idata.sample_stats["n_steps"].sum()))
    steps_label = "+".join(type(s).__name__ for s in steps) + "+NUTS"
    return {**res, "seconds": seconds, "build_s": total - seconds, "chains": PYMC_CHAINS,
            "steps": steps_label}  # fmt: skip


def run_lbp(
    spec: MixedModel,
    chains: int,
    *,
    tune: int,
    draws: int,
    seed: int,
    chain_method: str = "vectorized",
    marginalize: bool | str = "auto",
) -> dict:
    """``pymc_lbp.sample`` with ``chains`` chains (vectorised by default); times from the
    posterior attrs; NUTS's leapfrog steps per draw, mean and longest chain's (warmup
    included); what it summed out (``marginalized``, "-" for nothing)."""
    import pymc_lbp

    idata = pymc_lbp.sample(
        draws,
        tune,
        chains,
        model=spec.build(),
        random_seed=seed,
        chain_method=chain_method,
        progressbar=False,
        compute_convergence_checks=False,
        discard_tuned_samples=False,
        marginalize=marginalize,
    )
    attrs = idata.posterior.attrs
    post = {k: idata.posterior[k].values for k in idata.posterior.data_vars}
    res = measure(spec, post, float(idata.sample_stats["n_steps"].sum()))
    div = int(idata.sample_stats["diverging"].sum())
    return {**res, **nuts_steps(idata), "seconds": float(attrs["sampling_time"]),
            "build_s": float(attrs["build_time"]), "chains": chains,
            "chain_method": chain_method, "divergences": div,
            "marginalized": attrs.get("marginalized", "-")}  # fmt: skip


def nuts_steps(idata) -> dict:
    """NUTS's leapfrog steps per draw (warmup and kept draws): the mean over chains and draws,
    and the mean over draws of the largest over chains (what vectorised chains all run)."""
    groups = [g for g in ("warmup_sample_stats", "sample_stats") if g in idata.groups()]
    if "n_steps" not in idata[groups[-1]]:  # no continuous variables: no NUTS
        return {}
    steps = np.concatenate([idata[g]["n_steps"].values for g in groups], axis=1)
    return {
        "nuts_steps_mean": float(steps.mean()),
        "nuts_steps_longest_chain": float(steps.max(axis=0).mean()),
    }


def mixedhmc_skip_reason(model, max_sites: int) -> str | None:
    """Why MixedHMC is not run on the NumPyro ``model`` (None when it is).

    Parameters
    ----------
    model : callable
        The NumPyro model.
    max_sites : int
        The most discrete coordinates run: a --quick try (20 + 20 draws) on the mixture's 500
        assignments had not finished after 8 minutes (the step size adapted down, so a fixed
        trajectory length of 1.2 takes very many leapfrog steps per discrete update).

    Returns
    -------
    str or None
        The reason: a latent discrete site without a finite (enumerable) support, or more
        than ``max_sites`` discrete coordinates.
    """
    from numpyro import handlers
    from numpyro.infer import init_to_uniform

    seeded = handlers.seed(model, 0)  # improper sites get values as MCMC initialises them
    tr = handlers.trace(handlers.substitute(seeded, substitute_fn=init_to_uniform)).get_trace()
    n_sites = 0
    for name, site in tr.items():
        if site["type"] != "sample" or site["is_observed"]:
            continue
        fn = site["fn"]
        if fn.support.is_discrete:
            if not fn.has_enumerate_support:
                return f"discrete site {name!r} has no finite support"
            n_sites += int(np.size(site["value"]))
    if n_sites > max_sites:
        return f"{n_sites} discrete coordinates > --mixedhmc-max-sites {max_sites} (too slow)"
    return None


def run_numpyro(
    spec: MixedModel, sampler: str, *, tune: int, draws: int, seed: int, mixedhmc_max_sites: int
) -> dict:
    """A NumPyro run (2 chains, sequential): ``DiscreteHMCGibbs(NUTS)`` or ``MixedHMC(HMC)``.

    The sampling seconds are the wall time of ``MCMC.run`` (warmup and draws) less the
    durations of JAX's compile events (:class:`benchmarks.vs_numpyro.CompileTimer`), which are
    reported as ``build_s``.
    """
    import jax
    from numpyro.infer import HMC, MCMC, NUTS, DiscreteHMCGibbs, MixedHMC

    model = spec.numpyro_model()
    if sampler == "numpyro_mixedhmc":
        reason = mixedhmc_skip_reason(model, mixedhmc_max_sites)
        if reason:
            return {"skipped": reason}
        kernel = MixedHMC(HMC(model, trajectory_length=1.2), num_discrete_updates=20)
    else:
        kernel = DiscreteHMCGibbs(NUTS(model), modified=sampler.endswith("modified"))
    mcmc = MCMC(
        kernel,
        num_warmup=tune,
        num_samples=draws,
        num_chains=NUMPYRO_CHAINS,
        chain_method="sequential",
        progress_bar=False,
    )
    with CompileTimer() as ct:
        t0 = time.perf_counter()
        fields = ("hmc_state.num_steps", "hmc_state.diverging")
        mcmc.run(jax.random.PRNGKey(seed), extra_fields=fields)
        samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        wall = time.perf_counter() - t0
    extra = mcmc.get_extra_fields(group_by_chain=True)
    post = spec.from_numpyro({k: np.asarray(v) for k, v in samples.items()})
    res = measure(spec, post, float(np.sum(extra["hmc_state.num_steps"])))
    div = int(np.sum(extra["hmc_state.diverging"]))
    return {**res, "seconds": wall - ct.seconds, "build_s": ct.seconds, "chains": NUMPYRO_CHAINS,
            "divergences": div}  # fmt: skip


def new_process_builds(name: str, *, tune: int, draws: int) -> tuple[float, float]:
    """``build_time`` of ``pymc_lbp.sample`` (4 chains) in a new subprocess with an empty JAX
    cache (``PYMC_LBP_JAX_CACHE``) and an empty pytensor compile directory (cold), then in a
    second new subprocess on the caches the first filled (warm)."""
    builds = []
    with tempfile.TemporaryDirectory() as jax_dir, tempfile.TemporaryDirectory() as pt_dir:
        env = dict(os.environ, PYMC_LBP_JAX_CACHE=jax_dir)
        env["PYTENSOR_FLAGS"] = f"blas__ldflags=-lopenblas,compiledir={pt_dir}"
        cmd = [sys.executable, "-m", "benchmarks.compiled_mixed", "--cold-only", name]
        cmd += ["--tune", str(tune), "--draws", str(draws)]
        for _ in range(2):
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
            builds.append(float(json.loads(res.stdout.strip().splitlines()[-1])["build_time"]))
    return builds[0], builds[1]


def device_info() -> dict:
    """JAX's first device: platform and kind."""
    import jax

    dev = jax.devices()[0]
    return {"jax": jax.__version__, "platform": dev.platform, "device_kind": dev.device_kind}


# ---------------------------------------------------------------------------------------------
# Summary, table, plot
# ---------------------------------------------------------------------------------------------


def summarize(runs: list[dict]) -> list[dict]:
    """One row per run with min ESS/s and its ratios to the better NumPyro DiscreteHMCGibbs and
    to ``pymc_default`` on the same model; each lbp_sample_N's seconds per draw against 1 chain."""
    rows = []
    for r in runs:
        row = dict(r)
        if "skipped" not in r:
            row["min_ess_per_s"] = r["min_ess"] / max(r["seconds"], 1e-12)
        rows.append(row)
    for row in rows:
        if "min_ess_per_s" not in row:
            continue
        same = [r for r in rows if r["model"] == row["model"] and "min_ess_per_s" in r]
        dhmcg = [r["min_ess_per_s"] for r in same if r["sampler"].startswith("numpyro_dhmcg")]
        if dhmcg:
            row["vs_numpyro"] = row["min_ess_per_s"] / max(max(dhmcg), 1e-12)
        base = next((r for r in same if r["sampler"] == "pymc_default"), None)
        if base:
            row["vs_pymc_default"] = row["min_ess_per_s"] / max(base["min_ess_per_s"], 1e-12)
        one = next((r for r in same if r["sampler"] == "lbp_sample_1"), None)
        if row["sampler"].startswith("lbp_sample_") and row["chains"] > 1 and one:
            row["wall_per_draw_vs_1_chain"] = row["seconds"] / max(one["seconds"], 1e-12)
        if row.get("nuts_steps_mean"):
            row["nuts_longest_vs_mean"] = row["nuts_steps_longest_chain"] / row["nuts_steps_mean"]
    return rows


COLUMNS = [
    ("model", "model"),
    ("sampler", "sampler"),
    ("chains", "chains"),
    ("min_ess_per_s", "min ESS/s"),
    ("vs_numpyro", "vs best NumPyro DHMCGibbs"),
    ("vs_pymc_default", "vs pymc_default"),
    ("ess_per_grad", "ESS per gradient"),
    ("wall_per_draw_vs_1_chain", "wall per draw vs 1 chain"),
    ("nuts_longest_vs_mean", "NUTS steps, longest chain / mean"),
    ("build_s", "build s"),
    ("cold_build_s", "cold build s"),
    ("warm_build_s", "warm build s (new process)"),
]


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Bars of min ESS/s (log scale), grouped by model, one colour per sampler."""
    plt = pyplot()
    models = list(dict.fromkeys(r["model"] for r in rows))
    samplers = list(dict.fromkeys(r["sampler"] for r in rows))
    fig, ax = plt.subplots(figsize=(2.0 + 2.4 * len(models), 4.2))
    width = 0.8 / max(len(samplers), 1)
    for j, sampler in enumerate(samplers):
        xs, ys = [], []
        for i, model in enumerate(models):
            r = next((r for r in rows if (r["model"], r["sampler"]) == (model, sampler)), None)
            if r and r.get("min_ess_per_s", 0) > 0:
                xs.append(i + (j - (len(samplers) - 1) / 2) * width)
                ys.append(r["min_ess_per_s"])
        ax.bar(xs, ys, width=width, label=sampler)
    ax.set_yscale("log")
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("min bulk ESS per second (sampling, wall)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(fig, path)


def report(args, runs: list[dict], checks: dict, meta: dict) -> dict:
    """Summarise ``runs`` and write ``<out>/compiled_mixed.{json,md,png}``."""
    rows = summarize(runs)
    info = {**machine_info(), **device_info(), "load_after": load_info(), **meta}
    payload = {
        "protocol": {
            "tune": args.tune,
            "draws": args.draws,
            "quick": args.quick,
            "seed": args.seed,
            "pymc_chains": PYMC_CHAINS,
            "numpyro_chains": NUMPYRO_CHAINS,
            "jax_enable_x64": True,
        },
        "same_target_checks": checks,
        "machine": info,
        "rows": rows,
    }
    title = (
        f"tune {args.tune} + draws {args.draws} per chain; {info['platform']} "
        f"({info['device_kind']}), {info['cpus']} CPUs"
    )
    skipped = [f"- {r['model']}/{r['sampler']}: {r['skipped']}" for r in rows if "skipped" in r]
    md = [
        "# pymc_lbp.sample on mixed models (benchmarks/compiled_mixed.py)\n",
        f"{title}. Load average before/after: {info['load_before']} / {info['load_after']}.\n",
        markdown_table([r for r in rows if "skipped" not in r], COLUMNS, cell=_cell),
        "",
        f"\nSame-target checks (spread of PyMC - NumPyro log densities): {checks}\n",
    ]
    scaling = [
        f"- {r['model']}, {r['chains']} chains ({r['chain_method']}): "
        f"{r['wall_per_draw_vs_1_chain']:.2f}"
        for r in rows
        if r.get("wall_per_draw_vs_1_chain") is not None
    ]
    if scaling:
        md += ["\nlbp_sample_N: wall seconds per draw relative to lbp_sample_1:\n", *scaling, ""]
    if skipped:
        md += ["\nSkipped:\n", *skipped, ""]
    out = Path(args.out)
    write_results("compiled_mixed", payload, "\n".join(md), results=out)
    plot(rows, out / "compiled_mixed.png", title)
    payload["markdown"] = "\n".join(md)
    return payload


def _cell(v) -> str:
    """A table cell: numbers to 3 significant digits, None as "-"."""
    return "-" if v is None else compact_cell(v)


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the payload written to JSON (plus its markdown)."""
    parser = benchmark_parser(__doc__, quick="smoke run (coal_mining, tiny draws)")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--tune", type=int, help="warmup draws per chain (default 1000)")
    parser.add_argument("--draws", type=int, help="kept draws per chain (default 1000)")
    parser.add_argument(
        "--samplers",
        nargs="*",
        default=list(SAMPLERS),
        type=sampler_name,
        help=f"any of {', '.join(SAMPLERS)}; lbp_sample_N for any N chains (a GPU run: 1024)",
    )
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-build subprocess")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--mixedhmc-max-sites",
        type=int,
        default=100,
        help="skip MixedHMC on models with more discrete coordinates (default 100)",
    )
    parser.add_argument("--cold-only", help=argparse.SUPPRESS)
    add_out(parser)
    args = parser.parse_args(argv)
    default = 20 if args.quick else 1000
    args.tune = default if args.tune is None else args.tune
    args.draws = default if args.draws is None else args.draws
    if args.cold_only:
        spec = MODELS[args.cold_only]
        res = run_lbp(spec, 4, tune=args.tune, draws=args.draws, seed=args.seed)
        print(json.dumps({"build_time": res["build_s"]}))
        return res
    if args.quick and args.models == list(MODELS):
        args.models = ["coal_mining"]
    samplers = list(args.samplers)
    if args.quick:
        samplers = [s for s in samplers if s not in ("lbp_sample_32",)]
    if not numpyro_available():
        print("numpyro not installed: NumPyro samplers skipped", flush=True)
        samplers = [s for s in samplers if s not in NUMPYRO_SAMPLERS]
    have_numpyro = any(s in NUMPYRO_SAMPLERS for s in samplers)
    import jax

    # pymc_lbp.sample runs in float64 (it turns x64 on, as pytensor computes): so does NumPyro
    jax.config.update("jax_enable_x64", True)
    meta = {"load_before": load_info()}
    t_start = time.perf_counter()
    checks = {n: check_same_density(MODELS[n]) for n in args.models} if have_numpyro else {}
    runs: list[dict] = []
    for name in args.models:
        spec = MODELS[name]
        for sampler in samplers:
            kw = dict(tune=args.tune, draws=args.draws, seed=args.seed)
            if sampler.startswith("pymc_"):
                res = run_pymc(spec, sampler, **kw)
            elif sampler.startswith("lbp_sample_"):
                method = "sequential" if sampler.startswith("lbp_sample_seq_") else "vectorized"
                res = run_lbp(spec, int(sampler.rsplit("_", 1)[1]), **kw, chain_method=method)
                if sampler == "lbp_sample_4" and not args.no_cold:
                    cold, warm = new_process_builds(name, tune=args.tune, draws=args.draws)
                    res["cold_build_s"], res["warm_build_s"] = cold, warm
            else:
                res = run_numpyro(spec, sampler, **kw, mixedhmc_max_sites=args.mixedhmc_max_sites)
            res.update(model=name, sampler=sampler, tune=args.tune, draws=args.draws)
            runs.append(res)
            if "skipped" in res:
                print(f"{name:14s} {sampler:24s} skipped: {res['skipped']}", flush=True)
            else:
                print(
                    f"{name:14s} {sampler:24s} chains {res['chains']:3d} "
                    f"min ESS {res['min_ess']:8.1f} sampling {res['seconds']:7.2f}s "
                    f"min ESS/s {res['min_ess'] / max(res['seconds'], 1e-12):9.2f} "
                    f"build {res['build_s']:6.2f}s",
                    flush=True,
                )
        meta["elapsed_seconds"] = time.perf_counter() - t_start
        payload = report(args, runs, checks, meta)  # after every model: a crash keeps the rest
    print(payload["markdown"])
    return payload


if __name__ == "__main__":
    main()
