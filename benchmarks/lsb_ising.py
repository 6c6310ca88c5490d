"""LSB reproduction: Ising image segmentation (Sansone 2022, cases 1-4), burn-in and ESS.

Samplers: the four fixed balancing functions (``LocallyBalanced``: sqrt, barker, min, max),
``SelfBalancing`` LSB1 and LSB2 (learning during the burn-in, 30 particles, Adam lr 1e-2, as in
the paper), and PyMC's ``BinaryGibbsMetropolis`` (one draw = one sweep of 900 site updates), all
through ``pm.sample`` in one run, one core, the same random starting states for every sampler.

Protocol (following the paper's code): 30x30 torus, ``log pi = sum alpha_i s_i + lam sum s_i
s_j``; burn-in 2000 single-site steps (cases 1 and 3) or 800 (cases 2 and 4) from a uniformly
random state, then the sampling phase. All LBP samplers use first-order neighbour differences,
which are *exact* on this multilinear target (tested), so the kernels are those of exact LSB;
we count work in *oracle calls* (one call = the log-ratios to all 900 neighbours, which exact
differences would compute with 901 logp evaluations).

Measured per sampler: burn-in hitting time (median over chains of the first single-site step at
which the magnetisation is within ``--band`` posterior standard deviations of the posterior mean),
ArviZ ESS (pooled over chains) of the magnetisation and of the Hamming distance to a fixed random
reference state, per 1000 steps and per second of the sampling phase, acceptance rate, tuning and
sampling seconds, and the learned balancing functions.

Writes docs/results/lsb_ising.{json,md}, lsb_ising_burnin.png, lsb_ising_functions.png.

Usage: python -m benchmarks.lsb_ising [--quick] [--cases 1 2 3 4] [--chains 3] [--steps 6000]
"""

from __future__ import annotations

import time

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
from pymc_lbp.models import LSB_CASES, segmentation_model

FIXED = FIXED_BALANCING
LEARNED = ("lsb1", "lsb2")
BURN_IN = {1: 2000, 2: 800, 3: 2000, 4: 800}  # the paper's runner.sh
COLORS = {
    "sqrt": "c",
    "barker": "b",
    "min": "g",
    "max": "k",
    "lsb1": "tab:red",
    "lsb2": "tab:orange",
    "PyMC-BinaryGibbs": "tab:purple",
}


def run_sampler(model, name, starts, *, tune, draws, thin, n_particles, lr, seed):
    """pm.sample one sampler from the given starting states; traces, times, learned params."""
    x = model["x"]
    with model:
        step = lsb_step(name, x, learned=LEARNED, thin=thin, particles=n_particles, lr=lr)
        callback, stamps, learned = draw_stamper(step, tune)
        t0 = time.perf_counter()
        idata = pm.sample(
            tune=tune,
            draws=draws,
            step=step,
            chains=len(starts),
            cores=1,
            initvals=[{"x": s} for s in starts],
            var_names=["mag", "ham"],
            discard_tuned_samples=False,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
            callback=callback,
        )
        total = time.perf_counter() - t0
    out = {"idata": idata, "stamps": stamps, "learned": learned, "seconds": total, "step": step}
    return out


def summarise(name, res, starts, *, tune, site_updates_per_draw, m_star, band):
    """Burn-in hit times (per chain) and pooled ESS of one sampler's run."""
    idata = res["idata"]
    post_mag = idata.posterior["mag"].values
    post_ham = idata.posterior["ham"].values
    chains, draws = post_mag.shape
    if tune:
        warm = idata.warmup_posterior["mag"].values
        full = np.concatenate([warm, post_mag], axis=1)
    else:
        full = post_mag
    mag0 = np.array([(2.0 * s - 1).mean() for s in starts])[:, None]
    trace = np.concatenate([mag0, full], axis=1)  # step 0 = the start
    steps = np.arange(trace.shape[1]) * site_updates_per_draw
    hit = []
    for c in range(chains):
        inside = np.flatnonzero(np.abs(trace[c] - m_star) <= band)
        hit.append(float(steps[inside[0]]) if inside.size else float("nan"))
    tune_secs, sample_secs = chain_seconds(res["stamps"], tune)
    ess_mag = ess(post_mag)
    ess_ham = ess(post_ham)
    kilo_steps = chains * draws * site_updates_per_draw / 1000.0
    ss = getattr(idata, "sample_stats", {})
    row = {
        "sampler": name,
        "burnin_hit_steps": float(np.nanmedian(hit)) if np.isfinite(hit).any() else None,
        "burnin_hit_all": hit,
        "ess_mag_per_kstep": ess_mag / kilo_steps,
        "ess_ham_per_kstep": ess_ham / kilo_steps,
        "ess_mag_per_s": ess_mag / float(np.sum(sample_secs)),
        "ess_ham_per_s": ess_ham / float(np.sum(sample_secs)),
        "ess_mag": ess_mag,
        "ess_ham": ess_ham,
        "tune_seconds": float(np.median(tune_secs)),
        "sample_seconds": float(np.median(sample_secs)),
        "accept": float(ss["accept"].mean()) if "accept" in ss else None,
        "post_mag_mean": float(post_mag.mean()),
        "learned_params": res["learned"],
    }
    if name == "lsb1" and res["learned"]:
        row["learned_weights"] = lsb1_weights(res["learned"])
    if "grad_evals" in ss:  # pymc_lbp steps
        warm_calls = idata.warmup_sample_stats["grad_evals"].values if tune else None
        row["oracle_calls_tune"] = float(np.median(warm_calls.sum(1))) if tune else 0.0
        row["oracle_calls_sample"] = float(np.median(ss["grad_evals"].values.sum(1)))
        calls = ss["grad_evals"].values
        if tune:
            calls = np.concatenate([warm_calls, calls], axis=1)
        row["_calls"] = np.concatenate([np.zeros((chains, 1)), np.cumsum(calls, 1)], 1)
    row["_trace"] = trace
    row["_steps"] = steps
    return row


