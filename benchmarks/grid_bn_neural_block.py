"""Neural Block Sampling on grid Bayesian networks (Wang et al. 2018, grid experiment).

For every grid (the UAI'08 grid BNs in ``pymc_lbp.models.uai.NETWORKS``, and grids of the
family made by :func:`pymc_lbp.models.uai.grid_bn`), each sampler runs one chain through pm.sample
for about the same wall time, and the mean absolute error of the estimated marginals
``P(x_v = 1 | evidence)`` (over the non-evidence variables) against the exact marginals is
recorded over wall time. Samplers:

``neural``
    :class:`pymc_lbp.NeuralBlock` on the 3 x 3 grid-BN motif blocks with the shipped general
    proposal ``load_proposal("grid-bn")`` (trained once on random local CPTs, never on these
    grids); one draw = one MH step per block.
``block-gibbs``
    The same blocks, resampled from their exact conditionals (512 states each).
``gibbs``
    Our single-site Gibbs (``NeuralBlock(blocks=None)``: every site's exact conditional); one
    draw = one update per site (random scan).
``pymc-gibbs``
    PyMC's ``BinaryGibbsMetropolis`` (its default for Bernoulli variables); one draw = one sweep.

All our samplers score their moves with the same factor-local logp
(:mod:`pymc_lbp.logp.local_logp`); PyMC's step evaluates the compiled model logp per site. Wall
time counts from the start of sampling (step construction and compilation are reported
separately); there is no burn-in cut, so the curves include the approach to stationarity from
the feasible start state that ``read_uai`` finds (its start search seeded with the repeat
number, so repeats start from different states). The one-off training time of the proposal
is in its file's metadata.

Outputs: ``docs/results/grid_bn_neural_block.{json,md,png}``.

Usage::

    python -m benchmarks.grid_bn_neural_block            # default, < 10 minutes on 2 cores
    python -m benchmarks.grid_bn_neural_block --seconds 60 --repeats 3 --grids all
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import pymc as pm

import pymc_lbp
from benchmarks.common import (
    RESULTS,
    at_times,
    benchmark_parser,
    pyplot,
    save_figure,
    timed_sample,
    write_results,
)
from pymc_lbp import NeuralBlock
from pymc_lbp.models import exact_marginals, read_mar, read_network, read_uai
from pymc_lbp.models.uai import NETWORKS, grid_bn, read_evidence, uai_state_from_point
from pymc_lbp.samplers.block.motifs.grid_bn import uai_grid_blocks

UAI_GRIDS = NETWORKS / "uai2008_grid_bn"
SAMPLERS = ("neural", "block-gibbs", "gibbs", "pymc-gibbs")

# (label, source): shipped files, then generated grids (deterministic fraction, n, seed)
DEFAULT_GRIDS = [
    ("gen-0-12-s1", (0.0, 12, 1)),  # control: no determinism, every sampler can mix
    ("50-12-5", "file"),
    ("75-16-5", "file"),
    ("gen-50-12-s1", (0.5, 12, 1)),
    ("gen-75-16-s1", (0.75, 16, 1)),
    ("gen-90-16-s1", (0.9, 16, 1)),
]
ALL_GRIDS = DEFAULT_GRIDS + [
    ("gen-50-16-s2", (0.5, 16, 2)),
    ("gen-75-20-s2", (0.75, 20, 2)),
    ("gen-90-20-s2", (0.9, 20, 2)),
]


def load_grid(label: str, source):
    """``(network, evidence, exact P(x=1))`` of one grid."""
    if source == "file":
        path = UAI_GRIDS / f"{label}.uai"
        network = read_network(path)
        evidence = read_evidence(f"{path}.evid", network)
        marg = read_mar(f"{path}.MAR")
    else:
        frac, n, seed = source
        network, evidence = grid_bn(n, frac, seed=seed)
        marg = exact_marginals(network, evidence)
    return network, evidence, np.array([m[1] for m in marg])


def make_step(name: str, model, blocks, proposal):
    rvs = model.free_RVs
    if name == "neural":
        return NeuralBlock(rvs, blocks=blocks, proposal=proposal)
    if name == "block-gibbs":
        return NeuralBlock(rvs, blocks=blocks, proposal="exact")
    if name == "gibbs":
        return NeuralBlock(rvs, blocks=None)
    if name == "pymc-gibbs":
        return pm.BinaryGibbsMetropolis(rvs)
    raise ValueError(name)


def run_one(model, step, draws: int, seed: int):
    """Sample; returns (states (draws, n_vars), seconds since the first step per draw, idata).

    The clock starts when PyMC makes the first step (after its own initial-point checks and
    compilation), and each draw is stamped by ``pm.sample``'s callback.
    """
    idata, stamps = timed_sample(model, step, draws, seed)
    post = idata.posterior
    point = {name: post[name].values[0] for name in model.uai_info.free_names}
    return uai_state_from_point(point, model), stamps, idata


def error_curve(states, stamps, exact, free, checkpoints):
    """Mean |P_hat(x=1) - P(x=1)| over free variables at each checkpoint time."""
    running = np.cumsum(states[:, free] == 1, axis=0) / np.arange(1, len(states) + 1)[:, None]
    err = np.abs(running - exact[free]).mean(axis=1)
    return err, at_times(stamps, err, checkpoints)


def main(argv: list[str] | None = None) -> None:
    ap = benchmark_parser(__doc__, quick=None, repeats=1)
    ap.add_argument("--seconds", type=float, default=12.0, help="wall-time budget per run")
    ap.add_argument("--grids", choices=("default", "all"), default="default")
    ap.add_argument("--samplers", nargs="*", default=list(SAMPLERS))
    ap.add_argument("--proposal", default="grid-bn", help="shipped name or .npz path")
    ap.add_argument("--only", nargs="*", default=None, help="grid labels to run")
    ap.add_argument("--tag", default="", help="suffix of the output file names")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)

    proposal = pymc_lbp.load_proposal(args.proposal)
    grids = DEFAULT_GRIDS if args.grids == "default" else ALL_GRIDS
    if args.only:
        grids = [g for g in grids if g[0] in args.only]
    checkpoints = [args.seconds * f for f in (0.1, 0.25, 0.5, 1.0)]
    rows, curves = [], {}
    for label, source in grids:
        network, evidence, exact = load_grid(label, source)
        free = np.array([v for v in range(network.n_vars) if v not in evidence])
        models = {}  # one start state per repeat: read_uai's start search with seed = repeat
        blocks = uai_grid_blocks(network)
        rows_all = np.concatenate([t.reshape(-1, t.shape[-1]) for t in network.tables])
        det = float(np.mean(np.any(rows_all == 0, axis=1)))
        print(
            f"{label}: {network.n_vars} vars, {len(blocks)} blocks, {det:.0%} deterministic "
            "CPT rows",
            flush=True,
        )
        for name in args.samplers:
            for rep in range(args.repeats):
                if rep not in models:
                    models[rep] = read_uai(network, evidence, seed=rep)
                model = models[rep]
                t0 = time.perf_counter()
                with model:
                    step = make_step(name, model, blocks, proposal)
                setup = time.perf_counter() - t0
                # pilot: time per draw, then enough draws for the budget
                _, pilot, _ = run_one(model, step, 20, seed=1000 + rep)
                per_draw = max((pilot[-1] - pilot[0]) / 19, 1e-4)  # after first-use compiling
                draws = max(10, int(args.seconds / per_draw))
                with model:
                    step = make_step(name, model, blocks, proposal)
                states, stamps, idata = run_one(model, step, draws, seed=rep)
                err, at = error_curve(states, stamps, exact, free, checkpoints)
                stats = getattr(idata, "sample_stats", {})
                row = {
                    "grid": label,
                    "n_vars": int(network.n_vars),
                    "deterministic_rows": det,
                    "sampler": name,
                    "repeat": rep,
                    "setup_seconds": setup,
                    "seconds": float(stamps[-1]),
                    "draws": draws,
                    "draws_per_second": draws / float(stamps[-1]),
                    "final_error": float(err[-1]),
                    "error_at": dict(zip([f"{c:g}s" for c in checkpoints], at, strict=True)),
                    "accept": float(stats["accept"].mean()) if "accept" in stats else None,
                }
                rows.append(row)
                curves[(label, name, rep)] = (stamps, err)
                print(
                    f"  {name:12s} rep {rep}: {draws} draws in {row['seconds']:.1f}s "
                    f"(setup {setup:.1f}s), error {row['final_error']:.4f}, "
                    f"accept {row['accept'] if row['accept'] is None else round(row['accept'], 3)}",
                    flush=True,
                )
    write_outputs(rows, curves, args, grids, checkpoints, proposal)


def write_outputs(rows, curves, args, grids, checkpoints, proposal) -> None:
    stem = "grid_bn_neural_block" + (f"_{args.tag}" if args.tag else "")
    meta = {
        "seconds": args.seconds,
        "repeats": args.repeats,
        "proposal": repr(proposal),
        "proposal_training": proposal.metadata.get("training"),
        "proposal_kl_after": proposal.metadata.get("kl_after"),
    }
    # markdown: median over repeats of the final error and the error at half time
    lines = [
        f"Mean absolute marginal error after {args.seconds:g} s of sampling (median over "
        f"{args.repeats} repeat(s); one chain; lower is better). In brackets: the error at "
        f"{checkpoints[1]:g} s.",
        "",
        "| grid | vars | det. rows | " + " | ".join(args.samplers) + " | neural accept |",
        "|---|---|---|" + "---|" * len(args.samplers) + "---|",
    ]
    for label, _ in grids:
        sub = [r for r in rows if r["grid"] == label]
        if not sub:
            continue
        cells = []
        for name in args.samplers:
            rs = [r for r in sub if r["sampler"] == name]
            fin = np.median([r["final_error"] for r in rs])
            mid = [r["error_at"][f"{checkpoints[1]:g}s"] for r in rs]
            mid = [m for m in mid if m is not None]
            cells.append(f"{fin:.4f} ({np.median(mid):.4f})" if mid else f"{fin:.4f}")
        acc = [r["accept"] for r in sub if r["sampler"] == "neural"]
        acc_cell = f"{np.median(acc):.3f}" if acc else "-"
        lines.append(
            f"| {label} | {sub[0]['n_vars']} | {sub[0]['deterministic_rows']:.0%} | "
            + " | ".join(cells)
            + f" | {acc_cell} |"
        )
    lines += [
        "",
        "Draws per second (median): "
        + "; ".join(
            f"{label}: "
            + ", ".join(
                f"{name} {np.median([r['draws_per_second'] for r in rows if r['grid'] == label and r['sampler'] == name]):.1f}"  # noqa: E501
                for name in args.samplers
            )
            for label, _ in grids
        ),
    ]
    write_results(stem, {"meta": meta, "runs": rows}, "\n".join(lines) + "\n", indent=1)
    try:
        plt = pyplot()
    except ImportError:
        return
    n = len(grids)
    cols = min(n, 3)
    fig, axes = plt.subplots(
        (n + cols - 1) // cols, cols, figsize=(4.2 * cols, 3.3 * ((n + cols - 1) // cols))
    )
    axes = np.atleast_1d(axes).ravel()
    colors = dict(zip(SAMPLERS, ("C3", "C2", "C0", "C7"), strict=True))
    for ax, (label, _) in zip(axes, grids, strict=False):
        for (g, name, rep), (stamps, err) in curves.items():
            if g != label:
                continue
            ax.plot(
                stamps, err, color=colors[name], alpha=0.9, lw=1.2, label=name if rep == 0 else None
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(label)
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("mean |marginal error|")
        ax.grid(alpha=0.3, which="both")
    for ax in axes[n:]:
        ax.axis("off")
    axes[0].legend(fontsize=8)
    save_figure(fig, RESULTS / f"{stem}.png")


if __name__ == "__main__":
    main()
