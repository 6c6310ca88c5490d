"""FLSB vs Gibbs-with-Gradients on a restricted Boltzmann machine (Sansone 2022, section RBM).

Target: the visible marginal of a binary RBM with random parameters (no MNIST here),
``log pi(v) = b.v + sum_j softplus(c_j + W_j.v)``, written as a PyMC model (Bernoulli visibles +
a Potential). It is not multilinear, so first-order differences are approximations: FLSB
(``SelfBalancing(differences="gradient")``, LSB1 and LSB2) is compared with
``GibbsWithGradients`` (same first-order proposal with the sqrt function), with exact-difference
``LocallyBalanced(sqrt)`` and with PyMC's ``BinaryGibbsMetropolis`` (one draw = one sweep).

Ground truth: block Gibbs on (v, h) in numpy (independent chains, 300 sweeps each; with 2000
chains, 300 and 2000 sweeps gave visible marginals that agree within sampling noise: largest
|z| 2.6 over the 100 marginals). Measured
per sampler (medians over chains): ESS of the Hamming distance to a fixed reference state per
1000 single-site steps and per second of the sampling phase, the MMD between the sampler's draws
and ground-truth draws (kernel ``exp(-Hamming / V)``, unbiased estimate; the ground truth against
itself gives the noise floor), and the largest error of the visible marginals.

Writes docs/results/lsb_rbm.{json,md} and lsb_rbm.png.

Usage: python -m benchmarks.lsb_rbm [--quick] [--visible 100] [--hidden 50] [--chains 3]
"""

from __future__ import annotations

import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from benchmarks.common import (
    RESULTS,
    benchmark_parser,
    chain_seconds,
    draw_stamper,
    ess,
    machine_info,
    markdown_table,
    pyplot,
    save_figure,
    self_balancing_step,
    write_results,
)
from pymc_lbp import GibbsWithGradients, LocallyBalanced


def rbm_params(V: int, H: int, scale: float, seed: int):
    rng = np.random.default_rng(seed)
    W = rng.normal(0.0, scale, size=(H, V))
    b = rng.normal(0.0, 0.5, size=V)
    c = rng.normal(0.0, 0.5, size=H)
    return W, b, c


def rbm_model(W, b, c) -> pm.Model:
    with pm.Model() as model:
        v = pm.Bernoulli("v", logit_p=b, shape=b.size)
        pm.Potential("hidden", pt.sum(pt.softplus(c + pt.dot(W, v.astype("float64")))))
    return model


def block_gibbs(W, b, c, n_chains: int, burn: int, seed: int) -> np.ndarray:
    """Independent exact-ish draws: ``n_chains`` block-Gibbs chains after ``burn`` sweeps."""
    rng = np.random.default_rng(seed)
    v = (rng.random((n_chains, b.size)) < 0.5).astype(float)
    for _ in range(burn):
        h = (rng.random((n_chains, c.size)) < 1 / (1 + np.exp(-(c + v @ W.T)))).astype(float)
        v = (rng.random((n_chains, b.size)) < 1 / (1 + np.exp(-(b + h @ W)))).astype(float)
    return v.astype(np.int64)


