"""PathAuxiliaryLBP's compiled path kernel, and pm.sample against PyMC's default step.

Off pairwise binary blocks (which run the numba kernel), a draw of ``PathAuxiliaryLBP``, tuning
included, is one call of a compiled pytensor ``scan`` (``pymc_lbp/samplers/path/graph.py``),
compiled at the first draw. In one run on one core:

1. **Per MH step** (microseconds, min over interleaved rounds): one compiled differences call,
   a frozen step of the compiled kernel and a tuning step of it (the adaptation carried inside),
   and the kernel's compilation at the first draw, on a categorical chain (the gallery HMM), a
   Potts lattice (categorical), a UAI Bayesian network (binary, higher-order tables) and an
   RBM's visible marginal (binary, not pairwise).
2. **pm.sample** on the gallery HMM (80 categorical states, NUTS on the transition matrix and
   the noise): ``PathAuxiliaryLBP()`` and PyMC's default steps, in the same run: seconds
   (compilation included), ESS/s of the states' mean and of the continuous parameters, accuracy
   against the exact posterior (largest |z|).

NumPyro's compiled Gibbs is compared on its own benchmark in ``vs_numpyro.py``.

Run: ``python -m benchmarks.path_kernel [--quick] [--repeats 2]``; writes
``docs/results/path_kernel.{json,md,png}``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.common import (
    RESULTS,
    add_out,
    benchmark_parser,
    cost_bars,
    gallery_run,
    machine_info,
    markdown_table,
    min_time,
    write_results,
)
from examples.gallery import hidden_markov
from pymc_lbp import PathAuxiliaryLBP
from pymc_lbp.models.uai import NETWORKS

SAMPLERS = ("pas", "pymc")


def targets(quick: bool) -> dict:
    """name -> model builder (the discrete variables are the model's integer ones)."""
    from pymc_lbp.models import potts_model, read_uai
    from pymc_lbp.models.rbm import random_rbm_params, rbm_model

    side = 6 if quick else 12
    return {
        "hmm (gallery), 80 categorical": hidden_markov.build_model,
        f"potts {side}x{side}, 3 colours": lambda: potts_model((side, side), 3, 0.8),
        "uai BN_0, 100 binary": lambda: read_uai(NETWORKS / "uai2006_bn" / "BN_0.uai"),
        "rbm 100x25, binary": lambda: rbm_model(random_rbm_params(100, 25, seed=0)),
    }


def discrete_vars(model) -> list:
    return [v for v in model.value_vars if v.type.dtype.startswith(("int", "uint", "bool"))]


def step_costs(name: str, build, n_steps: int, rounds: int) -> dict:
    from pymc.blocking import DictToArrayBijection

    model = build()
    disc = discrete_vars(model)
    with model:
        start = time.perf_counter()
        step = PathAuxiliaryLBP(disc)
        construct = time.perf_counter() - start
    point = model.initial_point()
    x = np.asarray(DictToArrayBijection.map({v.name: point[v.name] for v in disc}).data)
    x = x.astype(np.int64)
    logp, deltas = step.differences(x)
    out = {
        "target": name,
        "sites": int(step.layout.n_sites),
        "slots": int(step.layout.n_slots),
        "differences": step.differences_kind,
        "pairwise": bool(step.pairwise_ready()),
        "construct_s": construct,
    }
    if step.pairwise_ready():  # runs the numba kernel
        return out
    start = time.perf_counter()
    step.run_steps(x, logp, deltas, 2)  # tuning draw: compiles the kernel
    out["compile_s"] = time.perf_counter() - start
    tuning = step._adapt_state()

    def tune_run():
        step._set_adapt_state(tuning)
        step.run_steps(x, logp, deltas, n_steps)

    step.tune = False  # frozen at scale 3 for the frozen timings
    step.fixed_path_scale = 3.0

    def frozen_run():
        step.run_steps(x, logp, deltas, n_steps)

    out["differences_us"] = min_time(lambda: step.differences(x), 1, 20) * 1e6
    times = {"kernel_us": [], "kernel_tune_us": []}
    for _ in range(rounds):  # interleaved: load changes hit both alike
        times["kernel_us"].append(min_time(frozen_run, n_steps, 1))
        step.tune = True
        step.fixed_path_scale = None
        times["kernel_tune_us"].append(min_time(tune_run, n_steps, 1))
        step.tune = False
        step.fixed_path_scale = 3.0
    for key, vals in times.items():
        out[key] = float(np.min(vals)) * 1e6
    out["kernel_over_differences"] = out["kernel_us"] / out["differences_us"]
    return out


def sampling(sampler: str, draws: int, tune: int, seed: int, reference) -> dict:
    """pm.sample of the gallery HMM: "pas" (defaults) or "pymc" (PyMC's default steps)."""
    make_step = None  # PyMC's default steps
    if sampler != "pymc":

        def make_step(model):
            return PathAuxiliaryLBP(discrete_vars(model))

    return gallery_run(
        hidden_markov, sampler, make_step, draws=draws, tune=tune, seed=seed, reference=reference
    )


def plot(costs: list[dict], path: Path) -> None:
    rows = [c for c in costs if "kernel_us" in c]
    keys = [
        ("differences_us", "one differences call"),
        ("kernel_us", "compiled kernel, one step"),
        ("kernel_tune_us", "compiled kernel, one tuning step"),
    ]
    title = "PathAuxiliaryLBP: cost of one MH step (one core, C backend)"
    cost_bars([c["target"].split(",")[0] for c in rows], rows, keys, title, path)


def main(argv: list[str] | None = None) -> dict:
    parser = benchmark_parser(__doc__, quick="few steps and draws (smoke test)", repeats=1)
    add_out(parser, default=None)
    args = parser.parse_args(argv)
    n_steps, rounds = (20, 2) if args.quick else (200, 7)
    draws, tune = (60, 40) if args.quick else (1000, 1000)
    start = time.time()
    costs = []
    for name, build in targets(args.quick).items():
        costs.append(step_costs(name, build, n_steps, rounds))
        print(costs[-1], flush=True)
    reference = hidden_markov.reference()
    runs = []
    for r in range(args.repeats):
        for sampler in SAMPLERS:
            runs.append(sampling(sampler, draws, tune, 200 + r, reference))
            print({k: runs[-1][k] for k in ("sampler", "sample_seconds", "max_abs_z")}, flush=True)
    summary = []
    for sampler in SAMPLERS:
        mine = [r for r in runs if r["sampler"] == sampler]
        row = {"sampler": sampler}
        for key in ("sample_seconds", "ess_s_discrete", "ess_s_continuous", "max_abs_z"):
            row[key] = float(np.median([r[key] for r in mine]))
        summary.append(row)
    base = next(r for r in summary if r["sampler"] == "pymc")
    for row in summary:
        row["discrete_vs_pymc"] = row["ess_s_discrete"] / base["ess_s_discrete"]
        row["continuous_vs_pymc"] = row["ess_s_continuous"] / base["ess_s_continuous"]
    md = [
        "# PathAuxiliaryLBP: the compiled path kernel",
        "",
        f"Machine: {machine_info()}; {time.time() - start:.0f} s in all.",
        "",
        f"## Per MH step (microseconds, min over {rounds} interleaved rounds of {n_steps} steps;"
        " path scale 3 for the frozen steps)",
        "",
        markdown_table(
            costs,
            [
                ("target", "target"),
                ("sites", "sites"),
                ("differences", "differences"),
                ("differences_us", "one differences call"),
                ("kernel_us", "compiled step"),
                ("kernel_tune_us", "compiled tuning step"),
                ("kernel_over_differences", "compiled / differences"),
                ("compile_s", "kernel compile s (first draw)"),
                ("construct_s", "construction s"),
            ],
        ),
        "",
        f"## pm.sample, gallery HMM, 2 chains one after the other, {draws} draws + {tune} tuning,"
        f" median of {args.repeats}",
        "",
        markdown_table(
            summary,
            [
                ("sampler", "sampler"),
                ("sample_seconds", "seconds (all in)"),
                ("ess_s_discrete", "ESS/s states' mean"),
                ("ess_s_continuous", "min ESS/s P, sigma"),
                ("discrete_vs_pymc", "states vs PyMC"),
                ("continuous_vs_pymc", "continuous vs PyMC"),
                ("max_abs_z", "max abs z"),
            ],
        ),
        "",
    ]
    payload = {"machine": machine_info(), "costs": costs, "runs": runs, "summary": summary}
    folder = args.out or RESULTS
    write_results("path_kernel", payload, "\n".join(md), folder)
    plot(costs, Path(folder) / "path_kernel.png")
    print("\n".join(md))
    return payload


if __name__ == "__main__":
    main()
