"""Reproduce the optimal-scaling experiments of Sun, Dai, Schuurmans (2022) with PathAuxiliaryLBP.

For each target (Bernoulli product, the appendix's Ising lattice, a factorial HMM, RBMs) this
measures, through ``pm.sample`` on the same model in the same run:

* LBP-1: single-site locally balanced proposals (``PathAuxiliaryLBP(path_scale=1)``);
* ALBP: ``PathAuxiliaryLBP()``, path length tuned toward acceptance 0.574;
* a grid of fixed path lengths R (the best of which is the paper's "GLBP");
* a sweep of ``target_accept`` (the paper's Figure 2: efficiency against realised acceptance);
* PyMC's BinaryMetropolis and BinaryGibbsMetropolis.

Reported per sampler: realised acceptance, expected jump distance (EJD) per MH step, ESS of the
Hamming distance to a fixed random state per step and per second. The markdown puts the ratio
EJD(ALBP) / EJD(LBP-1) next to the paper's Table 1.

Usage::

    python -m benchmarks.path_auxiliary_scaling                  # all targets (~10 min, 2 cores)
    python -m benchmarks.path_auxiliary_scaling --targets ising  # one target
    python -m benchmarks.path_auxiliary_scaling --quick          # smoke run (< 1 min)

Outputs (``--out``, default ``docs/results``): ``path_auxiliary_scaling.json`` (merged across
invocations, one entry per target), ``path_auxiliary_scaling.md`` and
``path_auxiliary_fig2_<target>.png``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread for every sampler alike
import json
import time
from pathlib import Path

import numpy as np
import pymc as pm

from benchmarks.common import (
    add_out,
    benchmark_parser,
    compact_cell,
    fmt,
    markdown_table,
    pyplot,
    save_figure,
)
from benchmarks.pas_common import RunResult, run_sampler
from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.models.bernoulli import bernoulli_product_model
from pymc_lbp.models.fhmm import fhmm_model
from pymc_lbp.models.ising_scaling import scaling_ising_model
from pymc_lbp.models.rbm import (
    binarized_digits,
    random_rbm_params,
    rbm_model,
    train_rbm_cd,
)

PAPER_TABLE1 = {"bernoulli": 78.6, "ising": 96.2, "fhmm": 242.0, "rbm": 26.1}
"""EJD(ALBP) / EJD(LBP-1) in Table 1 of Sun, Dai, Schuurmans (2022)."""


def _digits_rbm(quick: bool):
    data = binarized_digits()
    params = train_rbm_cd(data, n_hidden=50, epochs=3 if quick else 30, seed=0)
    return rbm_model(params, name="x")


# name -> (description, model builder(quick), full settings, quick settings); tune/draws: the
# 2-chain LBP-1, ALBP and PyMC runs; grid_tune/grid_draws: the 1-chain grid and sweep runs;
# gibbs: BinaryGibbsMetropolis sweeps per chain.
TARGETS = {
    "bernoulli": (
        "Bernoulli product, C2 (p_i in {0.15, 0.85}), D = 800",
        lambda q: bernoulli_product_model(100 if q else 800, config=2, seed=0),
        dict(
            tune=2000,
            draws=8000,
            grid_tune=1000,
            grid_draws=3000,
            gibbs=200,
            grid=[1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 256],
        ),
        dict(tune=100, draws=100, grid_tune=30, grid_draws=50, gibbs=4, grid=[1, 8]),
    ),
    "ising": (
        "Ising 50x50, C2 (mu = 0.15, sigma = 0.45, lambda = 0.15), open boundary",
        lambda q: scaling_ising_model(10 if q else 50, config=2, seed=0),
        dict(
            tune=2000,
            draws=8000,
            grid_tune=1000,
            grid_draws=3000,
            gibbs=150,
            grid=[1, 4, 16, 32, 64, 96, 128, 192, 256, 512],
        ),
        dict(tune=200, draws=400, grid_tune=100, grid_draws=200, gibbs=10, grid=[1, 8, 32]),
    ),
    "fhmm": (
        "Factorial HMM, L = 1000, K = 5, sigma = 1, alpha = 0.1, beta = 0.8",
        lambda q: fhmm_model(100 if q else 1000, 3 if q else 5, sigma=1.0, seed=0),
        dict(
            tune=2000,
            draws=6000,
            grid_tune=1000,
            grid_draws=3000,
            gibbs=30,
            grid=[1, 8, 32, 64, 128, 256, 512, 1024],
        ),
        dict(tune=200, draws=300, grid_tune=100, grid_draws=200, gibbs=5, grid=[1, 8]),
    ),
    "rbm": (
        "Random RBM, 100 visible / 25 hidden (W ~ N(0, 0.05), biases N(0, 1))",
        lambda q: rbm_model(random_rbm_params(100, 25, seed=0), name="x"),
        dict(
            tune=2000,
            draws=10000,
            grid_tune=1000,
            grid_draws=4000,
            gibbs=1000,
            grid=[1, 2, 4, 8, 16, 24, 32, 48, 64],
        ),
        dict(tune=200, draws=400, grid_tune=100, grid_draws=200, gibbs=20, grid=[1, 4]),
    ),
    "rbm_digits": (
        "RBM trained by CD-5 on the binarised 8x8 digits (64 visible / 50 hidden)",
        _digits_rbm,
        dict(
            tune=2000,
            draws=10000,
            grid_tune=1000,
            grid_draws=4000,
            gibbs=1000,
            grid=[1, 2, 4, 8, 12, 16, 24, 32, 48],
        ),
        dict(tune=200, draws=400, grid_tune=100, grid_draws=200, gibbs=20, grid=[1, 4]),
    ),
}

SWEEP = [0.2, 0.3, 0.4, 0.5, 0.65, 0.75, 0.85]
QUICK_SWEEP = [0.5]


def run_target(name: str, quick: bool, seed: int) -> dict:
    desc, build, full, small = TARGETS[name]
    cfg = small if quick else full
    model = build(quick)
    n_sites = int(np.prod(model.initial_point()["x"].shape))
    tune, draws = cfg["tune"], cfg["draws"]
    rows: list[RunResult] = []
    t_start = time.perf_counter()

    def pas(**kw):
        def make():
            # the grid's path steps use a fixed integer R as the paper's LBP-R does; like ALBP
            # they are mixed with the sampler's share of single-site steps (irreducibility)
            return PathAuxiliaryLBP(model.value_vars, **{"steps_per_draw": 1, **kw})

        return make

    def add(label, make, chains, **kw):
        res = run_sampler(
            model,
            make,
            label=label,
            draws=kw.get("draws", draws),
            tune=kw.get("tune", tune),
            chains=chains,
            seed=seed,
        )
        res.extra.update(kw.get("extra", {}))
        rows.append(res)
        print(
            f"  {name:10s} {label:24s} R={fmt(res.path_length)} acc={fmt(res.accept)} "
            f"EJD={fmt(res.ejd_per_step)} ESS/step={fmt(res.ess_per_step)} "
            f"ESS/s={fmt(res.ess_per_sec)} ESS/cpu-s={fmt(res.ess_per_cpu_sec)} "
            f"({res.time_s:.1f} s, cpu {res.cpu_s:.1f} s)",
            flush=True,
        )
        return res

    add("LBP-1", pas(path_scale=1), chains=2, extra={"role": "lbp1"})
    add("ALBP (0.574)", pas(), chains=2, extra={"role": "albp", "target_accept": 0.574})
    short = dict(tune=cfg["grid_tune"], draws=cfg["grid_draws"])
    for R in cfg["grid"]:
        if R == 1 or R > n_sites:
            continue
        add(f"fixed R = {R}", pas(path_scale=R), chains=1, extra={"role": "grid", "R": R}, **short)
    for target in QUICK_SWEEP if quick else SWEEP:
        add(
            f"adaptive, target {target}",
            pas(target_accept=target),
            chains=1,
            extra={"role": "sweep", "target_accept": target},
            **short,
        )
    add(
        "PyMC BinaryMetropolis",
        lambda: pm.BinaryMetropolis(model.value_vars),
        chains=2,
        extra={"role": "pymc"},
    )
    g = cfg["gibbs"]
    add(
        "PyMC BinaryGibbsMetropolis",
        lambda: pm.BinaryGibbsMetropolis(model.value_vars),
        chains=2,
        draws=g,
        tune=max(g // 5, 2),
        extra={"role": "pymc", "note": "one step = one sweep over all sites"},
    )
    out = {
        "target": name,
        "description": desc,
        "n_sites": n_sites,
        "quick": quick,
        "seed": seed,
        "wall_s": time.perf_counter() - t_start,
        "runs": [r.as_dict() for r in rows],
    }
    by_role = {r.extra.get("role"): r for r in rows if r.extra.get("role") in ("lbp1", "albp")}
    grid = [r for r in rows if r.extra.get("role") in ("grid", "lbp1")]
    best = max(grid, key=lambda r: r.ejd_per_step)
    out["glbp"] = {"label": best.label, "ejd_per_step": best.ejd_per_step, "accept": best.accept}
    lbp1 = by_role["lbp1"].ejd_per_step
    out["ratio_albp_lbp1_ejd"] = by_role["albp"].ejd_per_step / lbp1
    out["ratio_glbp_lbp1_ejd"] = best.ejd_per_step / lbp1
    out["paper_ratio_albp_lbp1_ejd"] = PAPER_TABLE1.get(name)
    if name == "bernoulli":
        lengths = [r for r in cfg["grid"] if r <= n_sites]
        out["independent"] = independent_product_curve(
            model.p, lengths, trials=50 if quick else 400, seed=seed
        )
        top = max(out["independent"], key=lambda r: r["ejd_per_step"])
        out["independent_max_ejd"] = top["ejd_per_step"]
    return out


def independent_product_curve(
    p: np.ndarray, lengths: list[int], trials: int, seed: int = 0
) -> list[dict]:
    """Acceptance and EJD of the sqrt-balanced path proposal on a product of Bernoullis, by an
    independent numpy simulation from exact stationary draws (no pymc_lbp code involved)."""
    rng = np.random.default_rng(seed)
    logit = np.log(p / (1 - p))

    def log_q(lw, order):
        w = np.exp(lw - lw.max())
        picked = w[order]
        remaining = w.sum() - np.concatenate(([0.0], np.cumsum(picked)[:-1]))
        return float(np.sum(np.log(picked) - np.log(remaining)))

    out = []
    for R in lengths:
        acc = []
        for _ in range(trials):
            x = (rng.random(p.size) < p).astype(float)
            d = (1 - 2 * x) * logit  # log pi(x^(i)) - log pi(x)
            lw = d / 2
            order = np.argsort(-(lw + rng.gumbel(size=p.size)))[:R]
            lw_y = lw.copy()
            lw_y[order] = -lw[order]
            log_ratio = d[order].sum() + log_q(lw_y, order[::-1]) - log_q(lw, order)
            acc.append(min(1.0, float(np.exp(min(log_ratio, 0.0)))))
        a = float(np.mean(acc))
        out.append({"R": R, "accept": a, "ejd_per_step": R * a})
    return out


def plot_fig2(result: dict, path: Path) -> None:
    plt = pyplot()
    runs = result["runs"]
    grid = [r for r in runs if r["extra"].get("role") in ("grid", "lbp1")]
    sweep = [r for r in runs if r["extra"].get("role") in ("sweep", "albp")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, ylabel in (
        (axes[0], "ejd_per_step", "EJD per step (sites)"),
        (axes[1], "ess_per_step", "ESS per step (Hamming)"),
    ):
        for pts, marker, lab in ((grid, "o", "fixed R"), (sweep, "s", "adaptive (target sweep)")):
            pts = sorted(pts, key=lambda r: r["accept"])
            ax.plot(
                [r["accept"] for r in pts], [r[key] for r in pts], marker=marker, ls="-", label=lab
            )
        both = grid + sweep
        top = max(both, key=lambda r: r[key])
        if key == "ejd_per_step" and result.get("independent"):
            ind = sorted(result["independent"], key=lambda r: r["accept"])
            ax.plot(
                [r["accept"] for r in ind],
                [r[key] for r in ind],
                "k.:",
                label="independent simulation",
            )
        ax.axvline(0.574, color="grey", ls="--", lw=1, label="0.574")
        ax.axvline(top["accept"], color="C3", ls=":", lw=1, label=f"peak at {top['accept']:.2f}")
        ax.set_xlabel("realised acceptance rate")
        ax.set_ylabel(ylabel)
        if key != "ejd_per_step":  # EJD on a linear scale shows the shape of the peak
            ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.suptitle(result["description"], fontsize=9)
    save_figure(fig, path)


def write_markdown(all_results: dict, path: Path, suffix: str = "") -> None:
    lines = [
        "# Path auxiliary sampler: optimal-scaling reproduction",
        "",
        "Generated by `benchmarks/path_auxiliary_scaling.py`. EJD = mean number of sites changed "
        "per MH step; ESS = ArviZ bulk ESS of the Hamming distance to a fixed random state over "
        "the post-tuning draws; times are the post-tuning CPU time (and wall-clock) of `pm.sample` "
        "(sequential chains, a 2-core machine shared with other jobs, so CPU time is the "
        "reproducible measure). PyMC's BinaryGibbsMetropolis counts one "
        "full sweep as one step.",
        "",
        "## Table 1: EJD(ALBP) / EJD(LBP-1)",
        "",
    ]
    rows = []
    for name, res in all_results.items():
        rows.append(
            {
                "target": name + (" (quick)" if res["quick"] else ""),
                "sites": res["n_sites"],
                "ours ALBP": res["ratio_albp_lbp1_ejd"],
                "ours GLBP": res["ratio_glbp_lbp1_ejd"],
                "GLBP": res["glbp"]["label"],
                "paper ALBP": res["paper_ratio_albp_lbp1_ejd"],
                "indep. max EJD": res.get("independent_max_ejd"),
            }
        )
    keys = ("target", "sites", "ours ALBP", "ours GLBP", "GLBP", "paper ALBP", "indep. max EJD")
    cols = [(k, k) for k in keys]
    lines += [markdown_table(rows, cols, cell=compact_cell), ""]
    cols = [
        ("label", "sampler"),
        ("path_length", "R"),
        ("accept", "accept"),
        ("ejd_per_step", "EJD/step"),
        ("ess", "ESS"),
        ("ess_per_step", "ESS/step"),
        ("ess_per_cpu_sec", "ESS/CPU-s"),
        ("ess_per_sec", "ESS/s (wall)"),
        ("cpu_sec_per_step", "CPU-s/step"),
        ("chains", "chains"),
        ("draws", "draws"),
    ]
    for name, res in all_results.items():
        lines += [f"## {name}: {res['description']}", ""]
        lines += [markdown_table(res["runs"], cols, cell=compact_cell), ""]
        lines += [f"![Figure 2 style](path_auxiliary_fig2_{name}{suffix}.png)", ""]
    path.write_text("\n".join(lines))


def main(argv=None) -> int:
    parser = benchmark_parser(__doc__, quick="smoke run: tiny models, few draws")
    parser.add_argument("--targets", nargs="*", default=list(TARGETS), choices=list(TARGETS))
    add_out(parser)
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument(
        "--replot", action="store_true", help="only redraw plots and markdown from the JSON"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    json_path = out / f"path_auxiliary_scaling{suffix}.json"
    results = json.loads(json_path.read_text()) if json_path.exists() else {}
    for name in args.targets:
        if args.replot:
            if name in results:
                plot_fig2(results[name], out / f"path_auxiliary_fig2_{name}{suffix}.png")
            continue
        print(f"[{name}]", flush=True)
        res = run_target(name, args.quick, args.seed)
        results[name] = res
        plot_fig2(res, out / f"path_auxiliary_fig2_{name}{suffix}.png")
        json_path.write_text(json.dumps(results, indent=1))
    ordered = {k: results[k] for k in TARGETS if k in results}
    write_markdown(ordered, out / f"path_auxiliary_scaling{suffix}.md", suffix)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
