"""NeuralBlock's compiled random scan against its numpy steps, and pm.sample against PyMC's Gibbs.

On UAI grid Bayesian networks (the shipped UAI'08 grids, evidence from their ``.evid`` files;
factor-local targets), a draw of ``NeuralBlock``'s random scan is one call of a compiled
pytensor ``scan`` (``pymc_lbp/samplers/block/random_scan_graph.py``), compiled at the first draw;
its numpy reference is a Python loop of ``NeuralBlock.scan_step``. In one run on one core:

1. **Per MH step** (microseconds, min over interleaved rounds): a numpy step, a step of the scan
   compiled with C (the default) and with NUMBA, and each compilation, for the three kinds of
   units: 3x3 motif blocks with the shipped ``grid-bn`` proposal (``neural``), the same blocks
   resampled exactly over their 512 states (``exact``), single sites (``sites``).
2. **pm.sample** (one chain, no tuning, ``--draws`` draws; seconds from the first step, the
   first draw, which compiles the scan, reported apart): ``NeuralBlock`` with the shipped
   proposal, compiled with C and with NUMBA, against PyMC's ``BinaryGibbsMetropolis`` (what
   ``pm.sample`` assigns to these variables) in the same run: seconds, ms per draw, ESS/s of the
   number of ones, and the mean absolute error of the marginals against the exact ones
   (the ``.MAR`` files).

Run: ``python -m benchmarks.random_scan [--quick]``; writes
``docs/results/random_scan.{json,md,png}``.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np

import pymc_lbp
from benchmarks.common import (
    RESULTS,
    benchmark_parser,
    cost_bars,
    machine_info,
    markdown_table,
    min_time,
    timed_sample,
    write_results,
)
from pymc_lbp import NeuralBlock
from pymc_lbp.models import read_mar, read_network, read_uai
from pymc_lbp.models.uai import NETWORKS, read_evidence, uai_state_from_point
from pymc_lbp.samplers.block.motifs.grid_bn import uai_grid_blocks

GRIDS = NETWORKS / "uai2008_grid_bn"
UNITS = ("neural", "exact", "sites")
SAMPLERS = ("neural-C", "neural-NUMBA", "pymc-gibbs")


def load(label: str):
    path = GRIDS / f"{label}.uai"
    network = read_network(path)
    evidence = read_evidence(f"{path}.evid", network)
    exact = np.array([m[1] for m in read_mar(f"{path}.MAR")])
    return network, evidence, exact


def make_step(model, network, units: str, mode: str | None):
    kw = {"compile_kwargs": {"mode": mode} if mode else None}
    if units == "sites":
        return NeuralBlock(model.free_RVs, blocks=None, **kw)
    proposal = pymc_lbp.load_proposal("grid-bn") if units == "neural" else "exact"
    return NeuralBlock(model.free_RVs, blocks=uai_grid_blocks(network), proposal=proposal, **kw)


def step_costs(label: str, units: str, n_steps: int, rounds: int) -> dict:
    network, evidence, _ = load(label)
    model = read_uai(network, evidence, seed=0)
    out = {"grid": label, "n_vars": int(network.n_vars), "units": units}
    steps = {}
    for mode in (None, "NUMBA"):
        with model:
            step = make_step(model, network, units, mode)
        x = step._state_vector(model.initial_point())
        step._refresh_outside()
        logp = step.differences.logp(x)
        start = time.perf_counter()
        step.random_scan  # noqa: B018 (compiles)
        out[f"compile_{mode or 'C'}_s"] = time.perf_counter() - start
        steps[mode] = (step, x, logp)
    out["n_units"] = len(steps[None][0].units)
    rng = np.random.default_rng(0)
    times = {"numpy_us": [], "C_us": [], "NUMBA_us": []}
    for _ in range(rounds):  # interleaved: load changes hit all alike
        for mode in (None, "NUMBA"):
            step, x, logp = steps[mode]
            noise = rng.random((n_steps, step.scan_width))
            args = (x, logp, step._outside_values, noise, step._scan_network())
            times[f"{mode or 'C'}_us"].append(min_time(lambda s=step, a=args: s.random_scan(*a),
                                                        n_steps, 1))  # fmt: skip
        step, x, logp = steps[None]
        noise = rng.random((n_steps // 4, step.scan_width))

        def loop(step=step, x=x, logp=logp, noise=noise):
            for row in noise:
                step.scan_step(x, logp, np.zeros(0), row)

        times["numpy_us"].append(min_time(loop, len(noise), 1))
    for key, vals in times.items():
        out[key] = float(np.min(vals)) * 1e6
    out["speed_up_C"] = out["numpy_us"] / out["C_us"]
    out["speed_up_NUMBA"] = out["numpy_us"] / out["NUMBA_us"]
    return out


def sampling(label: str, sampler: str, draws: int, seed: int) -> dict:
    import arviz as az
    import pymc as pm

    network, evidence, exact = load(label)
    model = read_uai(network, evidence, seed=0)
    start = time.perf_counter()
    with model:
        if sampler == "pymc-gibbs":
            step = pm.BinaryGibbsMetropolis(model.free_RVs)
        else:
            mode = {"neural-C": None, "neural-NUMBA": "NUMBA"}[sampler]
            step = make_step(model, network, "neural", mode)
    construct = time.perf_counter() - start
    idata, stamps = timed_sample(model, step, draws, seed)
    seconds = float(stamps[-1])  # from the first step: compilation at the first draw included
    post = idata.posterior
    point = {name: post[name].values[0] for name in model.uai_info.free_names}
    states = uai_state_from_point(point, model)
    free = np.array([v for v in range(network.n_vars) if v not in evidence])
    ones = states[:, free].sum(axis=1).astype(float)
    ess = float(az.ess(ones[None, :]))
    error = float(np.abs(states[:, free].mean(axis=0) - exact[free]).mean())
    return {
        "grid": label,
        "sampler": sampler,
        "draws": draws,
        "construct_s": construct,
        "first_draw_s": float(stamps[0]),
        "ms_per_draw": 1e3 * float(stamps[-1] - stamps[0]) / (draws - 1),
        "seconds": seconds,
        "ess_ones": ess,
        "ess_per_s": ess / seconds,
        "marginal_error": error,
    }


def main(argv: list[str] | None = None) -> None:
    ap = benchmark_parser(__doc__)
    ap.add_argument("--draws", type=int, default=1000)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    grids = ["50-12-5"] if args.quick else ["50-12-5", "75-16-5"]
    n_steps, rounds = (200, 2) if args.quick else (1000, 3)
    draws = 100 if args.quick else args.draws
    costs = []
    for label in grids:
        for units in UNITS:
            row = step_costs(label, units, n_steps, rounds)
            costs.append(row)
            print({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()},
                  flush=True)  # fmt: skip
    runs = []
    for label in grids:
        for sampler in SAMPLERS:
            row = sampling(label, sampler, draws, seed=1)
            runs.append(row)
            print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()},
                  flush=True)  # fmt: skip
    cost_md = markdown_table(
        costs,
        [("grid", "grid"), ("units", "units"), ("n_units", "units per sweep"),
         ("numpy_us", "numpy us/step"), ("C_us", "compiled C us/step"),
         ("NUMBA_us", "compiled NUMBA us/step"), ("speed_up_C", "C speed-up"),
         ("speed_up_NUMBA", "NUMBA speed-up"), ("compile_C_s", "compile C s"),
         ("compile_NUMBA_s", "compile NUMBA s")],
    )  # fmt: skip
    run_md = markdown_table(
        runs,
        [("grid", "grid"), ("sampler", "sampler"), ("draws", "draws"),
         ("construct_s", "build s"), ("first_draw_s", "first draw s"),
         ("ms_per_draw", "ms/draw after it"), ("seconds", "sample s"),
         ("ess_ones", "ESS (ones)"), ("ess_per_s", "ESS/s"),
         ("marginal_error", "mean |marginal error|")],
    )  # fmt: skip
    md = (
        "NeuralBlock's random scan per MH step (one core, min over interleaved rounds):\n\n"
        f"{cost_md}\n\npm.sample, one chain, {draws} draws, no tuning, same run; seconds from "
        "the first step (the first draw includes the compilation of the scan), ESS/s over "
        f"them:\n\n{run_md}\n"
    )
    payload = {"machine": machine_info(), "step_costs": costs, "sampling": runs,
               "args": vars(args)}  # fmt: skip
    tag = "_quick" if args.quick else ""
    write_results(f"random_scan{tag}", payload, md)
    cost_bars(
        [f"{r['grid']} {r['units']}" for r in costs],
        costs,
        [("numpy_us", "numpy step"), ("C_us", "compiled scan, C"),
         ("NUMBA_us", "compiled scan, NUMBA")],
        "NeuralBlock random scan: cost per MH step",
        RESULTS / f"random_scan{tag}.png",
    )  # fmt: skip
    print(md)


if __name__ == "__main__":
    main()
