"""LSB on the UAI 2006 network BN_1 (Sansone 2022, UAI experiments; BN_8 is not available).

BN_1: 100 binary variables, 100 CPT factors of up to 7 variables, no evidence, smallest CPT entry
4.8e-4 (see the shipped networks' README). Read with ``pymc_lbp.models.read_uai`` as a MARKOV
network; first-order differences are exact on it (the potentials are one-hot contractions of
tables, multilinear; checked at run time below), so every LBP sampler runs on them.

Protocol (after the paper's ``UAI/runner.sh``): all chains start at the all-zeros state, burn-in
500 single-site steps (LSB learns during it), then the sampling phase. Samplers: the four fixed
functions, LSB1, LSB2, the LSB2 min-variant, and PyMC's ``BinaryGibbsMetropolis`` (one draw = one
sweep of 100 site updates). Measured: burn-in trace of the number of ones (the paper's
statistic), mean and max absolute error of the 100 marginals after burn-in against the exact
marginals (BN_1.uai.MAR), ArviZ ESS (pooled over chains) of the Hamming distance to a fixed
reference state per 1000 steps and per second of the sampling phase, acceptance rate, times.
"expected MC err" is the mean error that Monte Carlo noise alone gives at the measured per-variable
ESS (``sqrt(2/pi) sqrt(p(1-p)/ESS)``, averaged): an exact sampler should be near it.

Writes docs/results/lsb_uai.{json,md} and lsb_uai.png.

Usage: python -m benchmarks.lsb_uai [--quick] [--chains 3] [--steps 4000]
"""

from __future__ import annotations

import time

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt

from benchmarks.common import (
    FIXED_BALANCING,
    RESULTS,
    benchmark_parser,
    chain_seconds,
    draw_stamper,
    ess,
    lsb1_weights,
    lsb_step,
    machine_info,
    markdown_table,
    pyplot,
    save_figure,
    write_results,
)
from pymc_lbp import LocallyBalanced
from pymc_lbp.models import read_mar, read_uai
from pymc_lbp.models.uai import NETWORKS