def learned_function(name, params):
    from pymc_lbp.samplers.self_balancing.parametrizations import make_parametrization

    par = make_parametrization(name)
    return lambda d: par.log_g(d, np.asarray(params))


def plot(results, path_burnin, path_functions, args):
    from pymc_lbp.samplers.balancing import BALANCING_FUNCTIONS

    plt = pyplot()
    cases = list(results)
    fig, axes = plt.subplots(2, len(cases), figsize=(4.2 * len(cases), 7), squeeze=False)
    for j, case in enumerate(cases):
        res = results[case]
        for row in res["rows"]:
            name = row["sampler"]
            tr, steps = row["_trace"], row["_steps"]
            keep = steps <= res["burn_in"] * 3
            med = np.median(tr, 0)
            ax = axes[0, j]
            ax.plot(steps[keep], med[keep], color=COLORS[name], label=name, lw=1.5)
            ax.fill_between(
                steps[keep], tr.min(0)[keep], tr.max(0)[keep], color=COLORS[name], alpha=0.12
            )
            if "_calls" in row:
                calls = np.median(row["_calls"], 0)
                axes[1, j].plot(calls[keep], med[keep], color=COLORS[name], label=name, lw=1.5)
        for ax in axes[:, j]:
            ax.axhline(res["m_star"], color="0.5", ls=":", lw=1)
        lam, mu, sigma = LSB_CASES[case]
        axes[0, j].set_title(f"case {case}: lambda={lam:g}, mu={mu:g}, sigma={sigma:g}")
        axes[0, j].set_xlabel("single-site updates (Gibbs: 900 per sweep)")
        axes[1, j].set_xlabel("oracle calls (log-ratios to all neighbours), particles included")
        axes[1, j].set_xscale("log")
        axes[0, j].set_ylabel("magnetisation")
        axes[1, j].set_ylabel("magnetisation")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(
        f"Burn-in, median of {args.chains} chains (band: min..max); dotted: posterior mean"
    )
    save_figure(fig, path_burnin)

    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.6), squeeze=False)
    d = np.linspace(-6, 6, 241)  # d[120] == 0
    for j, case in enumerate(cases):
        ax = axes[0, j]
        for k in FIXED:
            even = BALANCING_FUNCTIONS[k](d) - d / 2
            ax.plot(d, even - even[120], color=COLORS[k], label=k, lw=1)
        for row in results[case]["rows"]:
            if row["sampler"] in LEARNED:
                for c, params in row["learned_params"].items():
                    even = learned_function(row["sampler"], params)(d) - d / 2
                    ax.plot(
                        d, even - even[120], color=COLORS[row["sampler"]], lw=1.5, alpha=0.7,
                        label=row["sampler"] if c == 0 else None,
                    )  # fmt: skip
        ax.set_title(f"case {case}: log g(e^d) - d/2, shifted to 0 at d=0", fontsize=9)
        ax.set_xlabel("d = log pi(y)/pi(x)")
    axes[0, 0].legend(fontsize=8)
    save_figure(fig, path_functions)


