"""A Gaussian mixture with an unknown number of active components (Wang et al. 2018, mixed blocks).

The model, as a PyMC user writes a sparse finite mixture: ``K = 12`` candidate components, each
with an active flag ``active[k] ~ Bernoulli(0.3)``, a mean ``mu[k] ~ Normal(0, 20)`` and an
unnormalised weight ``wt[k] ~ Gamma(2, 1)``; the data come from the active ones (weights
``active * wt`` renormalised, plus 1e-12 so that an inactive component's weight has a finite
gradient: with exact zeros the gradient of ``log w`` is NaN and NUTS diverges; a ``Potential``
forbids no active component), with a known sd. The data: 6 tight
clusters (sd 0.2, 100 points each) spread over [-27, 28]. Every chain starts with one active
component at 0, so the sampler must *find* the clusters: a component is born where data are
unexplained only if its flag turns on while its mean is near them.

Samplers (one chain each, through ``pm.sample``, tuning included in the clock):

``neural-mixed``
    ``NeuralMixedBlock([active, mu])`` with defaults (the shipped ``flag-value-g32`` proposal,
    trained on random grid profiles, never on this model: flag and mean proposed jointly) plus
    ``NUTS([mu, wt])``.
``pymc-default``
    What ``pm.sample()`` assigns: ``BinaryGibbsMetropolis`` on the flags, NUTS on the rest
    (single-site flag moves; an inactive mean wanders under its prior).
``locally-balanced``
    ``LocallyBalanced([active])`` (single-site informed flag moves) plus ``NUTS([mu, wt])``.
``neural-mixed-compiled``
    The same ``NeuralMixedBlock`` in :func:`pymc_lbp.sample`: its pair updates and BlackJAX's
    NUTS (on ``mu`` and ``wt``) in one compiled JAX program (the ``jax`` extra). The program
    runs as one call, so its draws are not stamped one by one: the run's sampling time is
    spread evenly over them (its build, compilation included, is the set-up, as PyMC's step
    construction and compilation are for the others).

Measured per draw: the wall time since the first step, the number of active components and the
data log-likelihood. Reported (medians over repeats): the time to first reach the true number of
components and to first reach a log-likelihood within 10 nats of the true parameters' value
(burn-in), the posterior frequency of each count over the draws after tuning, and the ESS per
second (ArviZ bulk ESS over the draws after tuning, divided by the whole run's wall time) of the
number of active components and of the log-likelihood.

Outputs: ``docs/results/gmm_active_components.{json,md,png}``.

Usage::

    python -m benchmarks.gmm_active_components               # 3 repeats, 300 tune + 600 draws
    python -m benchmarks.gmm_active_components --quick --out /tmp
"""

from __future__ import annotations

import logging
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.special import logsumexp

import pymc_lbp
from benchmarks.common import (
    add_out,
    benchmark_parser,
    load_info,
    machine_info,
    pyplot,
    save_figure,
    timed_sample,
    write_results,
)
from pymc_lbp import LocallyBalanced, NeuralMixedBlock

SAMPLERS = ("neural-mixed", "pymc-default", "locally-balanced", "neural-mixed-compiled")
K = 12
SD = 0.2
CENTRES = np.array([-27.0, -16.0, -5.0, 6.0, 17.0, 28.0])
LOGLIK_TOLERANCE = 10.0


def make_data(per_cluster: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(c, SD, per_cluster) for c in CENTRES])


def build_model(data: np.ndarray) -> pm.Model:
    start_active = np.r_[1, np.zeros(K - 1, dtype=np.int64)]
    with pm.Model() as model:
        active = pm.Bernoulli("active", 0.3, shape=K, initval=start_active)
        mu = pm.Normal("mu", 0.0, 20.0, shape=K, initval=np.zeros(K))
        wt = pm.Gamma("wt", 2.0, 1.0, shape=K)
        w = active * wt + 1e-12  # inactive: no weight for the data, finite gradients
        pm.Potential("some_active", pt.switch(pt.gt(active.sum(), 0), 0.0, -np.inf))
        pm.NormalMixture("x", w=w / w.sum(), mu=mu, sigma=SD, observed=data)
    return model