DATA = NETWORKS / "uai2006_bn"
FIXED = FIXED_BALANCING
LEARNED = ("lsb1", "lsb2", "lsb2_min")


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--network", default="BN_1")
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--burn-in", type=int, default=500)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--thin", type=int, default=10)
    parser.add_argument("--sweeps", type=int, default=60)
    parser.add_argument("--particles", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--name", default="lsb_uai")
    args = parser.parse_args(argv)
    samplers = (*FIXED, *LEARNED, "PyMC-BinaryGibbs")
    if args.quick:
        args.chains, args.burn_in, args.steps, args.sweeps = 1, 100, 500, 5
        samplers = ("sqrt", "lsb2", "PyMC-BinaryGibbs")
        args.name += "_quick"
    path = DATA / f"{args.network}.uai"
    if not path.exists():
        raise SystemExit(f"{path} not found")
    t_start = time.perf_counter()
    model = read_uai(path, kind="MARKOV")
    (x,) = model.free_RVs
    n = int(np.prod(model.initial_point()[x.name].shape))
    exact = np.array([m[1] for m in read_mar(f"{path}.MAR")])
    reference = np.random.default_rng(args.seed).integers(0, 2, size=n)
    with model:
        pm.Deterministic("ones", x.sum())
        pm.Deterministic("ham", pt.neq(x, reference).sum())
    start = np.zeros(n, dtype=np.int64)
    rows, traces = [], {}
    for name in samplers:
        gibbs = name == "PyMC-BinaryGibbs"
        thin = n if gibbs else args.thin
        tune = 0 if gibbs else args.burn_in // thin
        draws = args.sweeps if gibbs else args.steps // thin
        with model:
            step = lsb_step(
                name, x, learned=LEARNED, thin=thin, particles=args.particles, lr=args.lr
            )
            if name == "sqrt":  # first-order differences are exact here: check
                _, d_grad = step.differences(start)
                ex = LocallyBalanced([x], differences="exact")
                _, d_exact = ex.differences(start)
                err = float(np.max(np.abs(d_grad - d_exact)))
                assert err < 1e-8, err

            callback, stamps, learned = draw_stamper(step, tune)
            t0 = time.perf_counter()
            idata = pm.sample(
                tune=tune, draws=draws, step=step, chains=args.chains, cores=1,
                initvals=[{x.name: start}] * args.chains, var_names=[x.name, "ones", "ham"],
                discard_tuned_samples=False, random_seed=args.seed, progressbar=False,
                compute_convergence_checks=False, callback=callback,
            )  # fmt: skip
            seconds = time.perf_counter() - t0
        print(f"{name}: {seconds:.1f}s", flush=True)
        post = idata.posterior[x.name].values.reshape(args.chains, draws, n)
        ham = idata.posterior["ham"].values
        ones = idata.posterior["ones"].values
        if tune:
            ones = np.concatenate([idata.warmup_posterior["ones"].values, ones], axis=1)
        traces[name] = (np.arange(ones.shape[1] + 1) * thin, np.concatenate(
            [np.zeros((args.chains, 1)), ones], axis=1
        ))  # fmt: skip
        tune_secs, secs = chain_seconds(stamps, tune)
        marg = post.mean(axis=(0, 1))
        ess_ham = ess(ham)
        # Monte Carlo reference for the marginal error: E|p_hat - p| ~ sqrt(2/pi) * se_i with
        # se_i = sqrt(p_i (1 - p_i) / ESS_i), ESS_i the ArviZ ESS of variable i's 0/1 series
        ess_i = np.array(
            [float(az.ess(post[:, :, i])) if np.ptp(post[:, :, i]) else 1.0 for i in range(n)]
        )
        mc_err = float(np.mean(np.sqrt(2 / np.pi * exact * (1 - exact) / ess_i)))
        ss = getattr(idata, "sample_stats", {})
        row = {
            "sampler": name,
            "marg_mean_abs_err": float(np.mean(np.abs(marg - exact))),
            "marg_max_abs_err": float(np.max(np.abs(marg - exact))),
            "marg_err_mc_expected": mc_err,
            "ess_per_kstep": ess_ham / (args.chains * draws * thin / 1000.0),
            "ess_per_s": ess_ham / float(np.sum(secs)),
            "accept": float(ss["accept"].mean()) if "accept" in ss else None,
            "tune_seconds": float(np.median(tune_secs)),
            "sample_seconds": float(np.median(secs)),
            "learned_params": learned,
        }  # fmt: skip
        if name == "lsb1" and learned:
            row["learned_weights"] = lsb1_weights(learned)
        rows.append(row)
    elapsed = time.perf_counter() - t_start

    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
    colors = dict(zip(samplers, plt.cm.tab10(np.arange(len(samplers))), strict=True))
    exact_ones = exact.sum()
    for name, (steps, tr) in traces.items():
        keep = steps <= 3 * args.burn_in
        ax[0].plot(steps[keep], np.median(tr, 0)[keep], color=colors[name], label=name)
    ax[0].axhline(exact_ones, color="k", ls=":", label="exact E[#ones]")
    ax[0].set_xlabel("single-site updates (Gibbs: 100 per sweep)")
    ax[0].set_ylabel("number of ones (median over chains)")
    ax[0].legend(fontsize=7, ncol=2)
    for r in rows:
        ax[1].bar(r["sampler"], r["marg_mean_abs_err"], color=colors[r["sampler"]])
    ax[1].set_ylabel("mean |marginal - exact| after burn-in")
    ax[1].tick_params(axis="x", rotation=30, labelsize=8)
    fig.suptitle(f"{args.network}: burn-in from all zeros, and marginal error")
    RESULTS.mkdir(parents=True, exist_ok=True)
    png = RESULTS / f"{args.name}.png"
    save_figure(fig, png)

    columns = [
        ("sampler", "sampler"),
        ("marg_mean_abs_err", "mean marginal err"),
        ("marg_err_mc_expected", "expected MC err"),
        ("marg_max_abs_err", "max marginal err"),
        ("ess_per_kstep", "ESS(Hamming)/1k steps"),
        ("ess_per_s", "ESS(Hamming)/s"),
        ("accept", "accept"),
        ("tune_seconds", "burn-in s"),
        ("sample_seconds", "sampling s"),
    ]
    md = (
        f"# LSB on UAI {args.network} ({'quick' if args.quick else 'default'} run)\n\n"
        f"{args.chains} chains from all zeros; burn-in {args.burn_in} steps, sampling "
        f"{args.steps} steps (Gibbs: {args.sweeps} sweeps), thin {args.thin}; "
        f"{args.particles} LSB particles, lr {args.lr}; exact E[#ones] = {exact_ones:.2f}. "
        f"Total {elapsed:.0f} s.\n\n" + markdown_table(rows, columns) + "\n"
    )
    for r in rows:
        if "learned_weights" in r:
            md += f"\nLSB1 learned weights (mean over chains): {r['learned_weights']}\n"
    payload = {
        "benchmark": args.name,
        "args": vars(args),
        "machine": machine_info(),
        "seconds": elapsed,
        "exact_ones": float(exact_ones),
        "rows": rows,
        "burnin_traces": {
            k: {"steps": s.tolist(), "median_ones": np.median(t, 0).tolist()}
            for k, (s, t) in traces.items()
        },
    }
    j, m = write_results(args.name, payload, md)
    print(md)
    print(f"wrote {j}, {m}, {png} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
