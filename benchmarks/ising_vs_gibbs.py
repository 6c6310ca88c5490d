"""LocallyBalanced (4 balancing functions) and GibbsWithGradients vs PyMC's BinaryGibbsMetropolis.

Targets: the LSB Ising image-segmentation posterior, cases 1-4 (30x30, torus). Statistic: Hamming
distance to a fixed random reference state. Equal work per draw: one draw of every sampler costs
about one sweep's worth of logp evaluations (D = 900): BinaryGibbsMetropolis visits every site
(1 + 0.8 D evaluations), LocallyBalanced with exact differences makes one MH step (D + 1
evaluations, batched), GibbsWithGradients makes D / 2 MH steps (one logp and one gradient
each). Also measured: each step's overhead ratio, the time of an MH step divided by the time of
the compiled evaluations it makes.

Writes docs/results/ising_vs_gibbs.{json,md} and docs/results/ising_vs_gibbs.png.

Usage: python -m benchmarks.ising_vs_gibbs [--quick] [--repeats N] [--draws N]
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pymc as pm

from benchmarks.common import (
    FIXED_BALANCING,
    RESULTS,
    benchmark_parser,
    machine_info,
    markdown_table,
    pyplot,
    run_step,
    save_figure,
    summarize,
    write_results,
)
from pymc_lbp import GibbsWithGradients, LocallyBalanced
from pymc_lbp.models import LSB_CASES, segmentation_model


def samplers(n_sites: int) -> dict:
    out = {
        f"LB-{g}": (
            lambda v, g=g: LocallyBalanced(v, balancing=g, differences="exact", steps_per_draw=1)
        )
        for g in FIXED_BALANCING
    }
    out["GWG"] = lambda v: GibbsWithGradients(v, steps_per_draw=n_sites // 2)
    out["PyMC-BinaryGibbs"] = lambda v: pm.BinaryGibbsMetropolis(v)
    return out


def overhead_ratio(step, x0: np.ndarray, n_steps: int) -> float:
    """Time per MH step over time of the compiled evaluations it makes (one per step)."""
    from pymc.blocking import RaveledVars

    shape = step.specs[0].shape
    q = RaveledVars(x0.astype(np.int64), ((step.specs[0].name, shape, np.prod(shape), "int64"),))
    step.steps_per_draw = n_steps
    step.astep(q)  # warm up
    t0 = time.perf_counter()
    q, _ = step.astep(q)
    per_step = (time.perf_counter() - t0) / n_steps
    x = q.data.copy()
    t0 = time.perf_counter()
    for _ in range(n_steps):
        step.differences.evaluate(x)
    per_eval = (time.perf_counter() - t0) / n_steps
    return per_step / per_eval


def main(argv=None) -> None:
    parser = benchmark_parser(
        __doc__, quick="smoke run: tiny sizes", repeats=3, draws=300, tune=100, chains=2
    )
    parser.add_argument("--cases", type=int, nargs="*", default=sorted(LSB_CASES))
    args = parser.parse_args(argv)
    n = 30
    if args.quick:
        n, args.repeats, args.draws, args.tune, args.cases = 10, 1, 30, 10, [3]

    runs, overhead = [], {}
    for case in args.cases:
        model = segmentation_model(case, n=n)
        target = f"case{case}"
        for name, make in samplers(n * n).items():
            for rep in range(args.repeats):
                run = run_step(
                    model,
                    ["x"],
                    make,
                    target=target,
                    sampler=name,
                    repeat=rep,
                    draws=args.draws,
                    tune=args.tune,
                    chains=args.chains,
                    seed=1000 * case + rep,
                    gibbs_evals_per_draw=1 + 0.8 * n * n,
                )
                runs.append(run)
                print(
                    f"{target} {name:>17} rep {rep}: {run.seconds:6.1f} s  ESS {run.ess:7.1f}  "
                    f"ESS/s {run.ess_per_second:7.2f}  ESS/1k evals {run.ess_per_kilo_eval:7.3f}",
                    flush=True,
                )
            if name != "PyMC-BinaryGibbs":
                with model:
                    step = make([model["x"]])
                x0 = model.initial_point()["x"].ravel()
                n_steps = 20 if name.startswith("LB") else 2000
                overhead[(target, name)] = overhead_ratio(step, x0, 5 if args.quick else n_steps)

    rows = summarize(runs, baseline="PyMC-BinaryGibbs")
    for row in rows:
        row["overhead_ratio"] = overhead.get((row["target"], row["sampler"]))
    columns = [
        ("target", "target"),
        ("sampler", "sampler"),
        ("ess", "ESS"),
        ("seconds", "seconds"),
        ("ess_per_second", "ESS/s"),
        ("ess_per_second_ratio", "ESS/s vs Gibbs"),
        ("ess_per_kilo_eval", "ESS per 1k evals"),
        ("ess_per_eval_ratio", "per-eval vs Gibbs"),
        ("accept", "accept"),
        ("overhead_ratio", "overhead ratio"),
    ]
    info = machine_info()
    md = (
        f"# Ising segmentation: pymc_lbp vs BinaryGibbsMetropolis\n\n"
        f"LSB cases {args.cases} ({n}x{n}), {args.chains} chains x {args.draws} draws "
        f"(+{args.tune} tune), median of {args.repeats} repeats. "
        f"Machine: {info['cpus']} CPUs, pymc {info['pymc']}, BLAS `{info['blas_ldflags']}`, "
        f"{info['date']}.\n\n" + markdown_table(rows, columns) + "\n"
    )
    name = "ising_vs_gibbs_quick" if args.quick else "ising_vs_gibbs"
    write_results(name, {"args": vars(args), "machine": info, "rows": rows, "runs": runs}, md)
    plot(rows, RESULTS / f"{name}.png")
    print(md)


def plot(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    targets = sorted({r["target"] for r in rows})
    samplers_ = sorted({r["sampler"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / len(samplers_)
    for k, s in enumerate(samplers_):
        for ax, key in zip(axes, ("ess_per_second", "ess_per_kilo_eval"), strict=True):
            vals = [
                next((r[key] for r in rows if r["target"] == t and r["sampler"] == s), np.nan)
                for t in targets
            ]
            ax.bar(np.arange(len(targets)) + k * width, vals, width, label=s)
    for ax, title in zip(axes, ("ESS per second", "ESS per 1000 logp evaluations"), strict=True):
        ax.set_xticks(np.arange(len(targets)) + 0.4 - width / 2, targets)
        ax.set_yscale("log")
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    save_figure(fig, path)


if __name__ == "__main__":
    main()