def mmd2(x: np.ndarray, y: np.ndarray) -> float:
    """Unbiased MMD^2 with the kernel exp(-Hamming / V)."""
    V = x.shape[1]

    def k(a, b):
        ham = a @ (1 - b).T + (1 - a) @ b.T
        return np.exp(-ham / V)

    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    n, m = len(x), len(y)
    sxx = (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
    syy = (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
    return float(sxx + syy - 2 * kxy.mean())


def make_step(name, v, thin, particles, lr):
    if name == "GWG":
        return GibbsWithGradients([v], steps_per_draw=thin)
    if name == "LB-sqrt-exact":
        return LocallyBalanced([v], balancing="sqrt", differences="exact", steps_per_draw=thin)
    if name in ("FLSB1", "FLSB2"):
        parametrization = "lsb1" if name == "FLSB1" else "lsb2"
        return self_balancing_step(v, parametrization, thin=thin, particles=particles, lr=lr)
    return pm.BinaryGibbsMetropolis([v])


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__, quick="smoke run (< 1 minute)")
    parser.add_argument("--visible", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--scale", type=float, default=0.3, help="std of the RBM weights")
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--tune-steps", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=20000, help="sampling-phase MH steps")
    parser.add_argument("--thin", type=int, default=50)
    parser.add_argument("--sweeps", type=int, default=200, help="Gibbs sweeps (draws)")
    parser.add_argument("--particles", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--truth", type=int, default=1000, help="ground-truth draws")
    parser.add_argument("--truth-sweeps", type=int, default=300, help="block-Gibbs sweeps")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--name", default="lsb_rbm")
    args = parser.parse_args(argv)
    if args.quick:
        args.visible, args.hidden, args.chains = 30, 15, 1
        args.tune_steps, args.steps, args.sweeps, args.truth, args.thin = 300, 3000, 40, 300, 15
        args.name += "_quick"
    t_start = time.perf_counter()
    V = args.visible
    W, b, c = rbm_params(V, args.hidden, args.scale, args.seed)
    model = rbm_model(W, b, c)
    truth = block_gibbs(W, b, c, args.truth, burn=args.truth_sweeps, seed=args.seed + 1)
    truth2 = block_gibbs(W, b, c, args.truth, burn=args.truth_sweeps, seed=args.seed + 2)
    marg_truth = block_gibbs(W, b, c, 2 * args.truth, args.truth_sweeps, args.seed + 3).mean(0)
    reference = np.random.default_rng(args.seed + 4).integers(0, 2, size=V)
    with model:
        pm.Deterministic("ham", pt.neq(model["v"], reference).sum())
    rows, traces = [], {}
    for name in ("GWG", "FLSB1", "FLSB2", "LB-sqrt-exact", "PyMC-BinaryGibbs"):
        gibbs = name == "PyMC-BinaryGibbs"
        thin = V if gibbs else args.thin
        tune = 0 if gibbs else args.tune_steps // thin
        draws = args.sweeps if gibbs else args.steps // thin
        with model:
            step = make_step(name, model["v"], thin, args.particles, args.lr)
            callback, stamps, learned = draw_stamper(step, tune)
            t0 = time.perf_counter()
            idata = pm.sample(
                tune=tune, draws=draws, step=step, chains=args.chains, cores=1,
                random_seed=args.seed, progressbar=False, compute_convergence_checks=False,
                callback=callback,
            )  # fmt: skip
            seconds = time.perf_counter() - t0
        print(f"{name}: {seconds:.1f}s", flush=True)
        draws_v = idata.posterior["v"].values  # (chains, draws, V)
        ham = idata.posterior["ham"].values
        kilo = draws * thin / 1000.0
        ess_k, eps, mmds, merr = [], [], [], []
        _, sample_secs = chain_seconds(stamps, tune)
        for ch in range(args.chains):
            secs = sample_secs[ch]
            e = ess(ham[ch][None, :])
            ess_k.append(e / kilo)
            eps.append(e / secs)
            sub = draws_v[ch][np.linspace(0, draws - 1, min(draws, args.truth)).astype(int)]
            mmds.append(mmd2(sub.astype(float), truth.astype(float)))
            merr.append(float(np.max(np.abs(draws_v[ch].mean(0) - marg_truth))))
        ss = getattr(idata, "sample_stats", {})
        row = {
            "sampler": name,
            "ess_per_kstep": float(np.median(ess_k)),
            "ess_per_s": float(np.median(eps)),
            "mmd2": float(np.median(mmds)),
            "mmd2_text": f"{np.median(mmds):.2e}",
            "marginal_max_err": float(np.median(merr)),
            "accept": float(ss["accept"].mean()) if "accept" in ss else None,
            "seconds_total": seconds,
            "learned_params": learned,
        }
        if "lsb_weight_sqrt" in ss:
            row["weights"] = {
                k: float(ss[f"lsb_weight_{k}"].values[:, -1].mean())
                for k in ("sqrt", "barker", "min", "max")
            }
        rows.append(row)
        traces[name] = ham
    floor = mmd2(truth2.astype(float), truth.astype(float))
    elapsed = time.perf_counter() - t_start

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for r in rows:
        axes[0].bar(r["sampler"], r["ess_per_kstep"])
        axes[1].bar(r["sampler"], r["mmd2"])
    axes[1].axhline(floor, color="k", ls=":", label="ground truth vs itself")
    axes[0].set_ylabel("ESS(Hamming) per 1000 single-site steps")
    axes[1].set_ylabel("MMD^2 to block-Gibbs draws")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.suptitle(f"RBM V={V}, H={args.hidden}, weight scale {args.scale}")
    png = RESULTS / f"{args.name}.png"
    RESULTS.mkdir(parents=True, exist_ok=True)
    save_figure(fig, png)

    columns = [
        ("sampler", "sampler"),
        ("ess_per_kstep", "ESS/1k steps"),
        ("ess_per_s", "ESS/s"),
        ("mmd2_text", "MMD^2"),
        ("marginal_max_err", "max marginal err"),
        ("accept", "accept"),
        ("seconds_total", "total s"),
    ]
    md = (
        f"# FLSB vs GWG on an RBM ({'quick' if args.quick else 'default'} run)\n\n"
        f"V={V}, H={args.hidden}, W ~ N(0, {args.scale}^2), b, c ~ N(0, 0.5^2); {args.chains} "
        f"chains (medians); tuning {args.tune_steps} steps, sampling {args.steps} steps "
        f"(Gibbs: {args.sweeps} sweeps); {args.particles} FLSB particles, lr {args.lr}. "
        f"MMD^2 noise floor (ground truth vs ground truth): {floor:.2e}. Total {elapsed:.0f} s.\n\n"
        + markdown_table(rows, columns)
        + "\n"
    )
    payload = {
        "benchmark": args.name,
        "args": vars(args),
        "machine": machine_info(),
        "seconds": elapsed,
        "mmd2_floor": floor,
        "rows": rows,
    }
    j, m = write_results(args.name, payload, md)
    print(md)
    print(f"wrote {j}, {m}, {png} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
