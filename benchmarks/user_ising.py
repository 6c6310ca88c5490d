"""The LSB Ising segmentation written as a PyMC user writes it: our samplers (defaults) vs PyMC's.

The model (case 3 of Sansone 2022, 30x30 torus) as issue #10 found it in the wild: a Bernoulli
image ``b``, spins ``s = 2 b - 1``, the couplings from ``pt.roll`` and two ``pm.Potential`` terms.
Before the relaxation handled value-free ops (shapes), ``differences="auto"`` fell back to exact
differences here and PathAuxiliaryLBP got 0.6 ESS/s against 6.8 for BinaryGibbsMetropolis.

Samplers, every option at its default: ``PathAuxiliaryLBP([b])``, ``GibbsWithGradients([b])``,
``LocallyBalanced([b])``, ``SelfBalancing([b])`` (learning its balancing function while tuning),
and PyMC's own choice for a Bernoulli (``pm.sample`` assigns
``BinaryGibbsMetropolis``). Statistic: the Hamming distance to a fixed random state (ESS from
ArviZ over chains). Also reported: construction time of the step (pytensor's cache warm after the
first repeat), accept rate, the choice of ``differences="auto"``.

Writes docs/results/user_ising.{json,md,png}.

Usage: python -m benchmarks.user_ising [--quick] [--repeats N] [--draws N] [--tune N]
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from benchmarks.common import (
    add_out,
    benchmark_parser,
    load_info,
    machine_info,
    markdown_table,
    pyplot,
    run_step,
    save_figure,
    summarize,
    write_results,
)
from pymc_lbp import GibbsWithGradients, LocallyBalanced, PathAuxiliaryLBP, SelfBalancing
from pymc_lbp.models import LSB_CASES
from pymc_lbp.models.lattice import segmentation_field

BASELINE = "PyMC-BinaryGibbs"


def user_written_ising(n: int = 30, case: int = 3) -> pm.Model:
    """``log pi(s) = sum alpha_i s_i + lam sum_<ij> s_i s_j`` written with a Bernoulli image."""
    lam, mu, sigma = LSB_CASES[case]
    alpha = segmentation_field(n, mu, sigma, 0)
    with pm.Model() as model:
        b = pm.Bernoulli("b", p=0.5, shape=(n, n))
        s = 2 * b - 1
        pm.Potential("evidence", pt.sum(alpha * s))
        pm.Potential("smoothness", lam * pt.sum(s * pt.roll(s, 1, 0) + s * pt.roll(s, 1, 1)))
    return model


SAMPLERS = {
    "PathAuxiliaryLBP": lambda v: PathAuxiliaryLBP(v),
    "GibbsWithGradients": lambda v: GibbsWithGradients(v),
    "LocallyBalanced": lambda v: LocallyBalanced(v),
    "SelfBalancing": lambda v: SelfBalancing(v),
    BASELINE: lambda v: pm.BinaryGibbsMetropolis(v),
}


def main(argv=None) -> dict:
    parser = benchmark_parser(
        __doc__, quick="smoke run: 6x6, a few draws", repeats=2, draws=300, tune=100, chains=2
    )
    add_out(parser)
    args = parser.parse_args(argv)
    n = 30
    if args.quick:
        n, args.repeats, args.draws, args.tune = 6, 1, 20, 5
    model = user_written_ising(n)
    runs, extra = [], {}
    for name, make in SAMPLERS.items():
        for rep in range(args.repeats):
            built = {}

            def timed(v, make=make, built=built):
                t0 = time.perf_counter()
                step = make(v)
                built["seconds"], built["step"] = time.perf_counter() - t0, step
                return step

            run = run_step(
                model,
                ["b"],
                timed,
                target=f"user_ising_{n}x{n}",
                sampler=name,
                repeat=rep,
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                seed=100 + rep,
                gibbs_evals_per_draw=1 + 0.8 * n * n,
            )
            runs.append(run)
            step = built["step"]
            info = extra.setdefault(name, {"construct": []})
            info["construct"].append(built["seconds"])
            kind = getattr(step, "differences_kind", "-")
            if getattr(step, "differences", None) is not None:
                if getattr(step.differences, "method", "") == "pairwise":
                    kind += " (pairwise couplings)"
            info["differences"] = kind
            info["mh_steps_per_draw"] = getattr(step, "steps_per_draw", None)
            print(
                f"{name:>20} rep {rep}: build {built['seconds']:5.1f} s, sample "
                f"{run.seconds:6.1f} s, ESS {run.ess:7.1f}, ESS/s {run.ess_per_second:7.2f}",
                flush=True,
            )
    rows = summarize(runs, baseline=BASELINE)
    for row in rows:
        info = extra[row["sampler"]]
        row["construct_seconds"] = float(np.min(info["construct"]))
        row["differences"] = info["differences"]
        row["mh_steps_per_draw"] = info["mh_steps_per_draw"]
    columns = [
        ("sampler", "sampler"),
        ("differences", "differences (auto)"),
        ("mh_steps_per_draw", "MH steps per draw"),
        ("construct_seconds", "build s (warm)"),
        ("seconds", "sample s"),
        ("ess", "ESS"),
        ("ess_per_second", "ESS/s"),
        ("ess_per_second_ratio", "ESS/s vs BinaryGibbs"),
        ("ess_per_kilo_eval", "ESS per 1k evals"),
        ("accept", "accept"),
    ]
    machine = machine_info()
    md = (
        "# The Ising segmentation as users write it: defaults vs PyMC's BinaryGibbsMetropolis\n\n"
        f"LSB case 3 ({n}x{n}, torus) written with a Bernoulli image, `pt.roll` couplings and "
        f"`pm.Potential`; {args.chains} chains x {args.draws} draws (+{args.tune} tune), median "
        f"of {args.repeats} repeat(s); sample time is `pm.sample`'s wall time (tuning included, "
        f"construction excluded). Machine: {machine['cpus']} CPUs, pymc {machine['pymc']}, "
        f"{machine['date']}, load {load_info()}.\n\n" + markdown_table(rows, columns) + "\n"
    )
    name = "user_ising_quick" if args.quick else "user_ising"
    payload = {"args": vars(args), "machine": machine, "rows": rows, "runs": runs}
    write_results(name, {**payload, "args": {**vars(args), "out": str(args.out)}}, md, args.out)
    plot(rows, Path(args.out) / f"{name}.png")
    print(md)
    return payload


def plot(rows: list[dict], path: Path) -> None:
    """ESS/s per sampler, with the ratio to BinaryGibbsMetropolis written on each bar."""
    plt = pyplot()
    rows = sorted(rows, key=lambda r: -r["ess_per_second"])
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = [r["sampler"] for r in rows]
    vals = [r["ess_per_second"] for r in rows]
    colours = ["tab:grey" if n == BASELINE else "tab:blue" for n in names]
    ax.barh(names, vals, color=colours)
    for i, r in enumerate(rows):
        ax.text(vals[i], i, f" {r.get('ess_per_second_ratio', 1.0):.1f}x", va="center")
    ax.invert_yaxis()
    ax.set_xlabel("ESS/s of the Hamming statistic (higher is better)")
    ax.set_title("User-written Ising (LSB case 3): defaults vs PyMC's BinaryGibbsMetropolis")
    save_figure(fig, path, dpi=120)


if __name__ == "__main__":
    main()
