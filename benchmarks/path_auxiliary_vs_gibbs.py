"""PathAuxiliaryLBP against PyMC's default for binary variables (BinaryGibbsMetropolis).

Cases: the LSB image-segmentation Ising posteriors 1-4 (30x30 torus, Sansone 2022) and the
50x50 Ising of the optimal-scaling paper (open boundary, C2). Each repeat runs both samplers
through ``pm.sample`` on the same model, one after the other (2 chains each, sequential), and
measures ESS per second of the Hamming distance to a fixed random state (and of the
magnetisation). Reported: medians over repeats and the median of the per-repeat ratios.

``--profile`` adds a cProfile breakdown of a PathAuxiliaryLBP run on the 50x50 Ising: where the
time of a step goes (compiled differences, the numba kernel, PyMC's per-draw machinery).

Usage::

    python -m benchmarks.path_auxiliary_vs_gibbs             # ~10 min on 2 cores
    python -m benchmarks.path_auxiliary_vs_gibbs --quick     # smoke run (< 1 min)

Outputs (``--out``, default ``docs/results``): ``path_auxiliary_vs_gibbs.json`` and ``.md``,
``path_auxiliary_vs_gibbs.png``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread for every sampler alike
import cProfile
import io
import json
import pstats
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
from benchmarks.pas_common import run_sampler
from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.models import segmentation_model
from pymc_lbp.models.ising_scaling import scaling_ising_model

CASES = {
    "LSB case 1": lambda q: segmentation_model(1, n=10 if q else 30),
    "LSB case 2": lambda q: segmentation_model(2, n=10 if q else 30),
    "LSB case 3": lambda q: segmentation_model(3, n=10 if q else 30),
    "LSB case 4": lambda q: segmentation_model(4, n=10 if q else 30),
    "Ising 50x50 (C2)": lambda q: scaling_ising_model(10 if q else 50, config=2, seed=0),
}

FULL = dict(repeats=3, pas=dict(tune=150, draws=600, spd=10), gibbs=dict(tune=30, draws=250))
QUICK = dict(repeats=1, pas=dict(tune=20, draws=40, spd=2), gibbs=dict(tune=5, draws=20))


def run_case(name: str, quick: bool, seed: int, mode: str | None = None) -> dict:
    cfg = QUICK if quick else FULL
    ck = {"mode": mode} if mode else None
    model = CASES[name](quick)
    n_sites = int(np.prod(model.initial_point()["x"].shape))
    reps = []
    for r in range(cfg["repeats"]):
        p, g = cfg["pas"], cfg["gibbs"]
        pas = run_sampler(
            model,
            lambda p=p: PathAuxiliaryLBP(
                model.value_vars, steps_per_draw=p["spd"], compile_kwargs=ck
            ),
            label="PathAuxiliaryLBP",
            draws=p["draws"],
            tune=p["tune"],
            seed=seed + r,
            steps_per_draw=p["spd"],
        )
        gibbs = run_sampler(
            model,
            lambda: pm.BinaryGibbsMetropolis(model.value_vars, compile_kwargs=ck),
            label="BinaryGibbsMetropolis",
            draws=g["draws"],
            tune=g["tune"],
            seed=seed + r,
        )
        reps.append({"pas": pas.as_dict(), "gibbs": gibbs.as_dict()})
        ratio = pas.ess_per_cpu_sec / gibbs.ess_per_cpu_sec
        print(
            f"  {name:18s} rep {r}: PAS R={fmt(pas.path_length)} acc={fmt(pas.accept)} "
            f"ESS/cpu-s={fmt(pas.ess_per_cpu_sec)} | Gibbs ESS/cpu-s={fmt(gibbs.ess_per_cpu_sec)}"
            f" (cpu-s/sweep {fmt(gibbs.cpu_sec_per_step)}) | ratio {fmt(ratio)} "
            f"(wall ratio {fmt(pas.ess_per_sec / gibbs.ess_per_sec)})",
            flush=True,
        )

    def med(key, who, sub=None):
        vals = [(rep[who][sub][key] if sub else rep[who][key]) for rep in reps]
        return float(np.median(vals))

    def ratio(key, sub=False):
        if sub:
            vals = [rep["pas"]["extra"][key] / rep["gibbs"]["extra"][key] for rep in reps]
        else:
            vals = [rep["pas"][key] / rep["gibbs"][key] for rep in reps]
        return float(np.median(vals))

    return {
        "case": name,
        "n_sites": n_sites,
        "repeats": reps,
        "pas_ess_per_cpu_sec": med("ess_per_cpu_sec", "pas"),
        "gibbs_ess_per_cpu_sec": med("ess_per_cpu_sec", "gibbs"),
        "ratio_ess_per_cpu_sec": ratio("ess_per_cpu_sec"),
        "ratio_ess_per_cpu_sec_magnetisation": ratio("ess_ones_per_cpu_sec", sub=True),
        "pas_ess_per_sec": med("ess_per_sec", "pas"),
        "gibbs_ess_per_sec": med("ess_per_sec", "gibbs"),
        "ratio_ess_per_sec": ratio("ess_per_sec"),
        "pas_path_length": med("path_length", "pas"),
        "pas_accept": med("accept", "pas"),
        "pas_cpu_sec_per_step": med("cpu_sec_per_step", "pas"),
        "gibbs_cpu_sec_per_sweep": med("cpu_sec_per_step", "gibbs"),
        "pas_ess_per_step": med("ess_per_step", "pas"),
        "gibbs_ess_per_sweep": med("ess_per_step", "gibbs"),
    }


def profile_pas(quick: bool, seed: int) -> dict:
    """cProfile of a PathAuxiliaryLBP run on the 50x50 Ising, grouped by where time goes."""
    model = CASES["Ising 50x50 (C2)"](quick)
    with model:
        step = PathAuxiliaryLBP(model.value_vars, path_scale=None, steps_per_draw=4)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        pm.sample(
            draws=20 if quick else 1000,
            tune=10 if quick else 300,
            step=step,
            chains=1,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
        prof.disable()
        wall = time.perf_counter() - t0
    st = pstats.Stats(prof)
    buckets = {"compiled differences": 0.0, "numba kernel": 0.0, "total run_steps": 0.0}
    for (file, _line, func), (_cc, _nc, tt, ct, _callers) in st.stats.items():
        if func == "__call__" and "pytensor/compile/function/types.py" in file:
            buckets["compiled differences"] += tt
        if func == "run_steps" and "path_auxiliary" in file:
            buckets["total run_steps"] += ct
        if func == "pairwise_steps" and file.endswith("pairwise/kernel.py"):
            buckets["numba kernel"] += ct
    total = sum(v[3] for k, v in st.stats.items() if k[2] == "astep" and "base.py" in k[0])
    buckets["astep (our step, all)"] = total
    buckets["pm.sample wall (profiled)"] = wall
    buckets["PyMC per-draw machinery (wall - astep)"] = wall - total
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
    return {"buckets": buckets, "top": buf.getvalue()}


def plot(results: list[dict], path: Path) -> None:
    plt = pyplot()
    names = [r["case"] for r in results]
    xs = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    pas = [r["pas_ess_per_cpu_sec"] for r in results]
    ax.bar(xs - 0.2, pas, 0.4, label="PathAuxiliaryLBP")
    ax.bar(
        xs + 0.2, [r["gibbs_ess_per_cpu_sec"] for r in results], 0.4, label="BinaryGibbsMetropolis"
    )
    for x, r, top in zip(xs, results, pas, strict=True):
        ax.text(x, top, f"x{r['ratio_ess_per_cpu_sec']:.1f}", ha="center", va="bottom")
    ax.set_xticks(xs, names, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ESS per CPU-second (Hamming, median)")
    ax.legend()
    save_figure(fig, path)


def write_markdown(
    results: list[dict], prof: dict | None, path: Path, suffix: str, mode: str | None = None
) -> None:
    cols = [
        ("case", "case"),
        ("n_sites", "sites"),
        ("pas_path_length", "R"),
        ("pas_accept", "accept"),
        ("pas_ess_per_cpu_sec", "PAS ESS/CPU-s"),
        ("gibbs_ess_per_cpu_sec", "Gibbs ESS/CPU-s"),
        ("ratio_ess_per_cpu_sec", "ratio (Hamming)"),
        ("ratio_ess_per_cpu_sec_magnetisation", "ratio (magnetisation)"),
        ("ratio_ess_per_sec", "ratio (Hamming, wall)"),
        ("pas_cpu_sec_per_step", "PAS CPU-s/step"),
        ("gibbs_cpu_sec_per_sweep", "Gibbs CPU-s/sweep"),
        ("pas_ess_per_step", "PAS ESS/step"),
        ("gibbs_ess_per_sweep", "Gibbs ESS/sweep"),
    ]
    lines = [
        "# PathAuxiliaryLBP vs PyMC's BinaryGibbsMetropolis",
        "",
        "Generated by `benchmarks/path_auxiliary_vs_gibbs.py`: medians over repeats, both "
        "samplers in the same run on the same model, 2 sequential chains each, ESS of the "
        "Hamming distance to a fixed random state (and of the magnetisation), per CPU-second of "
        "the post-tuning part of `pm.sample` (the machine is shared; the wall-clock ratio is "
        "given too).",
        "",
        f"pytensor mode of both samplers' compiled functions: {mode or 'default (C)'}.",
        "",
        markdown_table(results, cols, cell=compact_cell),
        "",
        f"![ESS/s](path_auxiliary_vs_gibbs{suffix}.png)",
        "",
    ]
    if prof is not None:
        lines += ["## Where the time goes (cProfile, 50x50 Ising)", ""]
        lines += [f"- {k}: {v:.2f} s" for k, v in prof["buckets"].items()]
        lines += ["", "```", prof["top"].strip(), "```", ""]
    path.write_text("\n".join(lines))


def main(argv=None) -> int:
    parser = benchmark_parser(__doc__, quick="smoke run (< 1 min)")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--repeats", type=int, default=None, help="override the repeats")
    parser.add_argument(
        "--mode", default=None, help="pytensor mode for both samplers' compiled functions (NUMBA)"
    )
    add_out(parser)
    parser.add_argument("--seed", type=int, default=777)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ("_quick" if args.quick else "") + (f"_{args.mode.lower()}" if args.mode else "")
    results = []
    if args.repeats is not None:
        (QUICK if args.quick else FULL)["repeats"] = args.repeats
    for name in args.cases:
        print(f"[{name}]", flush=True)
        results.append(run_case(name, args.quick, args.seed, args.mode))
    prof = profile_pas(args.quick, args.seed) if args.profile else None
    payload = {"quick": args.quick, "mode": args.mode, "cases": results, "profile": prof}
    (out / f"path_auxiliary_vs_gibbs{suffix}.json").write_text(json.dumps(payload, indent=1))
    plot(results, out / f"path_auxiliary_vs_gibbs{suffix}.png")
    write_markdown(results, prof, out / f"path_auxiliary_vs_gibbs{suffix}.md", suffix, args.mode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