def log_likelihood(active: np.ndarray, mu: np.ndarray, wt: np.ndarray, data: np.ndarray):
    """Data log-likelihood of draws (n, K) of the flags, means and weights."""
    w = active * wt + 1e-12
    log_w = np.log(w / w.sum(axis=1, keepdims=True))
    z = (data[None, :, None] - mu[:, None, :]) / SD
    comp = log_w[:, None, :] - 0.5 * z**2 - np.log(SD) - 0.5 * np.log(2 * np.pi)
    return logsumexp(comp, axis=2).sum(axis=1)


def make_steps(name: str, model: pm.Model):
    with model:
        if name == "neural-mixed-compiled":  # NUTS is the program's, on every continuous one
            return [NeuralMixedBlock([model["active"], model["mu"]])]
        if name == "neural-mixed":
            return [
                NeuralMixedBlock([model["active"], model["mu"]]),
                pm.NUTS([model["mu"], model["wt"]]),
            ]
        if name == "locally-balanced":
            return [LocallyBalanced([model["active"]]), pm.NUTS([model["mu"], model["wt"]])]
        if name == "pymc-default":  # what pm.sample() assigns to this model
            return [
                pm.BinaryGibbsMetropolis([model["active"]]),
                pm.NUTS([model["mu"], model["wt"]]),
            ]
    raise ValueError(name)


def run_one(model, name: str, tune: int, draws: int, seed: int):
    """One chain; returns the idata, the per-draw time stamps and the set-up seconds."""
    if name == "neural-mixed-compiled":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pymc_lbp.sample(
                draws,
                tune=tune,
                chains=1,
                model=model,
                step=make_steps(name, model),
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
                discard_tuned_samples=False,
            )
        seconds = float(idata.posterior.attrs["sampling_time"])
        stamps = seconds * np.arange(1, tune + draws + 1) / (tune + draws)
        return idata, stamps, float(idata.posterior.attrs["build_time"])
    t0 = time.perf_counter()
    steps = make_steps(name, model)
    setup = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata, stamps = timed_sample(
            model, steps, draws, seed, tune=tune, discard_tuned_samples=False
        )
    return idata, stamps, setup


def first_time(stamps: np.ndarray, hit: np.ndarray) -> float | None:
    idx = np.flatnonzero(hit)
    return float(stamps[idx[0]]) if idx.size else None