def main(argv=None) -> None:
    parser = benchmark_parser(__doc__, quick="smoke run (< 1 minute)")
    parser.add_argument("--cases", type=int, nargs="*", default=sorted(LSB_CASES))
    parser.add_argument("--chains", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6000, help="sampling-phase steps")
    parser.add_argument("--thin", type=int, default=10, help="MH steps per recorded draw")
    parser.add_argument("--sweeps", type=int, default=100, help="Gibbs sweeps after burn-in")
    parser.add_argument("--particles", type=int, default=30)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument(
        "--band", type=float, default=2.0, help="burn-in hit: within this many posterior sd"
    )
    parser.add_argument("--seed", type=int, default=2022)
    parser.add_argument("--name", default="lsb_ising")
    args = parser.parse_args(argv)
    burn_in = dict(BURN_IN)
    if args.quick:
        args.cases, args.chains, args.steps, args.sweeps = [3], 1, 1500, 10
        burn_in = {3: 300}
        args.name += "_quick"
    t_start = time.perf_counter()
    results = {}
    for case in args.cases:
        model = segmentation_model(case, n=30, seed=0)
        rng = np.random.default_rng(args.seed + case)
        reference = rng.integers(0, 2, size=(30, 30))
        with model:
            pm.Deterministic("mag", (2 * model["x"] - 1).mean())
            pm.Deterministic("ham", pt.neq(model["x"], reference).sum())
        starts = [rng.integers(0, 2, size=(30, 30)) for _ in range(args.chains)]
        b = burn_in[case]
        raw = {}
        for name in (*FIXED, *LEARNED, "PyMC-BinaryGibbs"):
            gibbs = name == "PyMC-BinaryGibbs"
            tune = 0 if gibbs else b // args.thin
            draws = (b // 900 + 1 + args.sweeps) if gibbs else args.steps // args.thin
            raw[name] = run_sampler(
                model, name, starts, tune=tune, draws=draws, thin=args.thin,
                n_particles=args.particles, lr=args.lr, seed=args.seed,
            )  # fmt: skip
            print(f"case {case} {name}: {raw[name]['seconds']:.1f}s", flush=True)
        lbp = [raw[k]["idata"].posterior["mag"].values for k in (*FIXED, *LEARNED)]
        m_star = float(np.mean([m.mean() for m in lbp]))
        # the stationary band: 2 sd of the magnetisation under the posterior (pooled draws)
        band = args.band * float(np.std(np.concatenate([m.ravel() for m in lbp])))
        rows = []
        for name, res in raw.items():
            gibbs = name == "PyMC-BinaryGibbs"
            rows.append(
                summarise(
                    name, res, starts, tune=0 if gibbs else b // args.thin,
                    site_updates_per_draw=900 if gibbs else args.thin, m_star=m_star,
                    band=band,
                )
            )  # fmt: skip
        best_fixed = min(
            (r for r in rows if r["sampler"] in FIXED),
            key=lambda r: r["burnin_hit_steps"] if r["burnin_hit_steps"] else np.inf,
        )
        for r in rows:
            if r["burnin_hit_steps"] and best_fixed["burnin_hit_steps"]:
                r["burnin_speedup_vs_best_fixed"] = (
                    best_fixed["burnin_hit_steps"] / r["burnin_hit_steps"]
                )
        results[case] = {"rows": rows, "m_star": m_star, "burn_in": b, "band": band}
    elapsed = time.perf_counter() - t_start

    RESULTS.mkdir(parents=True, exist_ok=True)
    png_burn = RESULTS / f"{args.name}_burnin.png"
    png_fun = RESULTS / f"{args.name}_functions.png"
    plot(results, png_burn, png_fun, args)
    columns = [
        ("sampler", "sampler"),
        ("burnin_hit_steps", "burn-in hit (steps)"),
        ("burnin_speedup_vs_best_fixed", "speed-up vs best fixed"),
        ("ess_mag_per_kstep", "ESS(mag)/1k steps"),
        ("ess_ham_per_kstep", "ESS(Hamming)/1k steps"),
        ("ess_mag_per_s", "ESS(mag)/s"),
        ("ess_ham_per_s", "ESS(Hamming)/s"),
        ("accept", "accept"),
        ("oracle_calls_tune", "oracle calls, burn-in"),
        ("tune_seconds", "burn-in s"),
        ("sample_seconds", "sampling s"),
    ]
    parts = [
        f"# LSB Ising segmentation ({'quick' if args.quick else 'default'} run)\n",
        f"{args.chains} chains per sampler (medians), sampling phase {args.steps} single-site "
        f"steps (Gibbs: {args.sweeps} sweeps), thin {args.thin}, {args.particles} LSB particles, "
        f"lr {args.lr}; burn-in hit = first step within {args.band:g} posterior sd of the "
        f"posterior mean magnetisation; ESS pooled over chains (ArviZ); total {elapsed:.0f} s.\n",
    ]
    for case, res in results.items():
        lam, mu, sigma = LSB_CASES[case]
        parts.append(
            f"\n## Case {case} (lambda={lam:g}, mu={mu:g}, sigma={sigma:g}); burn-in "
            f"{res['burn_in']} steps; posterior mean magnetisation {res['m_star']:.3f} "
            f"(band +-{res['band']:.3f})\n\n"
        )
        parts.append(markdown_table(res["rows"], columns) + "\n")
        for r in res["rows"]:
            if "learned_weights" in r:
                parts.append(f"\nLSB1 learned weights (mean over chains): {r['learned_weights']}\n")
    markdown = "".join(parts)
    payload = {
        "benchmark": args.name,
        "args": vars(args),
        "machine": machine_info(),
        "seconds": elapsed,
        "cases": {
            str(case): {
                "m_star": res["m_star"],
                "band": res["band"],
                "burn_in": res["burn_in"],
                "rows": [
                    {k: v for k, v in r.items() if not k.startswith("_")} for r in res["rows"]
                ],
                "burnin_traces": {
                    r["sampler"]: {
                        "steps": r["_steps"].tolist(),
                        "median_mag": np.median(r["_trace"], 0).round(5).tolist(),
                    }
                    for r in res["rows"]
                },
            }
            for case, res in results.items()
        },
    }
    j, m = write_results(args.name, payload, markdown)
    print(markdown)
    print(f"wrote {j}, {m}, {png_burn}, {png_fun} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