def main(argv: list[str] | None = None) -> dict:
    ap = benchmark_parser(
        __doc__, quick="smoke run: few draws, less data", repeats=3, draws=600, tune=300
    )
    ap.add_argument("--per-cluster", type=int, default=100)
    ap.add_argument("--samplers", nargs="*", default=list(SAMPLERS))
    add_out(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.tune, args.draws, args.per_cluster = 1, 8, 12, 10
    logging.getLogger("pymc").setLevel(logging.ERROR)
    data = make_data(args.per_cluster)
    true_w = np.full(CENTRES.size, 1.0 / CENTRES.size)
    reference = float(
        log_likelihood(np.ones((1, CENTRES.size)), CENTRES[None], true_w[None], data)[0]
    )
    n_true = CENTRES.size
    rows, curves = [], {}
    for rep in range(args.repeats):
        for name in args.samplers:
            model = build_model(data)
            idata, stamps, setup = run_one(model, name, args.tune, args.draws, seed=100 + rep)
            parts = [idata.warmup_posterior, idata.posterior]
            get = {
                v: np.concatenate([p[v].values[0] for p in parts]) for v in ("active", "mu", "wt")
            }
            n_active = get["active"].sum(axis=1)
            loglik = log_likelihood(get["active"], get["mu"], get["wt"], data)
            after = slice(args.tune, None)
            seconds = float(stamps[-1])
            counts = np.bincount(n_active[after], minlength=K + 1) / args.draws
            row = {
                "sampler": name,
                "repeat": rep,
                "setup_seconds": setup,
                "seconds": seconds,
                "draws_per_second": (args.tune + args.draws) / seconds,
                "time_to_true_count": first_time(stamps, n_active == n_true),
                "time_to_loglik": first_time(stamps, loglik >= reference - LOGLIK_TOLERANCE),
                "count_frequencies": {str(k): float(c) for k, c in enumerate(counts) if c > 0},
                "mean_count": float(n_active[after].mean()),
                "mean_loglik": float(loglik[after].mean()),
                "ess_count_per_second": float(az.ess(n_active[after].astype(float))) / seconds,
                "ess_loglik_per_second": float(az.ess(loglik[after])) / seconds,
            }
            stats = idata.sample_stats
            row["divergences"] = int(stats["diverging"].values.sum())
            row["accept"] = (
                float(stats["accept"].values.mean()) if name.startswith("neural-mixed") else None
            )
            rows.append(row)
            curves[(name, rep)] = (stamps, n_active, loglik)
            print(
                f"rep {rep} {name:17s}: {seconds:.1f}s, true count at {row['time_to_true_count']}"
                f" s, loglik at {row['time_to_loglik']} s, mean count {row['mean_count']:.2f}, "
                f"ESS/s count {row['ess_count_per_second']:.2f} loglik "
                f"{row['ess_loglik_per_second']:.2f}",
                flush=True,
            )
    payload = {
        "meta": {
            "repeats": args.repeats,
            "tune": args.tune,
            "draws": args.draws,
            "per_cluster": args.per_cluster,
            "K": K,
            "centres": CENTRES.tolist(),
            "sd": SD,
            "reference_loglik": reference,
            "machine": machine_info(),
            "load": load_info(),
        },
        "rows": rows,
    }
    write_outputs(payload, curves, args)
    return payload


def _median(values) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "never"
    med = float(np.median(vals))
    missing = len(values) - len(vals)
    return f"{med:.2f}" + (f" ({missing} never)" if missing else "")


def write_outputs(payload: dict, curves: dict, args) -> None:
    stem = "gmm_active_components" + ("_quick" if args.quick else "")
    rows = payload["rows"]
    meta = payload["meta"]
    lines = [
        f"Gaussian mixture with unknown active components: {len(CENTRES)} clusters of "
        f"{args.per_cluster} points (sd {SD:g}), K = {K} candidates, start with one active "
        f"component; one chain, {args.tune} tuning + {args.draws} draws, median over "
        f"{args.repeats} repeat(s). Times in seconds from the first step. Machine: "
        f"{meta['machine'].get('cpus')} CPUs, load {meta['load']}.",
        "",
        "| sampler | time to true count | time to log-lik within 10 | P(count = 6) | "
        "mean count | ESS/s count | ESS/s log-lik | draws/s | accept | NUTS divergences |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in args.samplers:
        rs = [r for r in rows if r["sampler"] == name]
        if not rs:
            continue
        acc = [r["accept"] for r in rs if r["accept"] is not None]
        lines.append(
            f"| {name} | {_median([r['time_to_true_count'] for r in rs])} | "
            f"{_median([r['time_to_loglik'] for r in rs])} | "
            f"{np.median([r['count_frequencies'].get(str(len(CENTRES)), 0.0) for r in rs]):.3f} | "
            f"{np.median([r['mean_count'] for r in rs]):.2f} | "
            f"{np.median([r['ess_count_per_second'] for r in rs]):.2f} | "
            f"{np.median([r['ess_loglik_per_second'] for r in rs]):.2f} | "
            f"{np.median([r['draws_per_second'] for r in rs]):.1f} | "
            + (f"{np.median(acc):.3f}" if acc else "-")
            + f" | {np.median([r['divergences'] for r in rs]):.0f} |"
        )
    lines += ["", f"Log-likelihood at the true parameters: {meta['reference_loglik']:.1f}."]
    _, md_path = write_results(stem, payload, "\n".join(lines) + "\n", args.out, indent=1)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    colors = {n: f"C{i}" for i, n in enumerate(SAMPLERS)}
    for (name, rep), (stamps, n_active, loglik) in curves.items():
        label = name if rep == 0 else None
        axes[0].step(
            stamps, n_active, where="post", color=colors[name], lw=1.0, alpha=0.8, label=label
        )
        axes[1].plot(
            stamps,
            np.maximum(loglik, meta["reference_loglik"] - 5000),
            color=colors[name],
            lw=0.9,
            alpha=0.8,
            label=label,
        )
    axes[0].axhline(len(CENTRES), color="k", lw=0.6, ls=":")
    axes[1].axhline(meta["reference_loglik"], color="k", lw=0.6, ls=":")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("wall time (s)")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("active components")
    axes[1].set_ylabel("data log-likelihood (floored)")
    axes[1].set_yscale("symlog", linthresh=100)
    axes[0].legend(fontsize=8)
    save_figure(fig, md_path.with_suffix(".png"))


if __name__ == "__main__":
    main()
